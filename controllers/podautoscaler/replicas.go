package podautoscaler

// Upstream's replica calculation: a usage ratio to the target, pods
// without metrics and unready pods accounted for, within the tolerances.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcehelpers "k8s.io/component-helpers/resource"

	"github.com/kubeembed/apiserver/internal/controller"
)

var errNoPods = errors.New("no pods returned by selector while calculating replica count")

// tolerances are the usage ratio's tolerances around 1.
type tolerances struct{ down, up float64 }

func (t tolerances) within(ratio float64) bool { return 1-t.down <= ratio && ratio <= 1+t.up }

// tolerancesOf are the controller's tolerance, or the behavior's per
// direction (HPAConfigurableTolerance, GA in 1.37).
func tolerancesOf(hpa *autoscalingv2.HorizontalPodAutoscaler) tolerances {
	t := tolerances{defaultTolerance, defaultTolerance}
	b := hpa.Spec.Behavior
	if b == nil {
		return t
	}
	if b.ScaleDown != nil && b.ScaleDown.Tolerance != nil {
		t.down = b.ScaleDown.Tolerance.AsApproximateFloat64()
	}
	if b.ScaleUp != nil && b.ScaleUp.Tolerance != nil {
		t.up = b.ScaleUp.Tolerance.AsApproximateFloat64()
	}
	return t
}

// podsOf are the pods selector picks in namespace; none is an error.
func (c *Controller) podsOf(namespace string, selector labels.Selector) ([]*corev1.Pod, error) {
	pods, err := c.pods.Pods(namespace).List(selector)
	if err != nil {
		return nil, fmt.Errorf("unable to get pods while calculating replica count: %w", err)
	}
	if len(pods) == 0 {
		return nil, errNoPods
	}
	return pods, nil
}

// resourceReplicas is the count for a target utilization of resource (a
// percentage of the pods' requests), with the utilization and the raw
// average usage.
func (c *Controller) resourceReplicas(ctx context.Context, current, target int32, resource corev1.ResourceName, tol tolerances, namespace string,
	selector labels.Selector, container string) (int32, int32, int64, time.Time, error) {
	metrics, ts, err := c.metrics.resourceMetric(ctx, resource, namespace, selector, container)
	if err != nil {
		return 0, 0, 0, time.Time{}, fmt.Errorf("unable to get metrics for resource %s: %w", resource, err)
	}
	pods, err := c.podsOf(namespace, selector)
	if err != nil {
		return 0, 0, 0, time.Time{}, err
	}
	g := c.groupPods(pods, metrics, resource)
	if len(metrics) == 0 {
		return 0, 0, 0, time.Time{}, errors.New("did not receive metrics for targeted pods (pods might be unready)")
	}
	requests, err := requestsOf(pods, container, resource)
	if err != nil {
		return 0, 0, 0, time.Time{}, err
	}
	ratio, utilization, raw, err := utilizationRatio(metrics, requests, target)
	if err != nil {
		return 0, 0, 0, time.Time{}, err
	}
	withUnready := len(g.unready) > 0 && ratio > 1
	if !withUnready && len(g.missing) == 0 {
		if tol.within(ratio) {
			return current, utilization, raw, ts, nil
		}
		return int32(math.Ceil(ratio * float64(g.ready))), utilization, raw, ts, nil
	}
	// On a scale down, pods without metrics use 100 % of their request
	// (or the target above 100 %); on a scale up, they and the unready
	// pods use none.
	for name := range g.missing {
		switch {
		case ratio < 1:
			metrics[name] = podMetric{value: requests[name] * int64(max(100, target)) / 100}
		case ratio > 1:
			metrics[name] = podMetric{}
		}
	}
	if withUnready {
		for name := range g.unready {
			metrics[name] = podMetric{}
		}
	}
	newRatio, _, _, err := utilizationRatio(metrics, requests, target)
	if err != nil {
		return 0, utilization, raw, time.Time{}, err
	}
	return rebalanced(current, ratio, newRatio, len(metrics), tol), utilization, raw, ts, nil
}

