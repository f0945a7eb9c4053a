package registry

import (
	"context"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/kubeembed/apiserver/providers"
)

// Kind describes a resource with the behaviour most built-in kinds share,
// for kinds without special REST logic: metadata validation, optional
// generation counting, optional status (reset on create, kept by writes to
// the main resource, written through /status, which keeps everything else),
// a table and field selectors. The status is the struct field named Status,
// found by reflection.
type Kind[T runtime.Object] struct {
	GroupVersion       schema.GroupVersion
	Resource, Singular string
	ShortNames         []string
	Categories         []string
	Namespaced         bool
	NewObj, NewList    func() runtime.Object
	// NameValidation checks metadata.name; default DNS subdomain.
	NameValidation apivalidation.ValidateNameFunc
	// Generation counts metadata.generation (see Strategy.Generation);
	// GenerationOf, if set, is what a new generation is counted on.
	Generation   bool
	GenerationOf func(T) any
	// ResetPaths are top-level fields the main resource never writes (such
	// as an immutable spec): nobody owns them in managed fields.
	ResetPaths []string
	// Status serves /status and keeps the main resource from writing it.
	Status bool
	// PrepareCreate runs on create after the status reset; ctx carries the
	// request's user.
	PrepareCreate func(context.Context, T)
	// PrepareUpdate runs on update after the status is carried over.
	PrepareUpdate  func(obj, old T)
	Validate       func(T) field.ErrorList
	ValidateUpdate func(obj, old T) field.ErrorList
	ValidateStatus func(obj, old T) field.ErrorList
	// PrepareStatusUpdate runs on writes to /status after the rest of the
	// object is carried over.
	PrepareStatusUpdate func(obj, old T)
	// StatusLike are more subresources written like /status (the rest of
	// the object carried over), with their own preparation and validation,
	// such as a CSR's /approval.
	StatusLike map[string]StatusWrite[T]
	// Columns follow NAME and come before AGE unless AgeAt says where AGE
	// goes (its index among Columns).
	Columns []Column
	AgeAt   *int
	// NoAge leaves the AGE column out.
	NoAge bool
	// PlainName gives the NAME column no "name" format, as a few of
	// kube-apiserver's printers define it.
	PlainName bool
	// ReturnDeleted makes DELETE answer with the object rather than a
	// Status, as kube-apiserver does for some kinds.
	ReturnDeleted bool
	// Fields are extra field selectors beside metadata.name/namespace,
	// named in FieldNames.
	Fields     func(T) fields.Set
	FieldNames []string
}

// PathSegmentName accepts any name the generic registry accepts (a path
// segment: no "/", "%", "." or ".."), for the kinds kube-apiserver does not
// hold to DNS names, such as PodDisruptionBudgets and core/v1 Events.
func PathSegmentName(string, bool) []string { return nil }

