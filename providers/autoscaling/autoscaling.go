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

// maxTargets is how many metrics the TARGETS column shows before it counts
// the rest.
const maxTargets = 2

// unknown is a current value the status does not report.
const unknown = "<unknown>"

// targets is the TARGETS column as kube-apiserver prints it:
// "<current>/<target>" per metric, the current value read from the status
// metric at the same index, the first two, then " + N more...".
func targets(h *autoscalingv2.HorizontalPodAutoscaler) any {
	if len(h.Spec.Metrics) == 0 {
		return "<none>"
	}
	list := make([]string, len(h.Spec.Metrics))
	for i, m := range h.Spec.Metrics {
		var st *autoscalingv2.MetricStatus
		if i < len(h.Status.CurrentMetrics) {
			st = &h.Status.CurrentMetrics[i]
		}
		list[i] = metricTarget(m, st)
	}
	if len(list) <= maxTargets {
		return strings.Join(list, ", ")
	}
	return fmt.Sprintf("%s + %d more...", strings.Join(list[:maxTargets], ", "), len(list)-maxTargets)
}

// metricTarget prints one metric of the TARGETS column; st is the status
// metric at its index, nil when there is none.
func metricTarget(m autoscalingv2.MetricSpec, st *autoscalingv2.MetricStatus) string {
	switch m.Type {
	case autoscalingv2.ExternalMetricSourceType:
		if st == nil || st.External == nil {
			return valueTarget(m.External.Target, nil)
		}
		return valueTarget(m.External.Target, &st.External.Current)
	case autoscalingv2.ObjectMetricSourceType:
		if st == nil || st.Object == nil {
			return valueTarget(m.Object.Target, nil)
		}
		return valueTarget(m.Object.Target, &st.Object.Current)
	case autoscalingv2.PodsMetricSourceType:
		current := unknown
		if st != nil && st.Pods != nil {
			current = st.Pods.Current.AverageValue.String()
		}
		return current + "/" + m.Pods.Target.AverageValue.String()
	case autoscalingv2.ResourceMetricSourceType:
		if st == nil || st.Resource == nil {
			return resourceTarget(m.Resource.Name, m.Resource.Target, nil)
		}
		return resourceTarget(m.Resource.Name, m.Resource.Target, &st.Resource.Current)
	case autoscalingv2.ContainerResourceMetricSourceType:
		if st == nil || st.ContainerResource == nil {
			return resourceTarget(m.ContainerResource.Name, m.ContainerResource.Target, nil)
		}
		return resourceTarget(m.ContainerResource.Name, m.ContainerResource.Target, &st.ContainerResource.Current)
	}
	return "<unknown type>"
}

// valueTarget prints an Object or External metric: its average value
// ("(avg)") if it targets one, else its value.
func valueTarget(t autoscalingv2.MetricTarget, cur *autoscalingv2.MetricValueStatus) string {
	current := unknown
	if t.AverageValue != nil {
		if cur != nil && cur.AverageValue != nil {
			current = cur.AverageValue.String()
		}
		return current + "/" + t.AverageValue.String() + " (avg)"
	}
	if cur != nil {
		current = cur.Value.String()
	}
	return current + "/" + t.Value.String()
}

// resourceTarget prints a Resource or ContainerResource metric: its
// average value if it targets one, else its utilization ("<auto>" without
// a target).
func resourceTarget(name corev1.ResourceName, t autoscalingv2.MetricTarget, cur *autoscalingv2.MetricValueStatus) string {
	current := unknown
	if t.AverageValue != nil {
		if cur != nil {
			current = cur.AverageValue.String()
		}
		return fmt.Sprintf("%s: %s/%s", name, current, t.AverageValue.String())
	}
	if cur != nil && cur.AverageUtilization != nil {
		current = fmt.Sprintf("%d%%", *cur.AverageUtilization)
	}
	target := "<auto>"
	if t.AverageUtilization != nil {
		target = fmt.Sprintf("%d%%", *t.AverageUtilization)
	}
	return fmt.Sprintf("%s: %s/%s", name, current, target)
}