// rebalanced is the count from the ratio recomputed with the pods that
// had no metrics or were unready: the current one when within tolerance
// or when it would scale the other way.
func rebalanced(current int32, ratio, newRatio float64, n int, tol tolerances) int32 {
	if tol.within(newRatio) || (ratio < 1 && newRatio > 1) || (ratio > 1 && newRatio < 1) {
		return current
	}
	replicas := int32(math.Ceil(newRatio * float64(n)))
	if (newRatio < 1 && replicas > current) || (newRatio > 1 && replicas < current) {
		return current
	}
	return replicas
}

// rawResourceReplicas is the count for a target average usage of
// resource, with the average usage.
func (c *Controller) rawResourceReplicas(ctx context.Context, current int32, target int64, resource corev1.ResourceName, tol tolerances, namespace string,
	selector labels.Selector, container string) (int32, int64, time.Time, error) {
	metrics, ts, err := c.metrics.resourceMetric(ctx, resource, namespace, selector, container)
	if err != nil {
		return 0, 0, time.Time{}, fmt.Errorf("unable to get metrics for resource %s: %w", resource, err)
	}
	replicas, usage, err := c.plainReplicas(metrics, current, target, tol, namespace, selector, resource)
	return replicas, usage, ts, err
}

// podsMetricReplicas is the count for a target average of a custom pods
// metric.
func (c *Controller) podsMetricReplicas(current int32, target int64, name string, tol tolerances, namespace string, selector, metricSelector labels.Selector) (int32, int64, time.Time, error) {
	metrics, ts, err := c.metrics.rawMetric(name, namespace, selector, metricSelector)
	if err != nil {
		return 0, 0, time.Time{}, fmt.Errorf("unable to get metric %s: %w", name, err)
	}
	replicas, usage, err := c.plainReplicas(metrics, current, target, tol, namespace, selector, "")
	return replicas, usage, ts, err
}

// plainReplicas is the count for a target average value (not a
// utilization) of metrics.
func (c *Controller) plainReplicas(metrics podMetrics, current int32, target int64, tol tolerances, namespace string, selector labels.Selector,
	resource corev1.ResourceName) (int32, int64, error) {
	pods, err := c.podsOf(namespace, selector)
	if err != nil {
		return 0, 0, err
	}
	g := c.groupPods(pods, metrics, resource)
	if len(metrics) == 0 {
		return 0, 0, errors.New("did not receive metrics for targeted pods (pods might be unready)")
	}
	ratio, usage := usageRatio(metrics, target)
	withUnready := len(g.unready) > 0 && ratio > 1
	if !withUnready && len(g.missing) == 0 {
		if tol.within(ratio) {
			return current, usage, nil
		}
		return int32(math.Ceil(ratio * float64(g.ready))), usage, nil
	}
	// On a scale down, pods without metrics use the target exactly; on a
	// scale up, they and the unready pods use none.
	for name := range g.missing {
		switch {
		case ratio < 1:
			metrics[name] = podMetric{value: target}
		case ratio > 1:
			metrics[name] = podMetric{}
		}
	}
	if withUnready {
		for name := range g.unready {
			metrics[name] = podMetric{}
		}
	}
	newRatio, _ := usageRatio(metrics, target)
	return rebalanced(current, ratio, newRatio, len(metrics), tol), usage, nil
}

// grouped are pods by how their metrics count.
type grouped struct {
	ready            int
	unready, missing sets.Set[string]
}

// groupPods sorts pods: deleted and failed ones are ignored, pending ones
// are unready, those without a metric are missing; for cpu, a pod is
// unready while it is not Ready within the initialisation period, or its
// metric predates one window after it became Ready, or, later, while it
// has never been Ready. The metrics of ignored and unready pods are
// dropped.
func (c *Controller) groupPods(pods []*corev1.Pod, metrics podMetrics, resource corev1.ResourceName) grouped {
	g := grouped{unready: sets.New[string](), missing: sets.New[string]()}
	now := c.clock.Now()
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodFailed {
			delete(metrics, pod.Name)
			continue
		}
		if pod.Status.Phase == corev1.PodPending {
			g.unready.Insert(pod.Name)
			continue
		}
		m, ok := metrics[pod.Name]
		if !ok {
			g.missing.Insert(pod.Name)
			continue
		}
		if resource == corev1.ResourceCPU && cpuUnready(pod, m, now) {
			g.unready.Insert(pod.Name)
			continue
		}
		g.ready++
	}
	for name := range g.unready {
		delete(metrics, name)
	}
	return g
}

