package core

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/providers/internal/podspec"
	"github.com/kubeembed/apiserver/providers/internal/validation"
	"github.com/kubeembed/apiserver/providers/registry"
)

func defaultReplicationController(rc *corev1.ReplicationController) {
	var labels map[string]string
	if rc.Spec.Template != nil {
		labels = rc.Spec.Template.Labels
		podspec.DefaultTemplate(rc.Spec.Template)
	}
	if labels != nil {
		if len(rc.Spec.Selector) == 0 {
			rc.Spec.Selector = labels
		}
		if len(rc.Labels) == 0 {
			rc.Labels = labels
		}
	}
	if rc.Spec.Replicas == nil {
		rc.Spec.Replicas = ptr.To[int32](1)
	}
}

// replicationControllers are served with /status and /scale.
var replicationControllers = registry.Kind[*corev1.ReplicationController]{
	Default: defaultReplicationController,
	Status:  true, NoAge: true, Namespaced: true,
	GroupVersion: corev1.SchemeGroupVersion, Categories: []string{"all"},
	// core/v1 keeps a deleted controller's pods unless asked otherwise.
	OrphanByDefault: true,
	Resource:        "replicationcontrollers", Singular: "replicationcontroller", ShortNames: []string{"rc"},
	NewObj:       func() runtime.Object { return &corev1.ReplicationController{} },
	NewList:      func() runtime.Object { return &corev1.ReplicationControllerList{} },
	GenerationOf: func(rc *corev1.ReplicationController) any { return rc.Spec },
	Validate: func(rc *corev1.ReplicationController) field.ErrorList {
		p := field.NewPath("spec")
		errs := validation.NonNegative(p, validation.N("replicas", ptr.Deref(rc.Spec.Replicas, 0)), validation.N("minReadySeconds", rc.Spec.MinReadySeconds))
		if len(rc.Spec.Selector) == 0 {
			errs = append(errs, field.Required(p.Child("selector"), ""))
		}
		if rc.Spec.Template == nil {
			return append(errs, field.Required(p.Child("template"), ""))
		}
		for k, v := range rc.Spec.Selector {
			if rc.Spec.Template.Labels[k] != v {
				errs = append(errs, field.Invalid(p.Child("template", "metadata", "labels"), rc.Spec.Template.Labels, "`selector` does not match template `labels`"))
				break
			}
		}
		return append(errs, podspec.ValidateTemplate(rc.Spec.Template, p.Child("template"))...)
	},
	Columns: []registry.Column{
		registry.ColumnOf("Desired", "integer", corev1.ReplicationControllerSpec{}.SwaggerDoc()["replicas"], 0, func(rc *corev1.ReplicationController) any { return int64(ptr.Deref(rc.Spec.Replicas, 0)) }),
		registry.ColumnOf("Current", "integer", corev1.ReplicationControllerStatus{}.SwaggerDoc()["replicas"], 0, func(rc *corev1.ReplicationController) any { return int64(rc.Status.Replicas) }),
		registry.ColumnOf("Ready", "integer", corev1.ReplicationControllerStatus{}.SwaggerDoc()["readyReplicas"], 0, func(rc *corev1.ReplicationController) any { return int64(rc.Status.ReadyReplicas) }),
		registry.AgeColumn(),
		registry.TemplateColumns(1, rcTemplate)[0],
		registry.TemplateColumns(1, rcTemplate)[1],
		registry.ColumnOf("Selector", "string", corev1.ReplicationControllerSpec{}.SwaggerDoc()["selector"], 1, func(rc *corev1.ReplicationController) any {
			return labels.FormatLabels(rc.Spec.Selector)
		}),
	},
	Scale: &registry.ScaleAccess{
		Replicas:       func(o runtime.Object) int32 { return ptr.Deref(o.(*corev1.ReplicationController).Spec.Replicas, 0) },
		SetReplicas:    func(o runtime.Object, n int32) { o.(*corev1.ReplicationController).Spec.Replicas = &n },
		StatusReplicas: func(o runtime.Object) int32 { return o.(*corev1.ReplicationController).Status.Replicas },
		Selector: func(o runtime.Object) *metav1.LabelSelector {
			return &metav1.LabelSelector{MatchLabels: o.(*corev1.ReplicationController).Spec.Selector}
		},
	},
}

func rcTemplate(rc *corev1.ReplicationController) *corev1.PodTemplateSpec { return rc.Spec.Template }
