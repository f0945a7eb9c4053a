// Package coordination serves coordination.k8s.io/v1 leases, which
// client-go's leader election uses.
package coordination

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"
)

// Provider serves coordination.k8s.io.
type Provider struct{}

var _ providers.Provider = Provider{}

// GroupName implements providers.Provider.
func (Provider) GroupName() string { return coordinationv1.GroupName }

// Install implements providers.Provider.
func (Provider) Install(scheme *runtime.Scheme) error {
	if err := providers.InstallGroupVersion(scheme, coordinationv1.SchemeGroupVersion, coordinationv1.AddToScheme); err != nil {
		return err
	}
	return registry.FieldLabelConversion(scheme, coordinationv1.SchemeGroupVersion.WithKind("Lease"), true)
}

// Storage implements providers.Provider.
func (Provider) Storage(ctx providers.Config) (map[string]map[string]rest.Storage, error) {
	st := &registry.Strategy{ObjectTyper: ctx.Scheme, NameGenerator: names.SimpleNameGenerator, Namespaced: true}
	st.ValidateCreate = func(_ context.Context, obj runtime.Object) field.ErrorList {
		return validateLease(obj.(*coordinationv1.Lease))
	}
	st.ValidateOnUpdate = func(_ context.Context, obj, _ runtime.Object) field.ErrorList {
		l := obj.(*coordinationv1.Lease)
		return validateLease(l)
	}
	holder := metav1.TableColumnDefinition{Name: "Holder", Type: "string", Description: coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]}
	store, err := registry.NewStore(ctx, registry.StoreConfig{
		Resource: coordinationv1.Resource("leases"), Singular: "lease",
		NewFunc:  func() runtime.Object { return &coordinationv1.Lease{} },
		NewList:  func() runtime.Object { return &coordinationv1.LeaseList{} },
		Strategy: st,
		Table: registry.Table(registry.NameColumn(),
			registry.Column{TableColumnDefinition: holder, Value: func(o runtime.Object) any {
				if h := o.(*coordinationv1.Lease).Spec.HolderIdentity; h != nil {
					return *h
				}
				return ""
			}},
			registry.AgeColumn()),
		AttrFunc: registry.AttrFunc[*coordinationv1.Lease](true, nil),
	})
	if err != nil {
		return nil, err
	}
	return map[string]map[string]rest.Storage{"v1": {"leases": store}}, nil
}

func validateLease(l *coordinationv1.Lease) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&l.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
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
