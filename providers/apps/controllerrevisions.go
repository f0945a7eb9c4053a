package apps

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"
)

// controllerRevisionStorage serves controllerrevisions, whose data and
// revision are immutable.
func controllerRevisionStorage(ctx providers.Config) (map[string]rest.Storage, error) {
	st := &registry.Strategy{ObjectTyper: ctx.Scheme, NameGenerator: names.SimpleNameGenerator, Namespaced: true}
	validate := func(r *appsv1.ControllerRevision) field.ErrorList {
		errs := apivalidation.ValidateObjectMeta(&r.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
		if r.Data.Raw == nil && r.Data.Object == nil {
			errs = append(errs, field.Required(field.NewPath("data"), "data is mandatory"))
		}
		return append(errs, apivalidation.ValidateNonnegativeField(r.Revision, field.NewPath("revision"))...)
	}
	st.ValidateCreate = func(_ context.Context, obj runtime.Object) field.ErrorList {
		return validate(obj.(*appsv1.ControllerRevision))
	}
	st.ValidateOnUpdate = func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		r, o := obj.(*appsv1.ControllerRevision), old.(*appsv1.ControllerRevision)
		var errs field.ErrorList
		errs = append(errs, validate(r)...)
		return append(errs, apivalidation.ValidateImmutableField(r.Data, o.Data, field.NewPath("data"))...)
	}
	store, err := registry.NewStore(ctx, registry.StoreConfig{
		Resource: appsv1.Resource("controllerrevisions"), Singular: "controllerrevision",
		NewFunc:  func() runtime.Object { return &appsv1.ControllerRevision{} },
		NewList:  func() runtime.Object { return &appsv1.ControllerRevisionList{} },
		Strategy: st,
		Table: registry.Table(registry.NameColumn(),
			registry.ColumnOf("Controller", "string", "Controller of the object", 0, func(r *appsv1.ControllerRevision) any {
				if ref := metav1.GetControllerOf(r); ref != nil {
					return ref.Kind + "/" + ref.Name
				}
				return "<none>"
			}),
			registry.ColumnOf("Revision", "string", "Revision indicates the revision of the state represented by Data.", 0,
				func(r *appsv1.ControllerRevision) any { return r.Revision }),
			registry.AgeColumn()),
		AttrFunc: registry.AttrFunc[*appsv1.ControllerRevision](true, nil),
	})
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{"controllerrevisions": store}, nil
}
