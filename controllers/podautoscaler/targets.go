package podautoscaler

// Scale targets: the /scale subresource of what an HPA's scaleTargetRef
// names, found through the RESTMapper.

import (
	"context"
	"errors"
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/util/retry"
)

// targets reads and writes targets' scale.
type targets struct {
	mapper *restmapper.DeferredDiscoveryRESTMapper
	scales scale.ScalesGetter
}

// namedConfig is cfg as upstream's horizontal-pod-autoscaler client config.
func namedConfig(cfg *rest.Config) *rest.Config {
	rc := rest.CopyConfig(cfg)
	rc.UserAgent += "/" + clientName
	rc.WarningHandler = rest.NoWarnings{}
	return rc
}

// newTargets builds the scale client as kube-controller-manager does: a
// mapper over the server's discovery, scale kinds resolved from discovery
// (uncached: it caches on its own).
func newTargets(cfg *rest.Config, disco discovery.DiscoveryInterface) (*targets, error) {
	t := &targets{mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco))}
	scales, err := scale.NewForConfig(namedConfig(cfg), t.mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(disco))
	if err != nil {
		return nil, fmt.Errorf("failed to init HPA scale client: %w", err)
	}
	t.scales = scales
	return t, nil
}

// mappings are the REST mappings of a kind; an unknown kind resets the
// mapper once (a CRD served since discovery was cached: upstream resets
// its mapper every 30 s).
func (t *targets) mappings(ctx context.Context, gk schema.GroupKind) ([]*meta.RESTMapping, error) {
	m, err := t.mapper.RESTMappings(gk)
	if meta.IsNoMatchError(err) && ctx.Err() == nil {
		t.mapper.Reset()
		m, err = t.mapper.RESTMappings(gk)
	}
	return m, err
}

// get reads the scale of ref in namespace, trying each mapping of its kind
// in turn; the first mapping's error is the one returned.
func (t *targets) get(ctx context.Context, namespace string, ref autoscalingv2.CrossVersionObjectReference) (*autoscalingv1.Scale, schema.GroupResource, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, schema.GroupResource{}, err
	}
	mappings, err := t.mappings(ctx, schema.GroupKind{Group: gv.Group, Kind: ref.Kind})
	if err != nil {
		return nil, schema.GroupResource{}, err
	}
	var first error
	for i, m := range mappings {
		gr := m.Resource.GroupResource()
		s, err := t.scales.Scales(namespace).Get(ctx, gr, ref.Name, metav1.GetOptions{})
		if err == nil {
			return s, gr, nil
		}
		if i == 0 {
			first = err
		}
	}
	if first == nil {
		first = errors.New("unrecognized resource")
	}
	return nil, schema.GroupResource{}, first
}

// update sets the replicas of s, rereading it after a failed write and
// retrying on conflicts with client-go's default backoff. It returns the
// last error.
func (t *targets) update(ctx context.Context, namespace string, gr schema.GroupResource, s *autoscalingv1.Scale, replicas int32) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s.Spec.Replicas = replicas
		_, err := t.scales.Scales(namespace).Update(ctx, gr, s, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		if latest, getErr := t.scales.Scales(namespace).Get(ctx, gr, s.Name, metav1.GetOptions{}); getErr == nil {
			s = latest
		}
		return err
	})
}
