package flowcontrol

// The priority-and-fairness-config-producer hook, as kube-apiserver's: the
// mandatory and suggested FlowSchemas and PriorityLevelConfigurations of
// k8s.io/apiserver's bootstrap configuration are created at start, and kept:
// the mandatory ones always (an operator's edits are stomped), the
// suggested ones while their autoupdate annotation says so (or, without
// one, while they are at generation 1).

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/kubernetes"
	flowcontrolv1client "k8s.io/client-go/kubernetes/typed/flowcontrol/v1"
	flowcontrolv1listers "k8s.io/client-go/listers/flowcontrol/v1"

	"github.com/kubeembed/apiserver/internal/retry"
	"github.com/kubeembed/apiserver/providers"
)

// producerFieldManager is the field manager kube-apiserver writes the
// bootstrap configuration as.
const producerFieldManager = "api-priority-and-fairness-config-producer-v1"

// ensurePeriod is how often the configuration is checked again.
const ensurePeriod = time.Minute

func configProducer(cfg providers.Config) genericapiserver.PostStartHookFunc {
	if !cfg.PriorityAndFairness {
		return nil
	}
	// What exists is read from the server's informers (the filter's own),
	// as kube-apiserver's ensurer reads its listers: a GET of each of the
	// 19 objects at start and at every pass was 19 requests of the
	// server's own to every start and every minute.
	fs := cfg.Informers.Flowcontrol().V1().FlowSchemas()
	plc := cfg.Informers.Flowcontrol().V1().PriorityLevelConfigurations()
	fsSynced, plcSynced := fs.Informer().HasSynced, plc.Informer().HasSynced
	return func(ctx genericapiserver.PostStartHookContext) error {
		client, err := kubernetes.NewForConfig(ctx.LoopbackClientConfig)
		if err != nil {
			return err
		}
		fc := client.FlowcontrolV1()
		plcs, fss := plcOps(fc, plc.Lister()), fsOps(fc, fs.Lister())
		// The priority levels first, then the flow schemas that name them
		// (kube-apiserver's ensurer writes each of its two sets levels
		// first): a flow schema written before its level is, to the
		// filter, dangling for a moment. The objects of a
		// kind are written at once, each by a goroutine of its own
		// (sequential writes of the 19 objects were the longest hook, 17 ms
		// of every start).
		ensure := func(ctx context.Context) error {
			if err := ensureAll(ctx, plcs, bootstrap.SuggestedPriorityLevelConfigurations, bootstrap.MandatoryPriorityLevelConfigurations); err != nil {
				return err
			}
			return ensureAll(ctx, fss, bootstrap.SuggestedFlowSchemas, bootstrap.MandatoryFlowSchemas)
		}
		// As kube-apiserver's hook, after the informers' sync. They are
		// started before the hooks run and have almost always synced by
		// then: checked every millisecond, not by client-go's
		// WaitForCacheSync, which sleeps 100 ms before a second look.
		if err := wait.PollUntilContextCancel(ctx, time.Millisecond, true, func(context.Context) (bool, error) {
			return fsSynced() && plcSynced(), nil
		}); err != nil {
			return fmt.Errorf("APF bootstrap configuration: informers not synced: %w", err)
		}
		if err := retry.Until(ctx, ensure); err != nil {
			return fmt.Errorf("APF bootstrap configuration: %w", err)
		}
		go retry.Every(ctx, ensurePeriod, ensure)
		return nil
	}
}

// client is what ensuring needs of a typed client (FlowSchemas' and
// PriorityLevelConfigurations' both are).
type client[T any] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// ops are what ensuring needs of one kind.
type ops[T metav1.Object] struct {
	client   client[T]
	get      func(name string) (T, error) // from the informer's cache
	copy     func(T) T
	specOf   func(T) any
	setSpec  func(into, from T)
	defaults func(T)
}