func cpuUnready(pod *corev1.Pod, m podMetric, now time.Time) bool {
	ready := controller.PodReadyCondition(pod)
	if ready == nil || pod.Status.StartTime == nil {
		return true
	}
	if pod.Status.StartTime.Add(cpuInitializationPeriod).After(now) {
		return ready.Status == corev1.ConditionFalse || m.timestamp.Before(ready.LastTransitionTime.Add(m.window))
	}
	return ready.Status == corev1.ConditionFalse && pod.Status.StartTime.Add(initialReadinessDelay).After(ready.LastTransitionTime.Time)
}

// requestsOf are the pods' requests of resource (milli-units): the named
// container's, else the pod-level request when the pod sets one
// (PodLevelResources, on by default), else the sum of its containers' and
// restartable init containers'.
func requestsOf(pods []*corev1.Pod, container string, resource corev1.ResourceName) (map[string]int64, error) {
	out := make(map[string]int64, len(pods))
	for _, pod := range pods {
		if container == "" && resourcehelpers.IsPodLevelRequestsSet(pod) {
			r, ok := resourcehelpers.PodRequests(pod, resourcehelpers.PodResourcesOptions{})[resource]
			if !ok {
				return nil, fmt.Errorf("missing pod-level request for %s in Pod %s", resource, pod.Name)
			}
			out[pod.Name] = r.MilliValue()
			continue
		}
		r, err := containerRequests(pod, container, resource)
		if err != nil {
			return nil, err
		}
		out[pod.Name] = r
	}
	return out, nil
}

func containerRequests(pod *corev1.Pod, container string, resource corev1.ResourceName) (int64, error) {
	containers := append([]corev1.Container{}, pod.Spec.Containers...)
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			containers = append(containers, c)
		}
	}
	var sum int64
	for _, c := range containers {
		if container != "" && container != c.Name {
			continue
		}
		r, ok := c.Resources.Requests[resource]
		if !ok {
			return 0, fmt.Errorf("missing request for %s in container %s of Pod %s", resource, c.Name, pod.Name)
		}
		sum += r.MilliValue()
		if container == c.Name {
			return sum, nil
		}
	}
	if container != "" {
		return 0, fmt.Errorf("container %s not found in Pod %s", container, pod.Name)
	}
	return sum, nil
}

// utilizationRatio is the pods' usage over their requests, as a ratio to
// the target utilization, the utilization (a percentage) and the average
// usage. Metrics of pods without a request are left out.
func utilizationRatio(metrics podMetrics, requests map[string]int64, target int32) (float64, int32, int64, error) {
	var usage, requested int64
	n := 0
	for name, m := range metrics {
		r, ok := requests[name]
		if !ok {
			continue
		}
		usage += m.value
		requested += r
		n++
	}
	if requested == 0 {
		return 0, 0, 0, errors.New("no metrics returned matched known pods")
	}
	utilization := int32(usage * 100 / requested)
	return float64(utilization) / float64(target), utilization, usage / int64(n), nil
}

// usageRatio is the pods' average value as a ratio to target, and the
// average.
func usageRatio(metrics podMetrics, target int64) (float64, int64) {
	var total int64
	for _, m := range metrics {
		total += m.value
	}
	avg := total / int64(len(metrics))
	return float64(avg) / float64(target), avg
}

// objectReplicas is the count for a target value of an object's metric,
// with the value.
func (c *Controller) objectReplicas(current int32, target int64, name string, tol tolerances, namespace string, ref *autoscalingv2.CrossVersionObjectReference,
	selector, metricSelector labels.Selector) (int32, int64, time.Time, error) {
	usage, _, err := c.metrics.objectMetric(name, namespace, ref, metricSelector)
	if err != nil {
		return 0, 0, time.Time{}, fmt.Errorf("unable to get metric %s on %s %s/%s: %w", name, ref.Kind, namespace, ref.Name, err)
	}
	replicas, err := c.ratioReplicas(current, float64(usage)/float64(target), tol, namespace, selector)
	return replicas, usage, time.Time{}, err
}

