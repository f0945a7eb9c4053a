package podautoscaler

import (
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// setCondition sets the HPA's condition of type t (appended when it has
// none), its transition time now when its status changes.
func setCondition(hpa *autoscalingv2.HorizontalPodAutoscaler, t autoscalingv2.HorizontalPodAutoscalerConditionType, status corev1.ConditionStatus,
	reason, message string, now time.Time) {
	conds := hpa.Status.Conditions
	i := 0
	for i < len(conds) && conds[i].Type != t {
		i++
	}
	if i == len(conds) {
		conds = append(conds, autoscalingv2.HorizontalPodAutoscalerCondition{Type: t})
	}
	if conds[i].Status != status {
		conds[i].LastTransitionTime = metav1.NewTime(now)
	}
	conds[i].Status, conds[i].Reason, conds[i].Message = status, reason, message
	hpa.Status.Conditions = conds
}

// conditionTrue reports whether the HPA's condition of type t is True.
func conditionTrue(hpa *autoscalingv2.HorizontalPodAutoscaler, t autoscalingv2.HorizontalPodAutoscalerConditionType) bool {
	for _, c := range hpa.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