// Storage builds the kind's store, and its /status when it has one.
func (k Kind[T]) Storage(ctx providers.Config) (map[string]rest.Storage, error) {
	nameFn := k.NameValidation
	if nameFn == nil {
		nameFn = apivalidation.NameIsDNSSubdomain
	}
	st := &Strategy{ObjectTyper: ctx.Scheme, NameGenerator: names.SimpleNameGenerator, Namespaced: k.Namespaced, Generation: k.Generation}
	var reset []string
	if k.Status {
		reset = append(reset, "status")
	}
	if reset = append(reset, k.ResetPaths...); len(reset) > 0 {
		set := fieldpath.NewSet()
		for _, p := range reset {
			set.Insert(fieldpath.MakePathOrDie(p))
		}
		st.ResetFields = map[fieldpath.APIVersion]*fieldpath.Set{fieldpath.APIVersion(k.GroupVersion.String()): set}
	}
	if k.GenerationOf != nil {
		st.Generation = false
	}
	st.PrepareCreate = func(ctx context.Context, obj runtime.Object) {
		if k.Status {
			setStatus(obj, nil)
		}
		if k.PrepareCreate != nil {
			k.PrepareCreate(ctx, obj.(T))
		}
		if k.GenerationOf != nil {
			ObjectMetaOf(obj).SetGeneration(1)
		}
	}
	st.PrepareUpdate = func(_ context.Context, obj, old runtime.Object) {
		if k.Status {
			setStatus(obj, old)
		}
		if k.PrepareUpdate != nil {
			k.PrepareUpdate(obj.(T), old.(T))
		}
		if k.GenerationOf != nil {
			m, o := ObjectMetaOf(obj), ObjectMetaOf(old)
			m.SetGeneration(o.GetGeneration())
			if !equality.Semantic.DeepEqual(k.GenerationOf(obj.(T)), k.GenerationOf(old.(T))) {
				m.SetGeneration(o.GetGeneration() + 1)
			}
		}
	}
	validate := func(obj runtime.Object) field.ErrorList {
		var errs field.ErrorList
		if k.Validate != nil {
			errs = k.Validate(obj.(T))
		}
		return errs
	}
	st.ValidateCreate = func(_ context.Context, obj runtime.Object) field.ErrorList {
		m, _ := meta.Accessor(obj)
		errs := apivalidation.ValidateObjectMetaAccessor(m, k.Namespaced, nameFn, field.NewPath("metadata"))
		return append(errs, validate(obj)...)
	}
	st.ValidateOnUpdate = func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		errs := validate(obj)
		if k.ValidateUpdate != nil {
			errs = append(errs, k.ValidateUpdate(obj.(T), old.(T))...)
		}
		return errs
	}
	name := NameColumn()
	if k.PlainName {
		name.Format = ""
	}
	columns := append([]Column{name}, k.Columns...)
	switch {
	case k.NoAge:
	case k.AgeAt == nil:
		columns = append(columns, AgeColumn())
	default:
		at := *k.AgeAt + 1
		columns = append(columns[:at], append([]Column{AgeColumn()}, columns[at:]...)...)
	}
	store, err := NewStore(ctx, StoreConfig{
		Resource: schema.GroupResource{Group: k.GroupVersion.Group, Resource: k.Resource}, Singular: k.Singular,
		NewFunc: k.NewObj, NewList: k.NewList,
		Strategy: st, ShortNames: k.ShortNames, Categories: k.Categories,
		Table:    Table(columns...),
		AttrFunc: AttrFunc[T](k.Namespaced, k.Fields),
	})
	if err != nil {
		return nil, err
	}
	store.Store.ReturnDeletedObject = k.ReturnDeleted
	out := map[string]rest.Storage{k.Resource: store}
	if !k.Status {
		return out, nil
	}
	writes := map[string]StatusWrite[T]{"status": {Prepare: k.PrepareStatusUpdate, Validate: k.ValidateStatus}}
	for name, w := range k.StatusLike {
		writes[name] = w
	}
	for name, w := range writes {
		st := &Strategy{ObjectTyper: ctx.Scheme, NameGenerator: names.SimpleNameGenerator, Namespaced: k.Namespaced}
		st.ResetFields = ResetSpec(k.GroupVersion, "metadata.labels")
		st.PrepareUpdate = func(_ context.Context, obj, old runtime.Object) {
			keepAllButStatus(obj, old)
			if w.Prepare != nil {
				w.Prepare(obj.(T), old.(T))
			}
		}
		st.ValidateOnUpdate = func(_ context.Context, obj, old runtime.Object) field.ErrorList {
			if w.Validate == nil {
				return nil
			}
			return w.Validate(obj.(T), old.(T))
		}
		out[k.Resource+"/"+name] = Subresource(store, st, st)
	}
	return out, nil
}

// StatusWrite is how a status-like subresource prepares and validates a
// write.
type StatusWrite[T runtime.Object] struct {
	Prepare  func(obj, old T)
	Validate func(obj, old T) field.ErrorList
}

// setStatus sets obj's Status field to old's, or to its zero value.
func setStatus(obj, old runtime.Object) {
	v := reflect.ValueOf(obj).Elem().FieldByName("Status")
	if !v.IsValid() {
		return
	}
	if old == nil {
		v.Set(reflect.Zero(v.Type()))
		return
	}
	v.Set(reflect.ValueOf(old).Elem().FieldByName("Status"))
}

// keepAllButStatus copies every field of old but TypeMeta, ObjectMeta and
// Status into obj, and old's labels: a write to /status changes the status
// and the rest of metadata only.
func keepAllButStatus(obj, old runtime.Object) {
	v, o := reflect.ValueOf(obj).Elem(), reflect.ValueOf(old).Elem()
	for i := range v.NumField() {
		switch v.Type().Field(i).Name {
		case "TypeMeta", "ObjectMeta", "Status":
		default:
			v.Field(i).Set(o.Field(i))
		}
	}
	m, _ := meta.Accessor(obj)
	om, _ := meta.Accessor(old)
	m.SetLabels(om.GetLabels())
}

// ObjectMetaOf returns obj's metadata; every served object has some.
func ObjectMetaOf(obj runtime.Object) metav1.Object {
	m, err := meta.Accessor(obj)
	if err != nil {
		panic(fmt.Sprintf("%T has no metadata: %v", obj, err))
	}
	return m
}
