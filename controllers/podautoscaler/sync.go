package podautoscaler

// One reconciliation of an HPA: its target's scale, the count its metrics
// want, the scale written, the status.

import (
	"context"
	"fmt"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// decision is what a reconciliation settled on.
type decision struct {
	current, desired int32
	reason           string // of a rescale, for its event
	rescale          bool
	failed           bool // the metrics could not say
	statuses         []autoscalingv2.MetricStatus
}

// reconcile scales the target of hpa (a copy the sync owns) and writes
// hpa's status.
func (c *Controller) reconcile(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, key string) error {
	original := hpa.Status.DeepCopy()
	defaultBehavior(hpa.Spec.Behavior)
	now := c.clock.Now()
	ref := hpa.Spec.ScaleTargetRef
	reference := fmt.Sprintf("%s/%s/%s", ref.Kind, hpa.Namespace, ref.Name)
	scale, gr, err := c.targets.get(ctx, hpa.Namespace, ref)
	if err != nil {
		c.recorder().Event(hpa, corev1.EventTypeWarning, "FailedGetScale", err.Error())
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedGetScale",
			fmt.Sprintf("the HPA controller was unable to get the target's current scale: %v", err), now)
		_ = c.writeStatus(ctx, original, hpa) // a failure is an event; the sync's error is the scale's
		return fmt.Errorf("failed to query scale subresource for %s: %w", reference, err)
	}
	setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededGetScale", "the HPA controller was able to get the target's current scale", now)
	c.history.initial(key, scale.Spec.Replicas, now)
	d, err := c.decide(ctx, hpa, key, scale, now)
	if d.failed {
		setStatus(hpa, d.current, hpa.Status.DesiredReplicas, d.statuses, false, now)
		_ = c.writeStatus(ctx, original, hpa) // a failure is an event; the sync's error is the metrics'
		c.recorder().Event(hpa, corev1.EventTypeWarning, "FailedComputeMetricsReplicas", err.Error())
		return fmt.Errorf("failed to compute desired number of replicas based on listed metrics for %s: %w", reference, err)
	}
	if d.rescale {
		if err := c.rescale(ctx, hpa, key, scale, gr, d, now); err != nil {
			setStatus(hpa, d.current, hpa.Status.DesiredReplicas, d.statuses, false, now)
			_ = c.writeStatus(ctx, original, hpa) // a failure is an event; the sync's error is the rescale's
			return fmt.Errorf("failed to rescale %s: %w", reference, err)
		}
	} else {
		d.desired = d.current
	}
	setStatus(hpa, d.current, d.desired, d.statuses, d.rescale, now)
	if werr := c.writeStatus(ctx, original, hpa); werr != nil {
		return werr
	}
	return err
}

// decide is the count the target should have, or failed when its metrics
// could not say (ScalingActive is then False). An error with a decision
// that did not fail is a metric that failed while others decided.
func (c *Controller) decide(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, key string, scale *autoscalingv1.Scale, now time.Time) (*decision, error) {
	d := &decision{current: scale.Spec.Replicas, rescale: true}
	minReplicas := int32(1)
	if hpa.Spec.MinReplicas != nil {
		minReplicas = *hpa.Spec.MinReplicas
	}
	// Scale to zero (HPAScaleToZero, on by default in 1.37): a target the
	// controller scaled to zero is scaled from its object and external
	// metrics, or back to a minReplicas raised meanwhile.
	toZero := conditionTrue(hpa, autoscalingv2.ScaledToZero)
	switch {
	case d.current == 0:
		if !(minReplicas != 0 && toZero) && !(toZero && objectOrExternal(hpa)) {
			d.desired, d.rescale = 0, false
			setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "ScalingDisabled", "scaling is disabled since the replica count of the target is zero", now)
			return d, nil
		}
	case d.current > hpa.Spec.MaxReplicas:
		d.desired, d.reason = hpa.Spec.MaxReplicas, "Current number of replicas above Spec.MaxReplicas"
		return d, nil
	case d.current < minReplicas:
		d.desired, d.reason = minReplicas, "Current number of replicas below Spec.MinReplicas"
		return d, nil
	}
	proposed, metric, statuses, err := c.replicasForMetrics(ctx, hpa, scale, now)
	d.statuses = statuses
	if err != nil && proposed == -1 {
		d.failed = true
		return d, err
	}
	rescaleMetric := ""
	if proposed > d.desired {
		d.desired, rescaleMetric = proposed, metric
	}
	switch {
	case d.desired > d.current:
		d.reason = rescaleMetric + " above target"
	case d.desired < d.current:
		d.reason = "All metrics below target"
	}
	if hpa.Spec.Behavior == nil {
		d.desired = c.normalize(hpa, key, d.current, d.desired, minReplicas, now)
	} else {
		d.desired = c.normalizeWithBehavior(hpa, key, d.current, d.desired, minReplicas, now)
	}
	if d.current == 0 && minReplicas != 0 && toZero && d.desired < minReplicas {
		d.desired = minReplicas
		if d.reason == "" {
			d.reason = "Current number of replicas below Spec.MinReplicas"
		}
	}
	d.rescale = d.desired != d.current
	return d, err
}

