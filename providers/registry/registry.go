// Package registry is how a provider is written: Kind declares a resource
// (its store, strategy, subresources, table and field selectors), Group
// turns kinds into a providers.Provider. Every built-in provider is a Group
// of Kinds; a kind that needs something the others do not gets a field on
// Kind (or its logic in Kind.Customize), not a copy of the machinery. The
// building blocks Kind uses (Strategy, columns, /scale, CreateOnly for
// never-stored resources) are here too.
package registry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/internal/printers"
)

// Strategy is a declarative rest.RESTCreateStrategy, RESTUpdateStrategy and
// RESTDeleteStrategy. Nil funcs do nothing.
type Strategy struct {
	runtime.ObjectTyper
	names.NameGenerator

	Namespaced bool
	// CreateOnUpdate lets PUT create a missing object (AllowCreateOnUpdate).
	CreateOnUpdate bool
	// RequireResourceVersion makes PUT without metadata.resourceVersion an
	// error. kube-apiserver's built-in kinds all allow it (last write wins).
	RequireResourceVersion bool
	// Generation sets metadata.generation to 1 on create and bumps it when
	// an update changes anything but metadata and status, as kube-apiserver
	// does for kinds such as PodTemplate, PriorityClass and NetworkPolicy.
	Generation bool
	// GCPolicy is what DELETE does to dependents when the request does not
	// say: the default is DeleteDependents (background); OrphanDependents
	// adds the orphan finalizer, as for batch/v1 Jobs.
	GCPolicy rest.GarbageCollectionPolicy

	PrepareCreate    func(ctx context.Context, obj runtime.Object)
	PrepareUpdate    func(ctx context.Context, obj, old runtime.Object)
	ValidateCreate   func(ctx context.Context, obj runtime.Object) field.ErrorList
	ValidateOnUpdate func(ctx context.Context, obj, old runtime.Object) field.ErrorList
	// Warn returns the warnings of a write (old is nil on create).
	Warn func(obj, old runtime.Object) []string
	// ResetFields are the fields this strategy resets on writes, by API
	// version, for server-side apply's managed fields.
	ResetFields map[fieldpath.APIVersion]*fieldpath.Set
}

var (
	_ rest.GarbageCollectionDeleteStrategy = (*Strategy)(nil)
	_ rest.RESTCreateStrategy              = (*Strategy)(nil)
	_ rest.RESTUpdateStrategy              = (*Strategy)(nil)
	_ rest.RESTDeleteStrategy              = (*Strategy)(nil)
	_ rest.ResetFieldsStrategy             = (*Strategy)(nil)
)

// DefaultGarbageCollectionPolicy implements
// rest.GarbageCollectionDeleteStrategy.
func (s *Strategy) DefaultGarbageCollectionPolicy(context.Context) rest.GarbageCollectionPolicy {
	if s.GCPolicy == "" {
		return rest.DeleteDependents
	}
	return s.GCPolicy
}

// NamespaceScoped implements rest.RESTCreateStrategy.
func (s *Strategy) NamespaceScoped() bool { return s.Namespaced }

// PrepareForCreate implements rest.RESTCreateStrategy.
func (s *Strategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	if s.Generation {
		if m, err := meta.Accessor(obj); err == nil {
			m.SetGeneration(1)
		}
	}
	if s.PrepareCreate != nil {
		s.PrepareCreate(ctx, obj)
	}
}

// Validate implements rest.RESTCreateStrategy.
func (s *Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	m, err := meta.Accessor(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	errs := finalizerNames(m.GetFinalizers())
	if s.ValidateCreate != nil {
		errs = append(errs, s.ValidateCreate(ctx, obj)...)
	}
	return errs
}

// finalizerNames is kube-apiserver's check of built-in objects' finalizers:
// a name without a "/" must be one of the standard ones.
func finalizerNames(finalizers []string) field.ErrorList {
	var errs field.ErrorList
	for i, f := range finalizers {
		if !strings.Contains(f, "/") && f != "kubernetes" && f != metav1.FinalizerOrphanDependents && f != metav1.FinalizerDeleteDependents {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "finalizers").Index(i), f, "name is neither a standard finalizer name nor is it fully qualified"))
		}
	}
	return errs
}

// withoutCommon drops from errs what the generic registry reports itself,
// so that no cause is reported twice, as on kube-apiserver.
func withoutCommon(errs, common field.ErrorList) field.ErrorList {
	if len(common) == 0 {
		return errs
	}
	seen := map[string]bool{}
	for _, e := range common {
		seen[e.Error()] = true
	}
	out := errs[:0:0]
	for _, e := range errs {
		if !seen[e.Error()] {
			out = append(out, e)
		}
	}
	return out
}

