package podautoscaler

// The replica count each metric of an HPA proposes, the metric's status,
// and the ScalingActive condition a failure sets.

import (
	"context"
	"errors"
	"fmt"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// proposal is a metric's replica count, described as events and
// conditions name it.
type proposal struct {
	replicas  int32
	metric    string
	timestamp time.Time
}

// failed is a metric that could not be computed: the ScalingActive
// condition it would set.
type failed struct {
	reason, message string
}

// unable records the event of a metric that failed and returns its
// condition.
func (c *Controller) unable(hpa *autoscalingv2.HorizontalPodAutoscaler, reason string, err error) failed {
	c.recorder().Event(hpa, corev1.EventTypeWarning, reason, err.Error())
	return failed{reason, fmt.Sprintf("the HPA was unable to compute the replica count: %v", err)}
}

// replicasForMetrics is the largest count the HPA's metrics propose, the
// metric proposing it and every metric's status. It is -1 when no metric
// could be computed, or some could not and the others would scale down:
// ScalingActive is then False with the first failure. An error with a
// count is a failed metric the others outweigh.
func (c *Controller) replicasForMetrics(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, scale *autoscalingv1.Scale,
	now time.Time) (int32, string, []autoscalingv2.MetricStatus, error) {
	selector, err := c.validSelector(hpa, scale.Status.Selector, now)
	if err != nil {
		return -1, "", nil, err
	}
	specs := hpa.Spec.Metrics
	statuses := make([]autoscalingv2.MetricStatus, len(specs))
	var best proposal
	var first failed
	var firstErr error
	invalid := 0
	for i, spec := range specs {
		p, f, err := c.replicasForMetric(ctx, hpa, spec, scale.Spec.Replicas, scale.Status.Replicas, selector, &statuses[i])
		if err != nil {
			if invalid == 0 {
				first, firstErr = f, err
			}
			invalid++
			continue
		}
		if best.replicas == 0 || p.replicas > best.replicas {
			best = p
		}
	}
	if firstErr != nil {
		firstErr = fmt.Errorf("invalid metrics (%v invalid out of %v), first error is: %w", invalid, len(specs), firstErr)
	}
	if invalid >= len(specs) || (invalid > 0 && best.replicas < scale.Spec.Replicas) {
		if first.reason != "" {
			setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, first.reason, first.message, now)
		}
		return -1, "", statuses, firstErr
	}
	setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionTrue, "ValidMetricFound",
		"the HPA was able to successfully calculate a replica count from "+best.metric, now)
	return best.replicas, best.metric, statuses, firstErr
}

// validSelector parses the target's selector; it is an error, and
// ScalingActive False, when there is none, it does not parse or the pods
// it picks are also picked by another HPA's target.
func (c *Controller) validSelector(hpa *autoscalingv2.HorizontalPodAutoscaler, selector string, now time.Time) (labels.Selector, error) {
	if selector == "" {
		c.recorder().Event(hpa, corev1.EventTypeWarning, "SelectorRequired", "selector is required")
		setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "InvalidSelector", "the HPA target's scale is missing a selector", now)
		return nil, errors.New("selector is required")
	}
	parsed, err := labels.Parse(selector)
	if err != nil {
		msg := fmt.Sprintf("couldn't convert selector into a corresponding internal selector object: %v", err)
		c.recorder().Event(hpa, corev1.EventTypeWarning, "InvalidSelector", msg)
		setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "InvalidSelector", msg, now)
		return nil, errors.New(msg)
	}
	key := hpa.Namespace + "/" + hpa.Name
	if !c.selectors.putIfPresent(key, parsed) {
		return nil, fmt.Errorf("HPA %s was deleted during reconciliation", key)
	}
	pods, err := c.pods.Pods(hpa.Namespace).List(parsed)
	if err != nil {
		return nil, err
	}
	if hpas := c.selectors.matching(hpa.Namespace, pods, 2); len(hpas) > 1 {
		msg := fmt.Sprintf("pods by selector %v are controlled by more than one HPA (e.g. %v)", selector, hpas)
		c.recorder().Event(hpa, corev1.EventTypeWarning, "AmbiguousSelector", msg)
		setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "AmbiguousSelector", msg, now)
		return nil, errors.New(msg)
	}
	return parsed, nil
}

