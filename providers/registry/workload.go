package registry

import (
	"context"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/kubeembed/apiserver/providers"
)

// Workload describes a kind whose objects have a spec and a status, such as
// Deployments and Jobs: it builds the main store (status reset on writes,
// generation bumped on spec changes), /status (spec and labels kept) and,
// for scalable kinds, /scale.
type Workload[T runtime.Object] struct {
	GroupVersion       schema.GroupVersion
	Resource, Singular string
	ShortNames         []string
	Categories         []string
	NewObj, NewList    func() runtime.Object
	Meta               func(T) *metav1.ObjectMeta
	Spec               func(T) any
	// ResetStatus sets obj's status to old's, or empties it (old is the zero T).
	ResetStatus func(obj, old T)
	// ResetSpec sets obj's spec to old's.
	ResetSpec func(obj, old T)
	// NoGeneration leaves metadata.generation alone, for kinds that do not
	// track it (PersistentVolumeClaims).
	NoGeneration bool
	// PrepareCreate, if set, runs on create after the status reset; the
	// object has its UID by then.
	PrepareCreate  func(T)
	Validate       func(T) field.ErrorList
	ValidateUpdate func(obj, old T) field.ErrorList
	ValidateStatus func(T) field.ErrorList
	// Columns follow NAME in tables.
	Columns []Column
	Scale   *ScaleAccess
}

// Storage builds the stores of the kind and its subresources.
func (w Workload[T]) Storage(ctx providers.Context) (map[string]rest.Storage, error) {
	gv := w.GroupVersion
	st := &Strategy{ObjectTyper: ctx.Scheme, NameGenerator: names.SimpleNameGenerator, Namespaced: true}
	st.ResetFields = ResetStatus(gv)
	st.PrepareCreate = func(_ context.Context, obj runtime.Object) {
		o := obj.(T)
		var zero T
		w.ResetStatus(o, zero)
		if !w.NoGeneration {
			w.Meta(o).Generation = 1
		}
		if w.PrepareCreate != nil {
			w.PrepareCreate(o)
		}
	}
	st.PrepareUpdate = func(_ context.Context, obj, old runtime.Object) {
		o, prev := obj.(T), old.(T)
		w.ResetStatus(o, prev)
		if w.NoGeneration {
			return
		}
		if !apiequality.Semantic.DeepEqual(w.Spec(o), w.Spec(prev)) {
			w.Meta(o).Generation = w.Meta(prev).Generation + 1
		} else {
			w.Meta(o).Generation = w.Meta(prev).Generation
		}
	}
	st.ValidateCreate = func(_ context.Context, obj runtime.Object) field.ErrorList {
		o := obj.(T)
		errs := apivalidation.ValidateObjectMeta(w.Meta(o), true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
		return append(errs, w.Validate(o)...)
	}
	st.ValidateOnUpdate = func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		o, prev := obj.(T), old.(T)
		errs := apivalidation.ValidateObjectMetaUpdate(w.Meta(o), w.Meta(prev), field.NewPath("metadata"))
		errs = append(errs, w.Validate(o)...)
		if w.ValidateUpdate != nil {
			errs = append(errs, w.ValidateUpdate(o, prev)...)
		}
		return errs
	}
	table := append([]Column{NameColumn()}, w.Columns...)
	store, err := NewStore(ctx, StoreConfig{
		Resource: schema.GroupResource{Group: gv.Group, Resource: w.Resource}, Singular: w.Singular,
		NewFunc: w.NewObj, NewList: w.NewList,
		Strategy: st, ShortNames: w.ShortNames, Categories: w.Categories,
		Table:    Table(table...),
		AttrFunc: AttrFunc[T](true, nil),
	})
	if err != nil {
		return nil, err
	}

	status := &Strategy{ObjectTyper: ctx.Scheme, NameGenerator: names.SimpleNameGenerator, Namespaced: true}
	status.ResetFields = ResetSpec(gv, "metadata.labels")
	status.PrepareUpdate = func(_ context.Context, obj, old runtime.Object) {
		o, prev := obj.(T), old.(T)
		w.ResetSpec(o, prev)
		w.Meta(o).Labels = w.Meta(prev).Labels
	}
	status.ValidateOnUpdate = func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		o, prev := obj.(T), old.(T)
		errs := apivalidation.ValidateObjectMetaUpdate(w.Meta(o), w.Meta(prev), field.NewPath("metadata"))
		if w.ValidateStatus != nil {
			errs = append(errs, w.ValidateStatus(o)...)
		}
		return errs
	}
	out := map[string]rest.Storage{
		w.Resource:             store,
		w.Resource + "/status": Subresource(store, status, status),
	}
	if w.Scale != nil {
		out[w.Resource+"/scale"] = Scale(store, *w.Scale)
	}
	return out, nil
}