// WarningsOnCreate implements rest.RESTCreateStrategy.
func (s *Strategy) WarningsOnCreate(_ context.Context, obj runtime.Object) []string {
	if s.Warn == nil {
		return nil
	}
	return s.Warn(obj, nil)
}

// Canonicalize implements rest.RESTCreateStrategy.
func (s *Strategy) Canonicalize(runtime.Object) {}

// AllowCreateOnUpdate implements rest.RESTUpdateStrategy.
func (s *Strategy) AllowCreateOnUpdate(context.Context) bool { return s.CreateOnUpdate }

// AllowUnconditionalUpdate implements rest.RESTUpdateStrategy.
func (s *Strategy) AllowUnconditionalUpdate(context.Context) bool { return !s.RequireResourceVersion }

// PrepareForUpdate implements rest.RESTUpdateStrategy.
func (s *Strategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	if s.PrepareUpdate != nil {
		s.PrepareUpdate(ctx, obj, old)
	}
	if s.Generation {
		m, err1 := meta.Accessor(obj)
		o, err2 := meta.Accessor(old)
		if err1 == nil && err2 == nil {
			m.SetGeneration(o.GetGeneration())
			if !equality.Semantic.DeepEqual(withoutMeta(obj), withoutMeta(old)) {
				m.SetGeneration(o.GetGeneration() + 1)
			}
		}
	}
}

// withoutMeta is obj as a map without type, metadata and status: what a
// generation counts.
func withoutMeta(obj runtime.Object) map[string]any {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil
	}
	for _, k := range []string{"apiVersion", "kind", "metadata", "status"} {
		delete(u, k)
	}
	return u
}

// ValidateUpdate implements rest.RESTUpdateStrategy.
func (s *Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	m, err1 := meta.Accessor(obj)
	o, err2 := meta.Accessor(old)
	if err := errors.Join(err1, err2); err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	errs := finalizerNames(m.GetFinalizers())
	if s.ValidateOnUpdate != nil {
		errs = append(errs, s.ValidateOnUpdate(ctx, obj, old)...)
	}
	if len(errs) == 0 {
		return nil
	}
	// The generic registry validates metadata itself before the strategy,
	// on updates always: what it reports (and a provider's metadata checks
	// shared with create repeat) is not reported twice.
	anyName := func(string, bool) []string { return nil } // names never change on update
	common := apivalidation.ValidateObjectMetaAccessor(m, s.Namespaced, anyName, field.NewPath("metadata"))
	return withoutCommon(errs, append(common, apivalidation.ValidateObjectMetaAccessorUpdate(m, o, field.NewPath("metadata"))...))
}

// WarningsOnUpdate implements rest.RESTUpdateStrategy.
func (s *Strategy) WarningsOnUpdate(_ context.Context, obj, old runtime.Object) []string {
	if s.Warn == nil {
		return nil
	}
	return s.Warn(obj, old)
}