func plcOps(fc flowcontrolv1client.FlowcontrolV1Interface, l flowcontrolv1listers.PriorityLevelConfigurationLister) ops[*flowcontrolv1.PriorityLevelConfiguration] {
	return ops[*flowcontrolv1.PriorityLevelConfiguration]{client: fc.PriorityLevelConfigurations(), get: l.Get,
		copy:     (*flowcontrolv1.PriorityLevelConfiguration).DeepCopy,
		specOf:   func(o *flowcontrolv1.PriorityLevelConfiguration) any { return o.Spec },
		setSpec:  func(into, from *flowcontrolv1.PriorityLevelConfiguration) { into.Spec = *from.Spec.DeepCopy() },
		defaults: priorityLevels.Default,
	}
}

func fsOps(fc flowcontrolv1client.FlowcontrolV1Interface, l flowcontrolv1listers.FlowSchemaLister) ops[*flowcontrolv1.FlowSchema] {
	return ops[*flowcontrolv1.FlowSchema]{client: fc.FlowSchemas(), get: l.Get,
		copy:     (*flowcontrolv1.FlowSchema).DeepCopy,
		specOf:   func(o *flowcontrolv1.FlowSchema) any { return o.Spec },
		setSpec:  func(into, from *flowcontrolv1.FlowSchema) { into.Spec = *from.Spec.DeepCopy() },
		defaults: flowSchemas.Default,
	}
}

// ensureAll creates each object of the suggested and mandatory sets that
// is missing and revises those whose spec is to be kept (the mandatory
// ones always), all at once.
func ensureAll[T metav1.Object](ctx context.Context, o ops[T], suggested, mandatory []T) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, set := range []struct {
		boots     []T
		mandatory bool
	}{{suggested, false}, {mandatory, true}} {
		for _, boot := range set.boots {
			g.Go(func() error {
				if err := ensureOne(ctx, o, boot, set.mandatory); err != nil {
					return fmt.Errorf("%s: %w", boot.GetName(), err)
				}
				return nil
			})
		}
	}
	return g.Wait()
}

// ensureOne creates boot when it is missing, else revises it.
func ensureOne[T metav1.Object](ctx context.Context, o ops[T], boot T, mandatory bool) error {
	cur, err := o.get(boot.GetName())
	if apierrors.IsNotFound(err) {
		_, err = o.client.Create(ctx, o.copy(boot), metav1.CreateOptions{FieldManager: producerFieldManager})
		if apierrors.IsAlreadyExists(err) {
			return nil // created since the cache was read; revised at the next pass
		}
		return err
	}
	if err != nil {
		return err
	}
	return revise(ctx, o, cur, boot, mandatory)
}

// revise updates cur to boot's spec when it is kept up to date and differs
// (after defaulting), and sets its autoupdate annotation to what is done.
func revise[T metav1.Object](ctx context.Context, o ops[T], cur, boot T, mandatory bool) error {
	autoUpdate := mandatory
	if !autoUpdate {
		v, err := strconv.ParseBool(cur.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey])
		autoUpdate = (err == nil && v) || (err != nil && cur.GetGeneration() == 1)
	}
	want := o.copy(boot)
	if o.defaults != nil {
		o.defaults(want)
	}
	specChanged := autoUpdate && !apiequality.Semantic.DeepEqual(o.specOf(want), o.specOf(cur))
	v, err := strconv.ParseBool(cur.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey])
	annotationChanged := err != nil || v != autoUpdate
	if !specChanged && !annotationChanged {
		return nil
	}
	next := o.copy(cur)
	if specChanged {
		o.setSpec(next, boot)
	}
	annotations := next.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[flowcontrolv1.AutoUpdateAnnotationKey] = strconv.FormatBool(autoUpdate)
	next.SetAnnotations(annotations)
	_, err = o.client.Update(ctx, next, metav1.UpdateOptions{FieldManager: producerFieldManager})
	return err
}