// ratioReplicas is the count of ready pods scaled by ratio, or, from zero
// replicas, the ratio rounded up (scale from zero).
func (c *Controller) ratioReplicas(current int32, ratio float64, tol tolerances, namespace string, selector labels.Selector) (int32, error) {
	if current == 0 {
		return int32(math.Ceil(ratio)), nil
	}
	if tol.within(ratio) {
		return current, nil
	}
	pods, err := c.podsOf(namespace, selector)
	if err != nil {
		return 0, fmt.Errorf("unable to calculate ready pods: %s", err)
	}
	ready := 0
	for _, pod := range pods {
		if pod.Status.Phase == corev1.PodRunning && controller.PodReady(pod) {
			ready++
		}
	}
	return clampInt32(ratio * float64(ready)), nil
}

func clampInt32(f float64) int32 {
	if f > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(math.Ceil(f))
}

// objectPerPodReplicas is the count for a target average (per replica) of
// an object's metric, with the average.
func (c *Controller) objectPerPodReplicas(statusReplicas int32, target int64, name string, tol tolerances, namespace string,
	ref *autoscalingv2.CrossVersionObjectReference, metricSelector labels.Selector) (int32, int64, time.Time, error) {
	usage, ts, err := c.metrics.objectMetric(name, namespace, ref, metricSelector)
	if err != nil {
		return 0, 0, time.Time{}, fmt.Errorf("unable to get metric %s on %s %s/%s: %w", name, ref.Kind, namespace, ref.Name, err)
	}
	replicas := statusReplicas
	if !tol.within(float64(usage) / (float64(target) * float64(replicas))) {
		replicas = int32(math.Ceil(float64(usage) / float64(target)))
	}
	return replicas, int64(math.Ceil(float64(usage) / float64(statusReplicas))), ts, nil
}

// externalSum is the sum of an external metric's values.
func (c *Controller) externalSum(name, namespace string, metricSelector *metav1.LabelSelector) (int64, time.Time, error) {
	sel, err := metav1.LabelSelectorAsSelector(metricSelector)
	if err != nil {
		return 0, time.Time{}, err
	}
	values, ts, err := c.metrics.externalMetric(name, namespace, sel)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("unable to get external metric %s/%s/%+v: %s", namespace, name, metricSelector, err)
	}
	var sum int64
	for _, v := range values {
		if v > 0 && sum > math.MaxInt64-v {
			return math.MaxInt64, ts, nil
		}
		sum += v
	}
	return sum, ts, nil
}

// externalReplicas is the count for a target total value of an external
// metric, with the total.
func (c *Controller) externalReplicas(current int32, target int64, name string, tol tolerances, namespace string, metricSelector *metav1.LabelSelector,
	selector labels.Selector) (int32, int64, time.Time, error) {
	usage, _, err := c.externalSum(name, namespace, metricSelector)
	if err != nil {
		return 0, 0, time.Time{}, err
	}
	replicas, err := c.ratioReplicas(current, float64(usage)/float64(target), tol, namespace, selector)
	return replicas, usage, time.Time{}, err
}

// externalPerPodReplicas is the count for a target average (per replica)
// of an external metric, with the average.
func (c *Controller) externalPerPodReplicas(statusReplicas int32, target int64, name string, tol tolerances, namespace string,
	metricSelector *metav1.LabelSelector) (int32, int64, time.Time, error) {
	usage, ts, err := c.externalSum(name, namespace, metricSelector)
	if err != nil {
		return 0, 0, time.Time{}, err
	}
	replicas := statusReplicas
	if !tol.within(float64(usage) / (float64(target) * float64(replicas))) {
		replicas = clampInt32(float64(usage) / float64(target))
	}
	if float64(usage) >= float64(math.MaxInt64) {
		return replicas, math.MaxInt64, ts, nil
	}
	return replicas, int64(math.Ceil(float64(usage) / float64(statusReplicas))), ts, nil
}