// replicasForMetric is the count one metric proposes, its status in
// status; on failure, the condition it sets.
func (c *Controller) replicasForMetric(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, spec autoscalingv2.MetricSpec,
	specReplicas, statusReplicas int32, selector labels.Selector, status *autoscalingv2.MetricStatus) (proposal, failed, error) {
	switch {
	case spec.Type == autoscalingv2.ObjectMetricSourceType && spec.Object != nil:
		p, f, err := c.objectMetric(hpa, spec.Object, specReplicas, statusReplicas, selector, status)
		if err != nil {
			return p, f, fmt.Errorf("failed to get object metric value: %w", err)
		}
		return p, f, nil
	case spec.Type == autoscalingv2.PodsMetricSourceType && spec.Pods != nil:
		p, f, err := c.podsMetric(hpa, spec.Pods, specReplicas, selector, status)
		if err != nil {
			return p, f, fmt.Errorf("failed to get pods metric value: %w", err)
		}
		return p, f, nil
	case spec.Type == autoscalingv2.ResourceMetricSourceType && spec.Resource != nil:
		p, v, err := c.resourceMetric(ctx, hpa, specReplicas, spec.Resource.Target, spec.Resource.Name, "", selector)
		if err != nil {
			return p, c.unable(hpa, "FailedGetResourceMetric", err), fmt.Errorf("failed to get %s resource metric value: %w", spec.Resource.Name, err)
		}
		*status = autoscalingv2.MetricStatus{Type: spec.Type, Resource: &autoscalingv2.ResourceMetricStatus{Name: spec.Resource.Name, Current: *v}}
		return p, failed{}, nil
	case spec.Type == autoscalingv2.ContainerResourceMetricSourceType && spec.ContainerResource != nil:
		cr := spec.ContainerResource
		p, v, err := c.resourceMetric(ctx, hpa, specReplicas, cr.Target, cr.Name, cr.Container, selector)
		if err != nil {
			return p, c.unable(hpa, "FailedGetContainerResourceMetric", err), fmt.Errorf("failed to get %s container metric value: %w", cr.Container, err)
		}
		*status = autoscalingv2.MetricStatus{Type: spec.Type,
			ContainerResource: &autoscalingv2.ContainerResourceMetricStatus{Name: cr.Name, Container: cr.Container, Current: *v}}
		return p, failed{}, nil
	case spec.Type == autoscalingv2.ExternalMetricSourceType && spec.External != nil:
		p, f, err := c.externalMetric(hpa, spec.External, specReplicas, statusReplicas, selector, status)
		if err != nil {
			return p, f, fmt.Errorf("failed to get %s external metric value: %w", spec.External.Metric.Name, err)
		}
		return p, f, nil
	}
	err := fmt.Errorf("unknown metric source type %q", string(spec.Type))
	return proposal{}, c.unable(hpa, "InvalidMetricSourceType", err), err
}

