package registry

import (
	"context"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage/names"
	"k8s.io/apiserver/pkg/warning"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/kubeembed/apiserver/providers"
)

// Kind declares a resource: every built-in kind is one Kind value, and what
// a kind does differently is a field. Storage builds its generic store with
// metadata validation, optional generation counting, optional status
// (reset on create, kept by writes to the main resource, written through
// /status, which keeps everything else), /scale, a table and field
// selectors. The status is the struct field named Status, the rest of the
// object its other fields, found by reflection.
type Kind[T runtime.Object] struct {
	GroupVersion       schema.GroupVersion
	Resource, Singular string
	ShortNames         []string
	Categories         []string
	Namespaced         bool
	NewObj, NewList    func() runtime.Object
	// NameValidation checks metadata.name; default DNS subdomain
	// (PathSegmentName accepts any name a path segment can be).
	NameValidation apivalidation.ValidateNameFunc
	// Default applies the kind's defaults whenever an object is decoded, as
	// kube-apiserver's generated defaulters do.
	Default func(T)

	// Generation counts metadata.generation on everything but metadata and
	// status (see Strategy.Generation); GenerationOf, if set, counts it on
	// what GenerationOf returns instead (a spec).
	Generation   bool
	GenerationOf func(T) any
	// ResetPaths are top-level fields the main resource never writes (such
	// as an immutable spec): nobody owns them in managed fields.
	ResetPaths []string

	// Status serves /status and keeps the main resource from writing it.
	Status bool
	// StatusOnCreate keeps the status an object is created with, as
	// kube-apiserver's node strategy does (a kubelet posts its Node whole,
	// status included); managed fields still leave status out.
	StatusOnCreate bool
	// StatusWritesLabels lets /status change labels, as the status
	// strategies of pods, nodes, namespaces and services do; /status of
	// other kinds keeps them.
	StatusWritesLabels bool
	// StatusResetPaths are more fields /status never writes (beside the
	// rest of the object), for managed fields; PrepareStatusUpdate carries
	// them over.
	StatusResetPaths []string
	// StatusLike are more subresources written like /status (the rest of
	// the object carried over), with their own preparation and validation,
	// such as a CSR's /approval.
	StatusLike map[string]StatusWrite[T]
	// Scale serves /scale (autoscaling/v1 Scale); it needs Status, and the
	// group's Register to call AddScale.
	Scale *ScaleAccess

	// PrepareCreate runs on create after the status reset; ctx carries the
	// request's user.
	PrepareCreate func(context.Context, T)
	// PrepareUpdate runs on update after the status is carried over.
	PrepareUpdate func(obj, old T)
	// PrepareStatusUpdate runs on writes to /status after the rest of the
	// object is carried over.
	PrepareStatusUpdate func(obj, old T)
	// Validate checks an object on create and update (metadata is checked
	// already); ValidateUpdate adds the checks of an update.
	Validate       func(T) field.ErrorList
	ValidateUpdate func(obj, old T) field.ErrorList
	ValidateStatus func(obj, old T) field.ErrorList
	// Warnings are the warnings a create (old is the zero T) or an update
	// answers with, as a kind's strategy gives them.
	Warnings func(obj, old T) []string
	// UpdateChecksFirst reports ValidateUpdate's errors before Validate's,
	// in the order kube-apiserver reports them for the kind (ConfigMaps,
	// Secrets).
	UpdateChecksFirst bool

	// CreateOnUpdate lets PUT create a missing object (core/v1 events).
	CreateOnUpdate bool
	// OrphanByDefault orphans dependents on a DELETE that does not choose a
	// propagation policy (batch/v1 Jobs, core/v1 ReplicationControllers),
	// warning DeleteWarning if set.
	OrphanByDefault bool
	DeleteWarning   string
	// ReturnDeleted makes DELETE answer with the object rather than a
	// Status, as kube-apiserver does for some kinds.
	ReturnDeleted bool
	// TTL, if set, gives every object a lifetime in storage (events).
	TTL func(obj runtime.Object, existing uint64, update bool) (uint64, error)
	// ShouldDeleteDuringUpdate decides whether an update of an object being
	// deleted removes it. Default: when it has no finalizers left.
	ShouldDeleteDuringUpdate func(ctx context.Context, key string, obj, existing runtime.Object) bool

	// Columns follow NAME and come before AGE, unless NoAge: then Columns
	// place AGE themselves (AgeColumn), or leave it out.
	Columns []Column
	NoAge   bool
	// PlainName gives the NAME column no "name" format, as a few of
	// kube-apiserver's printers define it.
	PlainName bool
	// Table, if set, is the whole table instead, for kinds whose NAME does
	// not come first (events) or is not the object's name alone.
	Table []Column
	// ListOrder, if set, orders the rows of a listed table (the list itself
	// keeps its order), as kube-apiserver prints flow schemas by matching
	// precedence.
	ListOrder func(a, b T) int
	// ListName, if set, is given a listed table's items (maybe none) and
	// returns the NAME of each row: kube-apiserver marks the effective
	// default storage class in a list, which one object alone cannot tell.
	ListName func(items []T) func(T) string
	// RowConditions, if set, are the conditions of an object's row
	// (kube-apiserver marks a finished pod's row Completed).
	RowConditions func(T) []metav1.TableRowCondition
	// FieldAnnotations are annotations in which the kind's version keeps
	// fields of kube-apiserver's internal type
	// (deprecated.daemonset.template.generation): a Table's rows, whose
	// metadata kube-apiserver takes from the internal object, lack them.
	FieldAnnotations []string
	// Fields are extra field selectors beside metadata.name/namespace,
	// named in FieldNames.
	Fields     func(T) fields.Set
	FieldNames []string
	// FieldLabel, if set, converts the field selectors of the kind instead
	// (events.k8s.io events map their names to the stored core names).
	FieldLabel func(label, value string) (string, string, error)

	// Customize finishes the kind's storage with REST logic no field
	// describes (allocation around writes, subresources with logic of
	// their own): it gets the main store and the storage built so far, and
	// may wrap the store or add subresources.
	Customize func(cfg providers.Config, store *Store, storage map[string]rest.Storage) error
}