// GetResetFields implements rest.ResetFieldsStrategy.
func (s *Strategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set { return s.ResetFields }

// Column is one column of a table: its definition and how to compute it.
type Column struct {
	metav1.TableColumnDefinition
	Value func(obj runtime.Object) any
	// CellOnly puts the value in each row without defining the column, as
	// kube-apiserver's printer does for a few kinds (an IPAddress's age).
	CellOnly bool
}

// ColumnOf is a column computed from objects of type T.
func ColumnOf[T any](name, typ, desc string, priority int32, f func(T) any) Column {
	return Column{
		TableColumnDefinition: metav1.TableColumnDefinition{Name: name, Type: typ, Description: desc, Priority: priority},
		Value:                 func(o runtime.Object) any { return f(any(o).(T)) },
	}
}

// NameColumn is the NAME column every kubectl table starts with.
func NameColumn() Column {
	return Column{
		TableColumnDefinition: metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name",
			Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
		Value: func(obj runtime.Object) any {
			m, _ := meta.Accessor(obj)
			return m.GetName()
		},
	}
}

// AgeColumn is the AGE column: time since creation, as kubectl prints it.
func AgeColumn() Column {
	return Column{
		TableColumnDefinition: metav1.TableColumnDefinition{Name: "Age", Type: "string",
			Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
		Value: func(obj runtime.Object) any {
			m, _ := meta.Accessor(obj)
			return printers.Since(m.GetCreationTimestamp())
		},
	}
}

// CreatedAtColumn is the CREATED AT column some kinds have instead of AGE:
// the creation time in RFC 3339, UTC.
func CreatedAtColumn() Column {
	return Column{
		TableColumnDefinition: metav1.TableColumnDefinition{Name: "Created At", Type: "date",
			Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
		Value: func(obj runtime.Object) any {
			m, _ := meta.Accessor(obj)
			return m.GetCreationTimestamp().UTC().Format(time.RFC3339)
		},
	}
}

// Table returns a rest.TableConvertor that prints objects with columns,
// for REST storage that is not a Kind's (componentstatuses).
func Table(columns ...Column) rest.TableConvertor {
	return tableConvertor{columns: columns}
}

// tableConvertor prints objects with columns; each row carries its object
// without the hidden annotations (Kind.FieldAnnotations).
type tableConvertor struct {
	columns []Column
	hidden  []string
	// list, if set, sees a list's items before they are printed, as
	// kube-apiserver's list printers do: it may reorder them in place, and
	// returns the columns to print them with (the same definitions).
	list func(items []runtime.Object) []Column
	// conditions, if set, are a row's conditions.
	conditions func(runtime.Object) []metav1.TableRowCondition
}

func (c tableConvertor) ConvertToTable(_ context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{}
	opts, _ := tableOptions.(*metav1.TableOptions)
	if opts == nil || !opts.NoHeaders {
		for _, col := range c.columns {
			if !col.CellOnly {
				table.ColumnDefinitions = append(table.ColumnDefinitions, col.TableColumnDefinition)
			}
		}
	}
	row := func(columns []Column, obj runtime.Object) {
		cells := make([]any, len(columns))
		for i, col := range columns {
			cells[i] = col.Value(obj)
		}
		r := metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Object: c.rowObject(obj)}}
		if c.conditions != nil {
			r.Conditions = c.conditions(obj)
		}
		table.Rows = append(table.Rows, r)
	}
	if meta.IsListType(object) {
		items, err := meta.ExtractList(object)
		if err != nil {
			return nil, err
		}
		columns := c.columns
		if c.list != nil {
			columns = c.list(items)
		}
		for _, obj := range items {
			row(columns, obj)
		}
		if l, err := meta.ListAccessor(object); err == nil {
			table.ResourceVersion = l.GetResourceVersion()
			table.Continue = l.GetContinue()
			table.RemainingItemCount = l.GetRemainingItemCount()
		}
		return table, nil
	}
	row(c.columns, object)
	if m, err := meta.Accessor(object); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
	}
	return table, nil
}

// rowObject is obj without the hidden annotations (a copy when it has any).
func (c tableConvertor) rowObject(obj runtime.Object) runtime.Object {
	m, err := meta.Accessor(obj)
	if err != nil || !slices.ContainsFunc(c.hidden, func(a string) bool { _, ok := m.GetAnnotations()[a]; return ok }) {
		return obj
	}
	obj = obj.DeepCopyObject()
	m, _ = meta.Accessor(obj)
	annotations := m.GetAnnotations()
	for _, a := range c.hidden {
		delete(annotations, a)
	}
	if len(annotations) == 0 {
		annotations = nil
	}
	m.SetAnnotations(annotations)
	return obj
}

// fieldSet returns the field set of obj for field selectors: metadata.name,
// metadata.namespace (when namespaced) and the extra fields.
func fieldSet(obj metav1.Object, namespaced bool, extra fields.Set) fields.Set {
	set := fields.Set{"metadata.name": obj.GetName()}
	if namespaced {
		set["metadata.namespace"] = obj.GetNamespace()
	}
	for k, v := range extra {
		set[k] = v
	}
	return set
}

// attrFunc returns a storage.AttrFunc built from extra, which returns the
// kind-specific selectable fields (nil for none).
func attrFunc[T runtime.Object](namespaced bool, extra func(T) fields.Set) storage.AttrFunc {
	return func(obj runtime.Object) (labels.Set, fields.Set, error) {
		o, ok := obj.(T)
		if !ok {
			return nil, nil, fmt.Errorf("not a %T: %T", *new(T), obj)
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, nil, err
		}
		var ex fields.Set
		if extra != nil {
			ex = extra(o)
		}
		return labels.Set(m.GetLabels()), fieldSet(m, namespaced, ex), nil
	}
}

// FieldLabelConversion registers the field selectors a kind supports, so that
// others are rejected with "field label not supported", as kube-apiserver does.
func FieldLabelConversion(scheme *runtime.Scheme, gvk schema.GroupVersionKind, namespaced bool, extra ...string) error {
	if len(extra) == 0 {
		// kube-apiserver's default, and its message, for kinds with no
		// field selectors of their own.
		return scheme.AddFieldLabelConversionFunc(gvk, runtime.DefaultMetaV1FieldSelectorConversion)
	}
	allowed := map[string]bool{"metadata.name": true}
	if namespaced {
		allowed["metadata.namespace"] = true
	}
	for _, e := range extra {
		allowed[e] = true
	}
	return scheme.AddFieldLabelConversionFunc(gvk, func(label, value string) (string, string, error) {
		if allowed[label] {
			return label, value, nil
		}
		return "", "", fmt.Errorf("field label not supported: %s", label)
	})
}

