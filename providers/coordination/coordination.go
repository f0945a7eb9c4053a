// Package coordination serves coordination.k8s.io/v1 leases, which
// client-go's leader election uses.
package coordination

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"
)

// Provider serves coordination.k8s.io.
func Provider() providers.Provider { return group }

var group = registry.Group{
	GroupVersion: coordinationv1.SchemeGroupVersion, AddToScheme: coordinationv1.AddToScheme,
	Served: []registry.Served{registry.Kind[*coordinationv1.Lease]{
		GroupVersion: coordinationv1.SchemeGroupVersion, Resource: "leases", Singular: "lease", Namespaced: true,
		NewObj:   func() runtime.Object { return &coordinationv1.Lease{} },
		NewList:  func() runtime.Object { return &coordinationv1.LeaseList{} },
		Validate: validateLease,
		Columns: []registry.Column{registry.ColumnOf("Holder", "string", coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"], 0, func(l *coordinationv1.Lease) any {
			if h := l.Spec.HolderIdentity; h != nil {
				return *h
			}
			return ""
		})},
	}},
}

func validateLease(l *coordinationv1.Lease) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if d := l.Spec.LeaseDurationSeconds; d != nil && *d <= 0 {
		errs = append(errs, field.Invalid(spec.Child("leaseDurationSeconds"), *d, "must be greater than 0"))
	}
	if t := l.Spec.LeaseTransitions; t != nil && *t < 0 {
		errs = append(errs, field.Invalid(spec.Child("leaseTransitions"), *t, "must be greater than or equal to 0"))
	}
	if l.Spec.PreferredHolder != nil && *l.Spec.PreferredHolder != "" && (l.Spec.Strategy == nil || *l.Spec.Strategy == "") {
		errs = append(errs, field.Forbidden(spec.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	return errs
}