// StatusWrite is how a status-like subresource prepares and validates a
// write.
type StatusWrite[T runtime.Object] struct {
	Prepare  func(obj, old T)
	Validate func(obj, old T) field.ErrorList
}

// PathSegmentName accepts any name the generic registry accepts (a path
// segment: no "/", "%", "." or ".."), for the kinds kube-apiserver does not
// hold to DNS names, such as PodDisruptionBudgets and core/v1 Events.
func PathSegmentName(string, bool) []string { return nil }

// Storage builds the kind's store and its subresources.
func (k Kind[T]) Storage(cfg providers.Config) (map[string]rest.Storage, error) {
	store, err := k.Store(cfg)
	if err != nil {
		return nil, err
	}
	var main rest.Storage = store
	if k.DeleteWarning != "" {
		main = &warnOnDelete{Store: store, warning: k.DeleteWarning}
	}
	out := map[string]rest.Storage{k.Resource: main}
	if k.Status {
		k.addStatusWrites(cfg, store, out)
	}
	if k.Scale != nil {
		access := *k.Scale
		access.GroupVersion = k.GroupVersion
		out[k.Resource+"/scale"] = scaleStorage(store, access)
	}
	if k.Customize != nil {
		if err := k.Customize(cfg, store, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Store builds the kind's main store alone: what Storage serves, and what
// another resource's REST logic reads and writes the kind through (a pod's
// eviction updates disruption budgets).
func (k Kind[T]) Store(cfg providers.Config) (*Store, error) {
	return newStore(cfg, storeConfig{
		Resource: schema.GroupResource{Group: k.GroupVersion.Group, Resource: k.Resource}, Singular: k.Singular,
		NewFunc: k.NewObj, NewList: k.NewList,
		Strategy: k.strategy(cfg.Scheme), ShortNames: k.ShortNames, Categories: k.Categories,
		Table:    tableConvertor{columns: k.columns(), hidden: k.FieldAnnotations, list: k.listColumns(), conditions: k.rowConditions()},
		AttrFunc: attrFunc[T](k.Namespaced, k.Fields),
		TTL:      k.TTL, ShouldDeleteDuringUpdate: k.ShouldDeleteDuringUpdate,
		ReturnDeleted: k.ReturnDeleted,
	})
}

// strategy is the main resource's strategy.
func (k Kind[T]) strategy(typer runtime.ObjectTyper) *Strategy {
	st := &Strategy{ObjectTyper: typer, NameGenerator: names.SimpleNameGenerator, Namespaced: k.Namespaced,
		Generation: k.Generation && k.GenerationOf == nil, CreateOnUpdate: k.CreateOnUpdate}
	if k.OrphanByDefault {
		st.GCPolicy = rest.OrphanDependents
	}
	reset := k.ResetPaths
	if k.Status {
		reset = append([]string{"status"}, reset...)
	}
	st.ResetFields = resetFields(k.GroupVersion, reset...)
	st.PrepareCreate = func(ctx context.Context, obj runtime.Object) { k.prepareCreate(ctx, obj.(T)) }
	st.PrepareUpdate = func(_ context.Context, obj, old runtime.Object) { k.prepareUpdate(obj.(T), old.(T)) }
	nameFn := k.NameValidation
	if nameFn == nil {
		nameFn = apivalidation.NameIsDNSSubdomain
	}
	st.ValidateCreate = func(_ context.Context, obj runtime.Object) field.ErrorList {
		m, _ := meta.Accessor(obj)
		errs := apivalidation.ValidateObjectMetaAccessor(m, k.Namespaced, nameFn, field.NewPath("metadata"))
		return append(errs, k.validate(obj.(T))...)
	}
	st.ValidateOnUpdate = func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		var update field.ErrorList
		if k.ValidateUpdate != nil {
			update = k.ValidateUpdate(obj.(T), old.(T))
		}
		if k.UpdateChecksFirst {
			return append(update, k.validate(obj.(T))...)
		}
		return append(k.validate(obj.(T)), update...)
	}
	if k.Warnings != nil {
		st.Warn = func(obj, old runtime.Object) []string {
			var o T
			if old != nil {
				o = old.(T)
			}
			return k.Warnings(obj.(T), o)
		}
	}
	return st
}

func (k Kind[T]) prepareCreate(ctx context.Context, obj T) {
	if k.Status && !k.StatusOnCreate {
		setStatus(obj, nil)
	}
	if k.PrepareCreate != nil {
		k.PrepareCreate(ctx, obj)
	}
	if k.GenerationOf != nil {
		objectMeta(obj).SetGeneration(1)
	}
}

func (k Kind[T]) prepareUpdate(obj, old T) {
	if k.Status {
		setStatus(obj, old)
	}
	if k.PrepareUpdate != nil {
		k.PrepareUpdate(obj, old)
	}
	if k.GenerationOf != nil {
		m, o := objectMeta(obj), objectMeta(old)
		m.SetGeneration(o.GetGeneration())
		if !equality.Semantic.DeepEqual(k.GenerationOf(obj), k.GenerationOf(old)) {
			m.SetGeneration(o.GetGeneration() + 1)
		}
	}
}

func (k Kind[T]) validate(obj T) field.ErrorList {
	if k.Validate == nil {
		return nil
	}
	return k.Validate(obj)
}

// columns are NAME, the kind's columns and AGE where it goes.
func (k Kind[T]) columns() []Column {
	if k.Table != nil {
		return k.Table
	}
	name := NameColumn()
	if k.PlainName {
		name.Format = ""
	}
	columns := append([]Column{name}, k.Columns...)
	if !k.NoAge {
		columns = append(columns, AgeColumn())
	}
	return columns
}

// rowConditions is RowConditions for any object; nil without it.
func (k Kind[T]) rowConditions() func(runtime.Object) []metav1.TableRowCondition {
	if k.RowConditions == nil {
		return nil
	}
	return func(obj runtime.Object) []metav1.TableRowCondition { return k.RowConditions(obj.(T)) }
}

// listColumns is the table's list hook made of ListOrder and ListName; nil
// without them.
func (k Kind[T]) listColumns() func(items []runtime.Object) []Column {
	if k.ListOrder == nil && k.ListName == nil {
		return nil
	}
	columns := k.columns()
	return func(items []runtime.Object) []Column {
		if k.ListOrder != nil {
			slices.SortStableFunc(items, func(a, b runtime.Object) int { return k.ListOrder(a.(T), b.(T)) })
		}
		i := slices.IndexFunc(columns, func(c Column) bool { return c.Name == "Name" })
		if k.ListName == nil || i < 0 {
			return columns
		}
		typed := make([]T, len(items))
		for j, obj := range items {
			typed[j] = obj.(T)
		}
		name := k.ListName(typed)
		out := slices.Clone(columns)
		out[i].Value = func(obj runtime.Object) any { return name(obj.(T)) }
		return out
	}
}

// addStatusWrites adds /status and the status-like subresources to out.
func (k Kind[T]) addStatusWrites(cfg providers.Config, store *Store, out map[string]rest.Storage) {
	writes := map[string]StatusWrite[T]{"status": {Prepare: k.PrepareStatusUpdate, Validate: k.ValidateStatus}}
	for name, w := range k.StatusLike {
		writes[name] = w
	}
	reset := append([]string{"spec"}, k.StatusResetPaths...)
	if !k.StatusWritesLabels {
		reset = append(reset, "metadata.labels")
	}
	for name, w := range writes {
		st := &Strategy{ObjectTyper: cfg.Scheme, NameGenerator: names.SimpleNameGenerator, Namespaced: k.Namespaced}
		st.ResetFields = resetFields(k.GroupVersion, reset...)
		st.PrepareUpdate = func(_ context.Context, obj, old runtime.Object) {
			keepAllButStatus(obj, old, !k.StatusWritesLabels)
			if w.Prepare != nil {
				w.Prepare(obj.(T), old.(T))
			}
		}
		if w.Validate != nil {
			st.ValidateOnUpdate = func(_ context.Context, obj, old runtime.Object) field.ErrorList {
				return w.Validate(obj.(T), old.(T))
			}
		}
		out[k.Resource+"/"+name] = Subresource(store, st, st)
	}
}

// resetFields are the fields at paths, for gv's managed fields; nil for
// none.
func resetFields(gv schema.GroupVersion, paths ...string) map[fieldpath.APIVersion]*fieldpath.Set {
	if len(paths) == 0 {
		return nil
	}
	set := fieldpath.NewSet()
	for _, p := range paths {
		set.Insert(fieldpath.MakePathOrDie(p))
	}
	return map[fieldpath.APIVersion]*fieldpath.Set{fieldpath.APIVersion(gv.String()): set}
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
// Status into obj, and old's labels if keepLabels: a write to /status
// changes the status and the rest of metadata only.
func keepAllButStatus(obj, old runtime.Object, keepLabels bool) {
	v, o := reflect.ValueOf(obj).Elem(), reflect.ValueOf(old).Elem()
	for i := range v.NumField() {
		switch v.Type().Field(i).Name {
		case "TypeMeta", "ObjectMeta", "Status":
		default:
			v.Field(i).Set(o.Field(i))
		}
	}
	if keepLabels {
		objectMeta(obj).SetLabels(objectMeta(old).GetLabels())
	}
}

// objectMeta returns obj's metadata; every served object has some.
func objectMeta(obj runtime.Object) metav1.Object {
	m, err := meta.Accessor(obj)
	if err != nil {
		panic(err) // a Kind of a type without metadata: a programming error
	}
	return m
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
