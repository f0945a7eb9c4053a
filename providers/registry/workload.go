package registry

import (
	"context"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apiserver/pkg/warning"

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
	GroupVersion schema.GroupVersion
	// NameValidation checks metadata.name; default DNS subdomain.
	NameValidation apivalidation.ValidateNameFunc
	// Cluster makes the kind cluster-scoped (PersistentVolumes).
	Cluster            bool
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
	// OrphanByDefault orphans dependents on a DELETE that does not choose a
	// propagation policy, with DeleteWarning as a warning (batch/v1 Jobs).
	OrphanByDefault bool
	DeleteWarning   string
	// ReturnDeleted: see Kind.ReturnDeleted.
	ReturnDeleted bool
	// PrepareCreate, if set, runs on create after the status reset; the
	// object has its UID by then.
	PrepareCreate func(T)
	// PrepareUpdate, if set, runs on update after the status reset and the
	// generation.
	PrepareUpdate func(obj, old T)
	// PrepareStatusUpdate, if set, runs on writes to /status after the spec
	// reset.
	PrepareStatusUpdate func(obj, old T)
	Validate            func(T) field.ErrorList
	ValidateUpdate      func(obj, old T) field.ErrorList
	ValidateStatus      func(T) field.ErrorList
	// Columns follow NAME in tables.
	Columns []Column
	Scale   *ScaleAccess
}

// Storage builds the stores of the kind and its subresources.
func (w Workload[T]) Storage(ctx providers.Config) (map[string]rest.Storage, error) {
	gv := w.GroupVersion
	namespaced := !w.Cluster
	st := &Strategy{ObjectTyper: ctx.Scheme, NameGenerator: names.SimpleNameGenerator, Namespaced: namespaced}
	st.ResetFields = ResetStatus(gv)
	if w.OrphanByDefault {
		st.GCPolicy = rest.OrphanDependents
	}
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
		if !w.NoGeneration {
			w.Meta(o).Generation = w.Meta(prev).Generation
			if !apiequality.Semantic.DeepEqual(w.Spec(o), w.Spec(prev)) {
				w.Meta(o).Generation++
			}
		}
		if w.PrepareUpdate != nil {
			w.PrepareUpdate(o, prev)
		}
	}
	st.ValidateCreate = func(_ context.Context, obj runtime.Object) field.ErrorList {
		o := obj.(T)
		nameFn := w.NameValidation
		if nameFn == nil {
			nameFn = apivalidation.NameIsDNSSubdomain
		}
		errs := apivalidation.ValidateObjectMeta(w.Meta(o), namespaced, nameFn, field.NewPath("metadata"))
		return append(errs, w.Validate(o)...)
	}
	st.ValidateOnUpdate = func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		o, prev := obj.(T), old.(T)
		var errs field.ErrorList
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
		AttrFunc: AttrFunc[T](namespaced, nil),
	})
	if err != nil {
		return nil, err
	}

	status := &Strategy{ObjectTyper: ctx.Scheme, NameGenerator: names.SimpleNameGenerator, Namespaced: namespaced}
	status.ResetFields = ResetSpec(gv, "metadata.labels")
	status.PrepareUpdate = func(_ context.Context, obj, old runtime.Object) {
		o, prev := obj.(T), old.(T)
		w.ResetSpec(o, prev)
		w.Meta(o).Labels = w.Meta(prev).Labels
		if w.PrepareStatusUpdate != nil {
			w.PrepareStatusUpdate(o, prev)
		}
	}
	if w.ValidateStatus != nil {
		status.ValidateOnUpdate = func(_ context.Context, obj, _ runtime.Object) field.ErrorList { return w.ValidateStatus(obj.(T)) }
	}
	store.Store.ReturnDeletedObject = w.ReturnDeleted
	var main rest.Storage = store
	if w.DeleteWarning != "" {
		main = &warnOnDelete{Store: store, warning: w.DeleteWarning}
	}
	out := map[string]rest.Storage{
		w.Resource:             main,
		w.Resource + "/status": Subresource(store, status, status),
	}
	if w.Scale != nil {
		access := *w.Scale
		access.GroupVersion = w.GroupVersion
		out[w.Resource+"/scale"] = Scale(store, access)
	}
	return out, nil
}

// warnOnDelete warns on deletes that leave the propagation policy to the
// server.
type warnOnDelete struct {
	*Store
	warning string
}

func (s *warnOnDelete) warn(ctx context.Context, opts *metav1.DeleteOptions) {
	if opts == nil || (opts.PropagationPolicy == nil && opts.OrphanDependents == nil) {
		warning.AddWarning(ctx, "", s.warning)
	}
}

// Delete implements rest.GracefulDeleter.
func (s *warnOnDelete) Delete(ctx context.Context, name string, validate rest.ValidateObjectFunc, opts *metav1.DeleteOptions) (runtime.Object, bool, error) {
	s.warn(ctx, opts)
	return s.Store.Delete(ctx, name, validate, opts)
}

// DeleteCollection implements rest.CollectionDeleter.
func (s *warnOnDelete) DeleteCollection(ctx context.Context, validate rest.ValidateObjectFunc, opts *metav1.DeleteOptions, list *metainternalversion.ListOptions) (runtime.Object, error) {
	s.warn(ctx, opts)
	return s.Store.DeleteCollection(ctx, validate, opts, list)
}
