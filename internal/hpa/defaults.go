// Package hpa holds what the autoscaling API and the HorizontalPodAutoscaler
// controller both need: kube-apiserver's defaults of a behavior.
package hpa

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/utils/ptr"
)

// DefaultBehavior fills the unset fields of a behavior's rules, as
// kube-apiserver's defaulting (SetDefaults_HorizontalPodAutoscalerBehavior)
// does when a behavior is given: scale-up with window 0, selectPolicy Max
// and the policies 4 pods and 100 % per 15 s; scale-down with selectPolicy
// Max and the policy 100 % per 15 s, its window left unset (the
// controller's --horizontal-pod-autoscaler-downscale-stabilization, 300 s,
// applies). A nil behavior stays nil.
func DefaultBehavior(b *autoscalingv2.HorizontalPodAutoscalerBehavior) {
	if b == nil {
		return
	}
	b.ScaleUp = filled(b.ScaleUp, autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0),
		Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}}})
	b.ScaleDown = filled(b.ScaleDown, autoscalingv2.HPAScalingRules{
		Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}}})
}

// filled is r with its unset fields from d (selectPolicy Max).
func filled(r *autoscalingv2.HPAScalingRules, d autoscalingv2.HPAScalingRules) *autoscalingv2.HPAScalingRules {
	d.SelectPolicy = ptr.To(autoscalingv2.MaxChangePolicySelect)
	if r == nil {
		return &d
	}
	if r.SelectPolicy != nil {
		d.SelectPolicy = r.SelectPolicy
	}
	if r.StabilizationWindowSeconds != nil {
		d.StabilizationWindowSeconds = r.StabilizationWindowSeconds
	}
	if r.Policies != nil {
		d.Policies = r.Policies
	}
	d.Tolerance = r.Tolerance
	return &d
}
