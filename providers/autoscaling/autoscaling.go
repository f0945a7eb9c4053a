// Package autoscaling serves autoscaling/v2 horizontal pod autoscalers,
// with status, and autoscaling/v1 by conversion from v2 (see v1.go).
package autoscaling

import (
	"context"
	"fmt"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"

	"github.com/kubeembed/apiserver/internal/hpa"
)

var gv = autoscalingv2.SchemeGroupVersion

// Provider serves autoscaling.
func Provider() providers.Provider { return group }

var group = registry.Group{
	GroupVersion: gv, AddToScheme: autoscalingv2.AddToScheme,
	// autoscaling/v1 is served by the same stores, converted (v1.go).
	Register:     installV1,
	AlsoServedAs: []string{autoscalingv1.SchemeGroupVersion.Version},
	Served: []registry.Served{registry.Kind[*autoscalingv2.HorizontalPodAutoscaler]{
		Default: func(h *autoscalingv2.HorizontalPodAutoscaler) {
			if h.Spec.MinReplicas == nil {
				h.Spec.MinReplicas = ptr.To[int32](1)
			}
			if len(h.Spec.Metrics) == 0 {
				h.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType,
					Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
						Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)}}}}
			}
			hpa.DefaultBehavior(h.Spec.Behavior)
		},

		GroupVersion: gv, Resource: "horizontalpodautoscalers", Singular: "horizontalpodautoscaler",
		ShortNames: []string{"hpa"}, Categories: []string{"all"}, Namespaced: true, Status: true, Generation: true,
		NewObj:   func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscaler{} },
		NewList:  func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscalerList{} },
		Validate: validate,
		// An update's checks depend on the old object (validateUpdate), and
		// replace the create checks rather than add to them.
		Customize: func(_ providers.Config, store *registry.Store, _ map[string]rest.Storage) error {
			store.Strategy.ValidateOnUpdate = func(_ context.Context, obj, old runtime.Object) field.ErrorList {
				return validateUpdate(obj.(*autoscalingv2.HorizontalPodAutoscaler), old.(*autoscalingv2.HorizontalPodAutoscaler))
			}
			return nil
		},
		Columns: []registry.Column{
			registry.ColumnOf("Reference", "string", autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()["scaleTargetRef"], 0, func(h *autoscalingv2.HorizontalPodAutoscaler) any {
				return h.Spec.ScaleTargetRef.Kind + "/" + h.Spec.ScaleTargetRef.Name
			}),
			registry.ColumnOf("Targets", "string", autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()["metrics"], 0, targets),
			registry.ColumnOf("MinPods", "string", autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()["minReplicas"], 0, func(h *autoscalingv2.HorizontalPodAutoscaler) any {
				if h.Spec.MinReplicas == nil {
					return "<unset>"
				}
				return fmt.Sprint(*h.Spec.MinReplicas)
			}),
			registry.ColumnOf("MaxPods", "string", autoscalingv2.HorizontalPodAutoscalerSpec{}.SwaggerDoc()["maxReplicas"], 0, func(h *autoscalingv2.HorizontalPodAutoscaler) any { return int64(h.Spec.MaxReplicas) }),
			registry.ColumnOf("Replicas", "string", autoscalingv2.HorizontalPodAutoscalerStatus{}.SwaggerDoc()["currentReplicas"], 0, func(h *autoscalingv2.HorizontalPodAutoscaler) any { return int64(h.Status.CurrentReplicas) }),
		},
	}},
}

// targets is the Targets column: "<current>/<target>" per metric, the
// current value <unknown> until the controller reports one.
func targets(h *autoscalingv2.HorizontalPodAutoscaler) any {
	if len(h.Spec.Metrics) == 0 {
		return "<none>"
	}
	var out []string
	for _, m := range h.Spec.Metrics {
		switch {
		case m.Resource != nil && m.Resource.Target.AverageUtilization != nil:
			out = append(out, fmt.Sprintf("%s: <unknown>/%d%%", m.Resource.Name, *m.Resource.Target.AverageUtilization))
		case m.Resource != nil && m.Resource.Target.AverageValue != nil:
			out = append(out, fmt.Sprintf("%s: <unknown>/%s", m.Resource.Name, m.Resource.Target.AverageValue.String()))
		default:
			out = append(out, "<unknown>/<unknown>")
		}
	}
	return strings.Join(out, ", ")
}