// resourceMetric is the proposal of a resource metric (of one container,
// when named): an average value or an average utilization.
func (c *Controller) resourceMetric(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, current int32, target autoscalingv2.MetricTarget,
	name corev1.ResourceName, container string, selector labels.Selector) (proposal, *autoscalingv2.MetricValueStatus, error) {
	tol := tolerancesOf(hpa)
	if target.AverageValue != nil {
		replicas, raw, ts, err := c.rawResourceReplicas(ctx, current, target.AverageValue.MilliValue(), name, tol, hpa.Namespace, selector, container)
		if err != nil {
			return proposal{}, nil, fmt.Errorf("failed to get %s usage: %w", name, err)
		}
		q := quantity(name, raw)
		return proposal{replicas, fmt.Sprintf("%s resource", name), ts}, &autoscalingv2.MetricValueStatus{AverageValue: &q}, nil
	}
	if target.AverageUtilization == nil {
		return proposal{}, nil, errors.New("invalid resource metric source: neither an average utilization target nor an average value (usage) target was set")
	}
	replicas, pct, raw, ts, err := c.resourceReplicas(ctx, current, *target.AverageUtilization, name, tol, hpa.Namespace, selector, container)
	if err != nil {
		return proposal{}, nil, fmt.Errorf("failed to get %s utilization: %w", name, err)
	}
	metric := fmt.Sprintf("%s resource utilization (percentage of request)", name)
	if container != "" {
		metric = fmt.Sprintf("%s container resource utilization (percentage of request)", name)
	}
	q := quantity(name, raw)
	return proposal{replicas, metric, ts}, &autoscalingv2.MetricValueStatus{AverageUtilization: &pct, AverageValue: &q}, nil
}

// quantity is a usage as metrics-server writes it: memory in bytes
// (binary suffixes), anything else in milli-units.
func quantity(name corev1.ResourceName, milli int64) resource.Quantity {
	if name == corev1.ResourceMemory {
		return *resource.NewMilliQuantity(milli, resource.BinarySI)
	}
	return *resource.NewMilliQuantity(milli, resource.DecimalSI)
}

// podsMetric is the proposal of a custom metric averaged over the pods.
func (c *Controller) podsMetric(hpa *autoscalingv2.HorizontalPodAutoscaler, src *autoscalingv2.PodsMetricSource, current int32, selector labels.Selector,
	status *autoscalingv2.MetricStatus) (proposal, failed, error) {
	metricSelector, err := metav1.LabelSelectorAsSelector(src.Metric.Selector)
	if err == nil && src.Target.AverageValue == nil {
		err = errors.New("invalid pods metric source: no average value target was set")
	}
	if err != nil {
		return proposal{}, c.unable(hpa, "FailedGetPodsMetric", err), err
	}
	replicas, usage, ts, err := c.podsMetricReplicas(current, src.Target.AverageValue.MilliValue(), src.Metric.Name, tolerancesOf(hpa), hpa.Namespace, selector, metricSelector)
	if err != nil {
		return proposal{}, c.unable(hpa, "FailedGetPodsMetric", err), err
	}
	*status = autoscalingv2.MetricStatus{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricStatus{
		Metric:  autoscalingv2.MetricIdentifier{Name: src.Metric.Name, Selector: src.Metric.Selector},
		Current: autoscalingv2.MetricValueStatus{AverageValue: resource.NewMilliQuantity(usage, resource.DecimalSI)}}}
	return proposal{replicas, "pods metric " + src.Metric.Name, ts}, failed{}, nil
}