func objectOrExternal(hpa *autoscalingv2.HorizontalPodAutoscaler) bool {
	for _, m := range hpa.Spec.Metrics {
		if m.Type == autoscalingv2.ObjectMetricSourceType || m.Type == autoscalingv2.ExternalMetricSourceType {
			return true
		}
	}
	return false
}

// rescale writes the decided count to the target's scale, and records
// the outcome: an event, AbleToScale, ScaledToZero after a success.
func (c *Controller) rescale(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, key string, scale *autoscalingv1.Scale, gr schema.GroupResource,
	d *decision, now time.Time) error {
	if err := c.targets.update(ctx, hpa.Namespace, gr, scale, d.desired); err != nil {
		c.recorder().Eventf(hpa, corev1.EventTypeWarning, "FailedRescale", "New size: %d; reason: %s; error: %v", d.desired, d.reason, err.Error())
		setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedUpdateScale",
			fmt.Sprintf("the HPA controller was unable to update the target scale: %v", err), now)
		return err
	}
	setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededRescale",
		fmt.Sprintf("the HPA controller was able to update the target scale to %d", d.desired), now)
	c.recorder().Eventf(hpa, corev1.EventTypeNormal, "SuccessfulRescale", "New size: %d; reason: %s", d.desired, d.reason)
	c.history.storeScaleEvent(hpa.Spec.Behavior, key, d.current, d.desired, now)
	minReplicas := int32(1)
	if hpa.Spec.MinReplicas != nil {
		minReplicas = *hpa.Spec.MinReplicas
	}
	if d.current > 0 && d.desired == 0 && minReplicas == 0 && objectOrExternal(hpa) {
		setCondition(hpa, autoscalingv2.ScaledToZero, corev1.ConditionTrue, "ScaledToZero", "the HPA controller scaled the workload to zero", now)
	} else {
		setCondition(hpa, autoscalingv2.ScaledToZero, corev1.ConditionFalse, "NotScaledToZero", "the HPA controller did not scale the workload to zero", now)
	}
	return nil
}

// setStatus remakes the HPA's status from the counts and metrics, its
// conditions and last scale time kept (now after a rescale).
func setStatus(hpa *autoscalingv2.HorizontalPodAutoscaler, current, desired int32, statuses []autoscalingv2.MetricStatus, rescaled bool, now time.Time) {
	generation := hpa.Generation
	hpa.Status = autoscalingv2.HorizontalPodAutoscalerStatus{ObservedGeneration: &generation, CurrentReplicas: current, DesiredReplicas: desired,
		LastScaleTime: hpa.Status.LastScaleTime, CurrentMetrics: statuses, Conditions: hpa.Status.Conditions}
	if rescaled {
		t := metav1.NewTime(now)
		hpa.Status.LastScaleTime = &t
	}
}

// writeStatus writes the HPA's status when it differs from original.
func (c *Controller) writeStatus(ctx context.Context, original *autoscalingv2.HorizontalPodAutoscalerStatus, hpa *autoscalingv2.HorizontalPodAutoscaler) error {
	if apiequality.Semantic.DeepEqual(original, &hpa.Status) {
		return nil
	}
	if _, err := c.client.AutoscalingV2().HorizontalPodAutoscalers(hpa.Namespace).UpdateStatus(ctx, hpa, metav1.UpdateOptions{}); err != nil {
		c.recorder().Event(hpa, corev1.EventTypeWarning, "FailedUpdateStatus", err.Error())
		return fmt.Errorf("failed to update status for %s: %w", hpa.Name, err)
	}
	return nil
}
