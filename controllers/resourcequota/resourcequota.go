// Package resourcequota is the resource quota controller, as
// kube-controller-manager runs it: each ResourceQuota's status holds its
// hard limits and what its namespace uses of them, recalculated from the
// objects themselves when the quota is created or changed, when an object
// it counts is deleted or changes what it uses (a pod finishing, a
// service changing type), and every five minutes. The ResourceQuota
// admission plugin charges creations as they are admitted; this controller
// gives back what deletions free.
package resourcequota

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
	kubequota "github.com/kubeembed/apiserver/internal/quota"
	"github.com/kubeembed/apiserver/internal/retry"
	"github.com/kubeembed/apiserver/internal/writes"
)

// workers is kube-controller-manager's --concurrent-resource-quota-syncs;
// resync its --resource-quota-sync-period.
const (
	workers = 5
	resync  = 5 * time.Minute
)

// Controller is the resource quota controller.
type Controller struct {
	controller.Parts
	client   kubernetes.Interface
	quotas   corev1listers.ResourceQuotaLister
	registry quota.Registry
	ignored  map[schema.GroupResource]struct{}
	// revisions are the server's last writes per resource.
	revisions controllers.Revisions
	// primary syncs quotas whose usage is known; priority those a new
	// limit has no usage for yet, so a new quota is ready soon.
	primary, priority *controller.Queue

	mu      sync.RWMutex
	listers map[schema.GroupResource]cache.GenericLister
	// counted are the resources an object count evaluator was made for.
	counted    map[schema.GroupResource]quota.Evaluator
	subscribed atomic.Bool
}

// New returns the resource quota controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	c := &Controller{
		client: cfg.Client, quotas: cfg.Informers.Core().V1().ResourceQuotas().Lister(),
		ignored:   kubequota.Ignored(),
		primary:   controller.NewQueue("resourcequota_primary", cfg.QueueMetrics),
		priority:  controller.NewQueue("resourcequota_priority", cfg.QueueMetrics),
		listers:   map[schema.GroupResource]cache.GenericLister{},
		counted:   map[schema.GroupResource]quota.Evaluator{},
		revisions: cfg.Revisions,
	}
	c.Name, c.Observer, c.Queues = string(controllers.ResourceQuota), controller.NewObserver(cfg.Revisions), []*controller.Queue{c.primary, c.priority}
	dra := kubequota.DRA{
		Classes: cfg.Informers.Resource().V1().DeviceClasses().Lister(),
		Pods:    cfg.Informers.Core().V1().Pods().Lister(), Claims: cfg.Informers.Resource().V1().ResourceClaims().Lister(),
	}
	c.registry = generic.NewRegistry(kubequota.Configuration(c.lister, clock.RealClock{}, dra).Evaluators())
	quotas := cfg.Informers.Core().V1().ResourceQuotas()
	c.listers[corev1.Resource("resourcequotas")] = cache.NewGenericLister(quotas.Informer().GetIndexer(), corev1.Resource("resourcequotas"))
	if err := c.Observer.Watch(corev1.Resource("resourcequotas"), quotas.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: c.addQuota,
		UpdateFunc: func(old, cur any) {
			if !quota.Equals(old.(*corev1.ResourceQuota).Spec.Hard, cur.(*corev1.ResourceQuota).Spec.Hard) {
				c.addQuota(cur)
			}
		},
		// A quota counts itself (resourcequotas): the others are
		// recalculated when one goes.
		DeleteFunc: func(obj any) { c.primary.Add(key(obj)); c.replenish(corev1.Resource("resourcequotas"), obj) },
	}); err != nil {
		return nil, err
	}
	if err := c.watchEvaluated(cfg.Informers); err != nil {
		return nil, err
	}
	cfg.Monitors.Subscribe(c.resourcesChanged)
	return c, nil
}

