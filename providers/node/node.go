// Package node serves node.k8s.io/v1 runtime classes.
package node

import (
	"strings"

	nodev1 "k8s.io/api/node/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"
)

// Provider serves node.k8s.io.
func Provider() providers.Provider { return group }

var group = registry.Group{
	GroupVersion: nodev1.SchemeGroupVersion, AddToScheme: nodev1.AddToScheme,
	Served: []registry.Served{registry.Kind[*nodev1.RuntimeClass]{
		GroupVersion: nodev1.SchemeGroupVersion, Resource: "runtimeclasses", Singular: "runtimeclass",
		NewObj:  func() runtime.Object { return &nodev1.RuntimeClass{} },
		NewList: func() runtime.Object { return &nodev1.RuntimeClassList{} },
		Validate: func(rc *nodev1.RuntimeClass) field.ErrorList {
			p := field.NewPath("handler")
			if rc.Handler == "" {
				return field.ErrorList{field.Required(p, "")}
			}
			var errs field.ErrorList
			for _, msg := range validation.IsDNS1123Label(rc.Handler) {
				errs = append(errs, field.Invalid(p, rc.Handler, msg))
			}
			return errs
		},
		ValidateUpdate: func(rc, old *nodev1.RuntimeClass) field.ErrorList {
			return apivalidation.ValidateImmutableField(rc.Handler, old.Handler, field.NewPath("handler"))
		},
		// kube-apiserver describes this column with an empty string.
		Columns: []registry.Column{registry.ColumnOf("Handler", "string", "", 0, func(rc *nodev1.RuntimeClass) any { return strings.Clone(rc.Handler) })},
	}},
}
