package core

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeembed/apiserver/providers/internal/podspec"
	"github.com/kubeembed/apiserver/providers/registry"
)

var podTemplates = registry.Kind[*corev1.PodTemplate]{
	Default:      func(o *corev1.PodTemplate) { podspec.DefaultTemplate(&o.Template) },
	GroupVersion: corev1.SchemeGroupVersion,
	Resource:     "podtemplates", Singular: "podtemplate", Namespaced: true, Generation: true, ReturnDeleted: true,
	NewObj:  func() runtime.Object { return &corev1.PodTemplate{} },
	NewList: func() runtime.Object { return &corev1.PodTemplateList{} },
	Validate: func(t *corev1.PodTemplate) field.ErrorList {
		return podspec.ValidateTemplate(&t.Template, field.NewPath("template"))
	},
	Columns: []registry.Column{
		registry.TemplateColumns(0, func(t *corev1.PodTemplate) *corev1.PodTemplateSpec { return &t.Template })[0],
		registry.TemplateColumns(0, func(t *corev1.PodTemplate) *corev1.PodTemplateSpec { return &t.Template })[1],
		registry.ColumnOf("Pod Labels", "string", "The labels for the pod template.", 0, func(t *corev1.PodTemplate) any { return labels.FormatLabels(t.Template.Labels) }),
	},
	NoAge: true,
}