// objectMetric is the proposal of a custom metric of one object: its
// value, or its average over the target's replicas.
func (c *Controller) objectMetric(hpa *autoscalingv2.HorizontalPodAutoscaler, src *autoscalingv2.ObjectMetricSource, specReplicas, statusReplicas int32,
	selector labels.Selector, status *autoscalingv2.MetricStatus) (proposal, failed, error) {
	metricSelector, err := metav1.LabelSelectorAsSelector(src.Metric.Selector)
	if err != nil {
		return proposal{}, c.unable(hpa, "FailedGetObjectMetric", err), err
	}
	st := &autoscalingv2.ObjectMetricStatus{DescribedObject: src.DescribedObject,
		Metric: autoscalingv2.MetricIdentifier{Name: src.Metric.Name, Selector: src.Metric.Selector}}
	tol := tolerancesOf(hpa)
	switch {
	case src.Target.Type == autoscalingv2.ValueMetricType && src.Target.Value != nil:
		replicas, usage, ts, err := c.objectReplicas(specReplicas, src.Target.Value.MilliValue(), src.Metric.Name, tol, hpa.Namespace, &src.DescribedObject, selector, metricSelector)
		if err != nil {
			return proposal{}, c.unable(hpa, "FailedGetObjectMetric", err), err
		}
		st.Current.Value = resource.NewMilliQuantity(usage, resource.DecimalSI)
		*status = autoscalingv2.MetricStatus{Type: autoscalingv2.ObjectMetricSourceType, Object: st}
		return proposal{replicas, fmt.Sprintf("%s metric %s", src.DescribedObject.Kind, src.Metric.Name), ts}, failed{}, nil
	case src.Target.Type == autoscalingv2.AverageValueMetricType && src.Target.AverageValue != nil:
		replicas, usage, ts, err := c.objectPerPodReplicas(statusReplicas, src.Target.AverageValue.MilliValue(), src.Metric.Name, tol, hpa.Namespace, &src.DescribedObject, metricSelector)
		if err != nil {
			return proposal{}, c.unable(hpa, "FailedGetObjectMetric", err), fmt.Errorf("failed to get %s object metric: %w", src.Metric.Name, err)
		}
		st.Current.AverageValue = resource.NewMilliQuantity(usage, resource.DecimalSI)
		*status = autoscalingv2.MetricStatus{Type: autoscalingv2.ObjectMetricSourceType, Object: st}
		// Upstream's description, "external" included.
		return proposal{replicas, fmt.Sprintf("external metric %s(%+v)", src.Metric.Name, src.Metric.Selector), ts}, failed{}, nil
	}
	err = errors.New("invalid object metric source: neither a value target nor an average value target was set")
	return proposal{}, c.unable(hpa, "FailedGetObjectMetric", err), err
}

// externalMetric is the proposal of an external metric: its total, or
// its average over the target's replicas.
func (c *Controller) externalMetric(hpa *autoscalingv2.HorizontalPodAutoscaler, src *autoscalingv2.ExternalMetricSource, specReplicas, statusReplicas int32,
	selector labels.Selector, status *autoscalingv2.MetricStatus) (proposal, failed, error) {
	tol := tolerancesOf(hpa)
	st := &autoscalingv2.ExternalMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: src.Metric.Name, Selector: src.Metric.Selector}}
	metric := fmt.Sprintf("external metric %s(%+v)", src.Metric.Name, src.Metric.Selector)
	switch {
	case src.Target.AverageValue != nil:
		replicas, usage, ts, err := c.externalPerPodReplicas(statusReplicas, src.Target.AverageValue.MilliValue(), src.Metric.Name, tol, hpa.Namespace, src.Metric.Selector)
		if err != nil {
			return proposal{}, c.unable(hpa, "FailedGetExternalMetric", err), fmt.Errorf("failed to get %s external metric: %w", src.Metric.Name, err)
		}
		st.Current.AverageValue = resource.NewMilliQuantity(usage, resource.DecimalSI)
		*status = autoscalingv2.MetricStatus{Type: autoscalingv2.ExternalMetricSourceType, External: st}
		return proposal{replicas, metric, ts}, failed{}, nil
	case src.Target.Value != nil:
		replicas, usage, ts, err := c.externalReplicas(specReplicas, src.Target.Value.MilliValue(), src.Metric.Name, tol, hpa.Namespace, src.Metric.Selector, selector)
		if err != nil {
			return proposal{}, c.unable(hpa, "FailedGetExternalMetric", err), fmt.Errorf("failed to get external metric %s: %w", src.Metric.Name, err)
		}
		st.Current.Value = resource.NewMilliQuantity(usage, resource.DecimalSI)
		*status = autoscalingv2.MetricStatus{Type: autoscalingv2.ExternalMetricSourceType, External: st}
		return proposal{replicas, metric, ts}, failed{}, nil
	}
	err := errors.New("invalid external metric source: neither a value target nor an average value target was set")
	return proposal{}, c.unable(hpa, "FailedGetExternalMetric", err), err
}
