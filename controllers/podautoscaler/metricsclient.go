package podautoscaler

// The metrics APIs, read as upstream's REST metrics client reads them:
// metrics.k8s.io for resource metrics, custom.metrics.k8s.io for pods and
// object metrics, external.metrics.k8s.io for external ones.

import (
	"context"
	"errors"
	"fmt"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	customapi "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	metricsapi "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	resourceclient "k8s.io/metrics/pkg/client/clientset/versioned/typed/metrics/v1beta1"
	"k8s.io/metrics/pkg/client/custom_metrics"
	"k8s.io/metrics/pkg/client/external_metrics"
)

// A custom metric without a window is taken as metrics-server's.
const defaultMetricWindow = time.Minute

// podMetric is one pod's value of a metric, in milli-units.
type podMetric struct {
	timestamp time.Time
	window    time.Duration
	value     int64
}

// podMetrics are pods' values by pod name.
type podMetrics map[string]podMetric

type metricsClient struct {
	resource resourceclient.PodMetricsesGetter
	apis     custom_metrics.AvailableAPIsGetter
	custom   custom_metrics.CustomMetricsClient
	external external_metrics.ExternalMetricsClient
}

func newMetricsClient(cfg *rest.Config, disco discovery.DiscoveryInterface, mapper meta.RESTMapper) (*metricsClient, error) {
	rc := namedConfig(cfg)
	resource, err := resourceclient.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("failed to init the resource client for horizontalpodautoscaling: %w", err)
	}
	external, err := external_metrics.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("failed to init the external metrics client for horizontalpodautoscaling: %w", err)
	}
	apis := custom_metrics.NewAvailableAPIsGetter(disco)
	return &metricsClient{resource: resource, apis: apis, custom: custom_metrics.NewForConfig(rc, mapper, apis), external: external}, nil
}

// invalidate forgets the custom metrics API's versions every period until
// ctx ends.
func (m *metricsClient) invalidate(ctx context.Context, period time.Duration) {
	custom_metrics.PeriodicallyInvalidate(m.apis, period, ctx.Done())
}

// resourceMetric is the usage of resource by the pods selector picks in
// namespace (by the container named, or the sum of all containers), with
// the first pod's timestamp.
func (m *metricsClient) resourceMetric(ctx context.Context, resource corev1.ResourceName, namespace string, selector labels.Selector, container string) (podMetrics, time.Time, error) {
	list, err := m.resource.PodMetricses(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("unable to fetch metrics from resource metrics API: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, time.Time{}, errors.New("no metrics returned from resource metrics API")
	}
	out := make(podMetrics, len(list.Items))
	for _, pm := range list.Items {
		if v, ok := podUsage(pm, resource, container); ok {
			out[pm.Name] = podMetric{timestamp: pm.Timestamp.Time, window: pm.Window.Duration, value: v}
		}
	}
	return out, list.Items[0].Timestamp.Time, nil
}

// podUsage is the container's usage of resource, or the sum of every
// container's (none when one lacks it, or the pod has no containers).
func podUsage(pm metricsapi.PodMetrics, resource corev1.ResourceName, container string) (int64, bool) {
	if container != "" {
		for _, c := range pm.Containers {
			if c.Name == container {
				v, ok := c.Usage[resource]
				return v.MilliValue(), ok
			}
		}
		return 0, false
	}
	if len(pm.Containers) == 0 {
		return 0, false
	}
	var sum int64
	for _, c := range pm.Containers {
		v, ok := c.Usage[resource]
		if !ok {
			return 0, false
		}
		sum += v.MilliValue()
	}
	return sum, true
}

// rawMetric is a custom metric of the pods selector picks.
func (m *metricsClient) rawMetric(name, namespace string, selector, metricSelector labels.Selector) (podMetrics, time.Time, error) {
	list, err := m.custom.NamespacedMetrics(namespace).GetForObjects(schema.GroupKind{Kind: "Pod"}, selector, name, metricSelector)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("unable to fetch metrics from custom metrics API: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, time.Time{}, errors.New("no metrics returned from custom metrics API")
	}
	out := make(podMetrics, len(list.Items))
	for _, v := range list.Items {
		out[v.DescribedObject.Name] = podMetric{timestamp: v.Timestamp.Time, window: window(v), value: v.Value.MilliValue()}
	}
	return out, list.Items[0].Timestamp.Time, nil
}

func window(v customapi.MetricValue) time.Duration {
	if v.WindowSeconds != nil {
		return time.Duration(*v.WindowSeconds) * time.Second
	}
	return defaultMetricWindow
}

// objectMetric is a custom metric of one object (a Namespace: the HPA's).
func (m *metricsClient) objectMetric(name, namespace string, ref *autoscalingv2.CrossVersionObjectReference, metricSelector labels.Selector) (int64, time.Time, error) {
	gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
	var v *customapi.MetricValue
	var err error
	if gvk.Kind == "Namespace" && gvk.Group == "" {
		v, err = m.custom.RootScopedMetrics().GetForObject(gvk.GroupKind(), namespace, name, metricSelector)
	} else {
		v, err = m.custom.NamespacedMetrics(namespace).GetForObject(gvk.GroupKind(), ref.Name, name, metricSelector)
	}
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("unable to fetch metrics from custom metrics API: %w", err)
	}
	return v.Value.MilliValue(), v.Timestamp.Time, nil
}

// externalMetric is every value of an external metric selector picks.
func (m *metricsClient) externalMetric(name, namespace string, selector labels.Selector) ([]int64, time.Time, error) {
	list, err := m.external.NamespacedMetrics(namespace).List(name, selector)
	if err != nil {
		return []int64{}, time.Time{}, fmt.Errorf("unable to fetch metrics from external metrics API: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, time.Time{}, errors.New("no metrics returned from external metrics API")
	}
	out := make([]int64, 0, len(list.Items))
	for _, v := range list.Items {
		out = append(out, v.Value.MilliValue())
	}
	return out, list.Items[0].Timestamp.Time, nil
}