// storeConfig describes one resource's generic store.
type storeConfig struct {
	// Resource is the plural resource with its group ("configmaps").
	Resource schema.GroupResource
	// Singular is the singular resource name ("configmap").
	Singular   string
	NewFunc    func() runtime.Object
	NewList    func() runtime.Object
	Strategy   *Strategy
	Table      rest.TableConvertor
	AttrFunc   storage.AttrFunc
	ShortNames []string
	Categories []string
	// TTL, if set, gives every object a lifetime in storage (events).
	TTL func(obj runtime.Object, existing uint64, update bool) (uint64, error)
	// ShouldDeleteDuringUpdate decides whether an update of an object being
	// deleted removes it. Default: when it has no finalizers left.
	ShouldDeleteDuringUpdate func(ctx context.Context, key string, obj, existing runtime.Object) bool
	ReturnDeleted            bool
}

// newStore completes a generic registry store from cfg.
func newStore(pc providers.Config, cfg storeConfig) (*Store, error) {
	s := &genericregistry.Store{
		NewFunc:                   cfg.NewFunc,
		NewListFunc:               cfg.NewList,
		DefaultQualifiedResource:  cfg.Resource,
		SingularQualifiedResource: schema.GroupResource{Group: cfg.Resource.Group, Resource: cfg.Singular},
		CreateStrategy:            cfg.Strategy,
		UpdateStrategy:            cfg.Strategy,
		DeleteStrategy:            cfg.Strategy,
		ResetFieldsStrategy:       cfg.Strategy,
		TableConvertor:            cfg.Table,
		TTLFunc:                   cfg.TTL,
		ShouldDeleteDuringUpdate:  cfg.ShouldDeleteDuringUpdate,
		ReturnDeletedObject:       cfg.ReturnDeleted,
	}
	if s.TableConvertor == nil {
		s.TableConvertor = rest.NewDefaultTableConvertor(cfg.Resource)
	}
	opts := &generic.StoreOptions{RESTOptions: pc.RESTOptionsGetter, AttrFunc: cfg.AttrFunc}
	if err := s.CompleteWithOptions(opts); err != nil {
		return nil, fmt.Errorf("store for %v: %w", cfg.Resource, err)
	}
	return &Store{Store: s, Strategy: cfg.Strategy, shortNames: cfg.ShortNames, categories: cfg.Categories}, nil
}

// Store is a generic registry store with discovery metadata.
type Store struct {
	*genericregistry.Store
	// Strategy is the main resource's, for subresources that start from it.
	Strategy   *Strategy
	shortNames []string
	categories []string
}

var (
	_ rest.ShortNamesProvider = (*Store)(nil)
	_ rest.CategoriesProvider = (*Store)(nil)
)

// ShortNames implements rest.ShortNamesProvider.
func (s *Store) ShortNames() []string { return s.shortNames }

// Categories implements rest.CategoriesProvider.
func (s *Store) Categories() []string { return s.categories }

// Subresource returns a store for a subresource (status, finalize) that
// shares s's storage and uses strategy for updates.
func Subresource(s *Store, strategy rest.RESTUpdateStrategy, reset rest.ResetFieldsStrategy) *SubresourceStore {
	sub := *s.Store
	sub.CreateStrategy = nil
	sub.DeleteStrategy = nil
	sub.UpdateStrategy = strategy
	sub.ResetFieldsStrategy = reset
	return &SubresourceStore{store: &sub}
}

// SubresourceStore serves get, update and patch of a subresource.
type SubresourceStore struct {
	store *genericregistry.Store
}

var (
	_ rest.Getter  = (*SubresourceStore)(nil)
	_ rest.Updater = (*SubresourceStore)(nil)
)

// New implements rest.Storage.
func (s *SubresourceStore) New() runtime.Object { return s.store.NewFunc() }

// Destroy implements rest.Storage; the main store owns the storage.
func (s *SubresourceStore) Destroy() {}

// Get implements rest.Getter.
func (s *SubresourceStore) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	return s.store.Get(ctx, name, options)
}

// Update implements rest.Updater. Subresources never create.
func (s *SubresourceStore) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, _ bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return s.store.Update(ctx, name, objInfo, createValidation, updateValidation, false, options)
}

// GetResetFields implements rest.ResetFieldsStrategy.
func (s *SubresourceStore) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	if s.store.ResetFieldsStrategy == nil {
		return nil
	}
	return s.store.ResetFieldsStrategy.GetResetFields()
}

// ConvertToTable implements rest.TableConvertor.
func (s *SubresourceStore) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return s.store.ConvertToTable(ctx, object, tableOptions)
}
