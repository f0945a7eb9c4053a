package server

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage/names"
	"k8s.io/apiserver/pkg/storage/storagebackend"

	fruitsv1 "github.com/kubeembed/apiserver/examples/aggregated-apiserver/apis/fruits/v1"
	"github.com/kubeembed/apiserver/storage"
)

// newFruitStore is the generic registry's store of fruits on backend.
func newFruitStore(scheme *runtime.Scheme, codecs serializer.CodecFactory, backend storage.Backend) (*genericregistry.Store, error) {
	st := strategy{ObjectTyper: scheme, NameGenerator: names.SimpleNameGenerator}
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &fruitsv1.Fruit{} },
		NewListFunc:               func() runtime.Object { return &fruitsv1.FruitList{} },
		DefaultQualifiedResource:  fruitsv1.Resource("fruits"),
		SingularQualifiedResource: fruitsv1.Resource("fruit"),
		CreateStrategy:            st, UpdateStrategy: st, DeleteStrategy: st,
		TableConvertor: rest.NewDefaultTableConvertor(fruitsv1.Resource("fruits")),
	}
	gr := fruitsv1.Resource("fruits")
	options := &generic.StoreOptions{RESTOptions: generic.RESTOptions{
		StorageConfig: &storagebackend.ConfigForResource{GroupResource: gr, Config: storagebackend.Config{
			Prefix: "/registry", Codec: codecs.LegacyCodec(fruitsv1.SchemeGroupVersion)}},
		Decorator:      storage.Decorator(backend),
		ResourcePrefix: "/" + gr.Group + "/" + gr.Resource,
	}}
	if err := store.CompleteWithOptions(options); err != nil {
		return nil, fmt.Errorf("fruits store: %w", err)
	}
	return store, nil
}

// strategy is the fruits' REST logic: namespaced, a color is required,
// sweetness is from 0 to 10.
type strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
}

func (strategy) NamespaceScoped() bool                                            { return true }
func (strategy) PrepareForCreate(context.Context, runtime.Object)                 {}
func (strategy) PrepareForUpdate(context.Context, runtime.Object, runtime.Object) {}
func (strategy) Canonicalize(runtime.Object)                                      {}
func (strategy) AllowCreateOnUpdate(context.Context) bool                         { return false }
func (strategy) AllowUnconditionalUpdate(context.Context) bool                    { return true }
func (strategy) WarningsOnCreate(context.Context, runtime.Object) []string        { return nil }
func (strategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}

func (strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validate(obj.(*fruitsv1.Fruit))
}

func (strategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	return validate(obj.(*fruitsv1.Fruit))
}

func validate(f *fruitsv1.Fruit) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if f.Spec.Color == "" {
		errs = append(errs, field.Required(spec.Child("color"), "a fruit has a color"))
	}
	if f.Spec.Sweetness < 0 || f.Spec.Sweetness > 10 {
		errs = append(errs, field.Invalid(spec.Child("sweetness"), f.Spec.Sweetness, "must be from 0 to 10"))
	}
	return errs
}
