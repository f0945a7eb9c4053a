package autoscaling

import (
	"encoding/json"
	"maps"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/providers/registry"
)

// autoscaling/v1 is served from the v2 objects (the storage version) by
// conversion, as kube-apiserver serves it: the v1 CPU target is v2's CPU
// utilization metric, and what v1 cannot express rides in annotations. Of
// those, kubeembed converts the conditions; other v2 metrics and the
// behavior are not visible through v1 (kube-apiserver encodes them in the
// "autoscaling.alpha.kubernetes.io/metrics" and ".../behavior" annotations).
const conditionsAnnotation = "autoscaling.alpha.kubernetes.io/conditions"

// roundTrip are the annotations conversion owns: never taken from clients.
var roundTrip = []string{
	"autoscaling.alpha.kubernetes.io/metrics", "autoscaling.alpha.kubernetes.io/current-metrics",
	conditionsAnnotation, "autoscaling.alpha.kubernetes.io/behavior",
	"autoscaling.alpha.kubernetes.io/scale-down-tolerance", "autoscaling.alpha.kubernetes.io/scale-up-tolerance",
}

func installV1(scheme *runtime.Scheme) error {
	gv := autoscalingv1.SchemeGroupVersion
	scheme.AddKnownTypes(gv, &autoscalingv1.HorizontalPodAutoscaler{}, &autoscalingv1.HorizontalPodAutoscalerList{})
	scheme.AddTypeDefaultingFunc(&autoscalingv1.HorizontalPodAutoscaler{}, func(obj any) {
		if h := obj.(*autoscalingv1.HorizontalPodAutoscaler); h.Spec.MinReplicas == nil {
			h.Spec.MinReplicas = ptr.To[int32](1)
		}
	})
	for _, f := range []struct {
		a, b any
		fn   conversion.ConversionFunc
	}{
		{(*autoscalingv1.HorizontalPodAutoscaler)(nil), (*autoscalingv2.HorizontalPodAutoscaler)(nil), func(a, b any, _ conversion.Scope) error {
			v1ToV2(a.(*autoscalingv1.HorizontalPodAutoscaler), b.(*autoscalingv2.HorizontalPodAutoscaler))
			return nil
		}},
		{(*autoscalingv2.HorizontalPodAutoscaler)(nil), (*autoscalingv1.HorizontalPodAutoscaler)(nil), func(a, b any, _ conversion.Scope) error {
			v2ToV1(a.(*autoscalingv2.HorizontalPodAutoscaler), b.(*autoscalingv1.HorizontalPodAutoscaler))
			return nil
		}},
		{(*autoscalingv1.HorizontalPodAutoscalerList)(nil), (*autoscalingv2.HorizontalPodAutoscalerList)(nil), func(a, b any, _ conversion.Scope) error {
			in, out := a.(*autoscalingv1.HorizontalPodAutoscalerList), b.(*autoscalingv2.HorizontalPodAutoscalerList)
			out.ListMeta, out.Items = in.ListMeta, make([]autoscalingv2.HorizontalPodAutoscaler, len(in.Items))
			for i := range in.Items {
				v1ToV2(&in.Items[i], &out.Items[i])
			}
			return nil
		}},
		{(*autoscalingv2.HorizontalPodAutoscalerList)(nil), (*autoscalingv1.HorizontalPodAutoscalerList)(nil), func(a, b any, _ conversion.Scope) error {
			in, out := a.(*autoscalingv2.HorizontalPodAutoscalerList), b.(*autoscalingv1.HorizontalPodAutoscalerList)
			out.ListMeta, out.Items = in.ListMeta, make([]autoscalingv1.HorizontalPodAutoscaler, len(in.Items))
			for i := range in.Items {
				v2ToV1(&in.Items[i], &out.Items[i])
			}
			return nil
		}},
	} {
		if err := scheme.AddConversionFunc(f.a, f.b, f.fn); err != nil {
			return err
		}
	}
	if err := registry.FieldLabelConversion(scheme, gv.WithKind("HorizontalPodAutoscaler"), true); err != nil {
		return err
	}
	// v2 stays the storage version.
	return scheme.SetVersionPriority(autoscalingv2.SchemeGroupVersion, gv)
}

// withoutRoundTrip is a copy of a without the annotations that carry v2's
// fields through v1 (nil when a is): never a itself, as the object
// converted may be shared (a watch event's, storage/memory's shared.go)
// and the result is written to.
func withoutRoundTrip(a map[string]string) map[string]string {
	out := maps.Clone(a)
	for _, k := range roundTrip {
		delete(out, k)
	}
	return out
}

func v1ToV2(in *autoscalingv1.HorizontalPodAutoscaler, out *autoscalingv2.HorizontalPodAutoscaler) {
	out.ObjectMeta = *in.ObjectMeta.DeepCopy()
	out.Annotations = withoutRoundTrip(in.Annotations)
	if len(out.Annotations) == 0 {
		out.Annotations = nil
	}
	out.Spec = autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference(in.Spec.ScaleTargetRef),
		MinReplicas:    in.Spec.MinReplicas, MaxReplicas: in.Spec.MaxReplicas,
	}
	if t := in.Spec.TargetCPUUtilizationPercentage; t != nil {
		out.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
			Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(*t)}}}}
	}
	out.Status = autoscalingv2.HorizontalPodAutoscalerStatus{
		ObservedGeneration: in.Status.ObservedGeneration, LastScaleTime: in.Status.LastScaleTime,
		CurrentReplicas: in.Status.CurrentReplicas, DesiredReplicas: in.Status.DesiredReplicas,
	}
	if c := in.Status.CurrentCPUUtilizationPercentage; c != nil {
		out.Status.CurrentMetrics = []autoscalingv2.MetricStatus{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{
			Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To(*c)}}}}
	}
	if enc, ok := in.Annotations[conditionsAnnotation]; ok {
		var conds []autoscalingv2.HorizontalPodAutoscalerCondition
		if json.Unmarshal([]byte(enc), &conds) == nil {
			out.Status.Conditions = conds
		}
	}
}

func v2ToV1(in *autoscalingv2.HorizontalPodAutoscaler, out *autoscalingv1.HorizontalPodAutoscaler) {
	out.ObjectMeta = *in.ObjectMeta.DeepCopy()
	out.Annotations = withoutRoundTrip(in.Annotations)
	out.Spec = autoscalingv1.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv1.CrossVersionObjectReference(in.Spec.ScaleTargetRef),
		MinReplicas:    in.Spec.MinReplicas, MaxReplicas: in.Spec.MaxReplicas,
	}
	for _, m := range in.Spec.Metrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU && m.Resource.Target.AverageUtilization != nil {
			out.Spec.TargetCPUUtilizationPercentage = ptr.To(*m.Resource.Target.AverageUtilization)
		}
	}
	out.Status = autoscalingv1.HorizontalPodAutoscalerStatus{
		ObservedGeneration: in.Status.ObservedGeneration, LastScaleTime: in.Status.LastScaleTime,
		CurrentReplicas: in.Status.CurrentReplicas, DesiredReplicas: in.Status.DesiredReplicas,
	}
	for _, m := range in.Status.CurrentMetrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU && m.Resource.Current.AverageUtilization != nil {
			out.Status.CurrentCPUUtilizationPercentage = ptr.To(*m.Resource.Current.AverageUtilization)
		}
	}
	if len(in.Status.Conditions) > 0 {
		if enc, err := json.Marshal(in.Status.Conditions); err == nil {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[conditionsAnnotation] = string(enc)
		}
	}
}
