package core

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeembed/apiserver/providers/registry"
)

var limitRanges = registry.Kind[*corev1.LimitRange]{
	Default:      defaultLimitRange,
	GroupVersion: corev1.SchemeGroupVersion,
	Resource:     "limitranges", Singular: "limitrange", ShortNames: []string{"limits"}, Namespaced: true,
	NewObj:  func() runtime.Object { return &corev1.LimitRange{} },
	NewList: func() runtime.Object { return &corev1.LimitRangeList{} },
	Columns: []registry.Column{registry.CreatedAtColumn()},
	NoAge:   true,
	Validate: func(l *corev1.LimitRange) field.ErrorList {
		var errs field.ErrorList
		types := []string{string(corev1.LimitTypePod), string(corev1.LimitTypeContainer), string(corev1.LimitTypePersistentVolumeClaim)}
		for i, item := range l.Spec.Limits {
			// Other types are allowed when qualified, as extended resources.
			if !slices.Contains(types, string(item.Type)) && !strings.Contains(string(item.Type), "/") {
				errs = append(errs, field.Invalid(field.NewPath("spec", "limits").Index(i).Child("type"), item.Type, "must be a standard limit type or fully qualified"))
			}
		}
		return errs
	},
}

// defaultLimitRange fills a container limit's default from its max, and its
// default request from the default, then from the min.
func defaultLimitRange(l *corev1.LimitRange) {
	for i := range l.Spec.Limits {
		item := &l.Spec.Limits[i]
		if item.Type != corev1.LimitTypeContainer {
			continue
		}
		fill := func(dst *corev1.ResourceList, src corev1.ResourceList) {
			for name, v := range src {
				if _, ok := (*dst)[name]; !ok {
					if *dst == nil {
						*dst = corev1.ResourceList{}
					}
					(*dst)[name] = v.DeepCopy()
				}
			}
		}
		fill(&item.Default, item.Max)
		fill(&item.DefaultRequest, item.Default)
		fill(&item.DefaultRequest, item.Min)
	}
}
