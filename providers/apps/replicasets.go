package apps

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/providers/internal/podspec"
	"github.com/kubeembed/apiserver/providers/internal/validation"
	"github.com/kubeembed/apiserver/providers/registry"
)

func defaultReplicaSet(rs *appsv1.ReplicaSet) {
	if rs.Spec.Replicas == nil {
		rs.Spec.Replicas = ptr.To[int32](1)
	}
	podspec.DefaultTemplate(&rs.Spec.Template)
}

var replicaSets = registry.Kind[*appsv1.ReplicaSet]{
	Default: defaultReplicaSet,
	Status:  true, NoAge: true, Namespaced: true,
	GroupVersion: appsv1.SchemeGroupVersion, Categories: []string{"all"},
	Resource: "replicasets", Singular: "replicaset", ShortNames: []string{"rs"},
	NewObj:       func() runtime.Object { return &appsv1.ReplicaSet{} },
	NewList:      func() runtime.Object { return &appsv1.ReplicaSetList{} },
	GenerationOf: func(rs *appsv1.ReplicaSet) any { return rs.Spec },
	Validate: func(rs *appsv1.ReplicaSet) field.ErrorList {
		p := field.NewPath("spec")
		errs := validation.NonNegative(p, validation.N("replicas", ptr.Deref(rs.Spec.Replicas, 0)), validation.N("minReadySeconds", rs.Spec.MinReadySeconds))
		return append(errs, validateSelectorAndTemplate(rs.Spec.Selector, &rs.Spec.Template, "deployment", p)...)
	},
	ValidateUpdate: func(rs, old *appsv1.ReplicaSet) field.ErrorList {
		return apivalidation.ValidateImmutableField(rs.Spec.Selector, old.Spec.Selector, field.NewPath("spec", "selector"))
	},
	ValidateStatus: func(rs, _ *appsv1.ReplicaSet) field.ErrorList {
		s := rs.Status
		p := field.NewPath("status")
		errs := validation.NonNegative(p, validation.N("replicas", s.Replicas), validation.N("fullyLabeledReplicas", s.FullyLabeledReplicas),
			validation.N("readyReplicas", s.ReadyReplicas), validation.N("availableReplicas", s.AvailableReplicas), validation.N("observedGeneration", int32(min(s.ObservedGeneration, 1<<31-1))))
		const msg = "cannot be greater than status.replicas"
		for _, c := range []validation.Count{validation.N("fullyLabeledReplicas", s.FullyLabeledReplicas), validation.N("readyReplicas", s.ReadyReplicas), validation.N("availableReplicas", s.AvailableReplicas)} {
			if c.Value > s.Replicas {
				errs = append(errs, field.Invalid(p.Child(c.Name), c.Value, msg))
			}
		}
		if s.AvailableReplicas > s.ReadyReplicas {
			errs = append(errs, field.Invalid(p.Child("availableReplicas"), s.AvailableReplicas, "cannot be greater than readyReplicas"))
		}
		return errs
	},
	Columns: append([]registry.Column{
		registry.ColumnOf("Desired", "integer", appsv1.ReplicaSetSpec{}.SwaggerDoc()["replicas"], 0, func(rs *appsv1.ReplicaSet) any { return int64(ptr.Deref(rs.Spec.Replicas, 0)) }),
		registry.ColumnOf("Current", "integer", appsv1.ReplicaSetStatus{}.SwaggerDoc()["replicas"], 0, func(rs *appsv1.ReplicaSet) any { return int64(rs.Status.Replicas) }),
		registry.ColumnOf("Ready", "integer", appsv1.ReplicaSetStatus{}.SwaggerDoc()["readyReplicas"], 0, func(rs *appsv1.ReplicaSet) any { return int64(rs.Status.ReadyReplicas) }),
		registry.AgeColumn(),
	}, append(registry.TemplateColumns(1, func(rs *appsv1.ReplicaSet) *corev1.PodTemplateSpec { return &rs.Spec.Template }),
		registry.SelectorColumn(appsv1.ReplicaSetSpec{}.SwaggerDoc()["selector"], func(rs *appsv1.ReplicaSet) *metav1.LabelSelector { return rs.Spec.Selector }))...),
	Scale: &registry.ScaleAccess{
		Replicas:       func(o runtime.Object) int32 { return ptr.Deref(o.(*appsv1.ReplicaSet).Spec.Replicas, 0) },
		SetReplicas:    func(o runtime.Object, n int32) { o.(*appsv1.ReplicaSet).Spec.Replicas = &n },
		StatusReplicas: func(o runtime.Object) int32 { return o.(*appsv1.ReplicaSet).Status.Replicas },
		Selector:       func(o runtime.Object) *metav1.LabelSelector { return o.(*appsv1.ReplicaSet).Spec.Selector },
	},
}