// watchEvaluated watches the resources with evaluators of their own whole
// (their updates can change usage) from the start; the rest are counted
// from the monitors' metadata as they come.
func (c *Controller) watchEvaluated(inf informers.SharedInformerFactory) error {
	for _, gvr := range []schema.GroupVersionResource{corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithResource("services"),
		corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"), resourcev1.SchemeGroupVersion.WithResource("resourceclaims")} {
		informer, err := inf.ForResource(gvr)
		if err != nil {
			return err
		}
		gr := gvr.GroupResource()
		c.listers[gr] = informer.Lister()
		if err := c.Observer.Watch(gr, informer.Informer(), c.replenisher(gr)); err != nil {
			return err
		}
	}
	// Which extended resources a claim uses comes from the device classes:
	// a sync waits for their lister as for the counted resources'.
	return c.Observer.Watch(resourcev1.Resource("deviceclasses"), inf.Resource().V1().DeviceClasses().Informer(), cache.ResourceEventHandlerFuncs{})
}

// Run syncs quotas until ctx ends, once every counted resource is listed.
func (c *Controller) Run(ctx context.Context) {
	defer c.ShutDown() // also when ctx ends before the resources are listed
	err := controller.Wait(ctx, func() error {
		if !c.subscribed.Load() || !c.Observer.Synced() {
			return errors.New("resources not listed")
		}
		return nil
	})
	if err != nil {
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { c.primary.Run(ctx, workers, c.sync) })
	wg.Go(func() { c.priority.Run(ctx, workers, c.sync) })
	wg.Go(func() { retry.Every(ctx, resync, c.queueAll) })
	wg.Wait()
}

// queueAll queues every quota for recalculation.
func (c *Controller) queueAll(context.Context) error {
	all, err := c.quotas.List(labels.Everything())
	for _, q := range all {
		c.primary.Add(key(q))
	}
	return err
}

// addQuota queues a quota, on the priority queue when a limit has no usage
// recorded yet.
func (c *Controller) addQuota(obj any) {
	q, ok := obj.(*corev1.ResourceQuota)
	if !ok {
		return
	}
	if !apiequality.Semantic.DeepEqual(q.Spec.Hard, q.Status.Hard) {
		c.priority.Add(key(q))
		return
	}
	for name := range q.Status.Hard {
		if _, ok := q.Status.Used[name]; ok {
			continue
		}
		for _, e := range c.registry.List() {
			if len(e.MatchingResources([]corev1.ResourceName{name})) > 0 {
				c.priority.Add(key(q))
				return
			}
		}
	}
	c.primary.Add(key(q))
}

// sync recalculates a quota's usage and writes its status when it changed.
func (c *Controller) sync(ctx context.Context, k string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(k)
	if err != nil {
		return nil
	}
	// Read live, not from the informer: admission charges a quota by
	// writing its status, and a recalculation compared with an informer
	// that has not seen that charge yet found nothing to write and left
	// the charge standing (parity caught it, once in a few runs).
	q, err := c.client.CoreV1().ResourceQuotas(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	// Usage is counted from the listers: they must have seen every write
	// before the quota's, or objects created just before it (a namespace's
	// kube-root-ca.crt) are missed, and nothing recounts them (admission
	// charges only what comes after). Retried as after a failure, so
	// WaitIdle waits (seen on etcd, whose informers lag more than memory's).
	if err := c.Observer.ListersCaughtUpTo(c.revisions.Snapshot(), writes.Revision(q)); err != nil {
		return fmt.Errorf("listers behind quota %s: %w", k, err)
	}
	c.mu.RLock() // the registry and listers stay as they are during the sync
	defer c.mu.RUnlock()
	hard := quota.Add(corev1.ResourceList{}, q.Spec.Hard)
	used := quota.Add(corev1.ResourceList{}, q.Status.Used)
	usage, calcErr := quota.CalculateUsage(q.Namespace, q.Spec.Scopes, hard, c.registry, q.Spec.ScopeSelector)
	for name, v := range usage {
		used[name] = v
	}
	used = quota.Mask(used, quota.ResourceNames(hard))
	dirty := !apiequality.Semantic.DeepEqual(q.Spec.Hard, q.Status.Hard) || q.Status.Hard == nil || q.Status.Used == nil ||
		!quota.Equals(used, q.Status.Used)
	if dirty {
		q = q.DeepCopy()
		q.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: used}
		_, err = c.client.CoreV1().ResourceQuotas(q.Namespace).UpdateStatus(ctx, q, metav1.UpdateOptions{})
	}
	return errors.Join(calcErr, err)
}

func key(obj any) string {
	k, _ := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	return k
}
