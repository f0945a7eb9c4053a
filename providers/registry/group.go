package registry

import (
	"fmt"
	"maps"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kubeembed/apiserver/providers"
)

// Served is a resource a Group serves: a Kind, or anything that builds its
// own storage and field selectors.
type Served interface {
	Storage(providers.Config) (map[string]rest.Storage, error)
	// FieldLabels registers the field selectors of the kind.
	FieldLabels(scheme *runtime.Scheme) error
}

// FieldLabels implements Served.
func (k Kind[T]) FieldLabels(scheme *runtime.Scheme) error {
	kind := reflect.TypeOf(k.NewObj()).Elem().Name()
	return FieldLabelConversion(scheme, k.GroupVersion.WithKind(kind), k.Namespaced, k.FieldNames...)
}

// Group is the whole of a provider serving one version of a group of
// k8s.io/api types: a provider's methods delegate to it.
type Group struct {
	GroupVersion schema.GroupVersion
	AddToScheme  func(*runtime.Scheme) error
	// Defaults are defaulting funcs by example object, applied whenever
	// the type is decoded, as kube-apiserver's generated defaulters.
	Defaults map[runtime.Object]func(obj any)
	Served   []Served
}

// GroupName implements providers.Provider.
func (g Group) GroupName() string { return g.GroupVersion.Group }

// Install implements providers.Provider.
func (g Group) Install(scheme *runtime.Scheme) error {
	if err := providers.InstallGroupVersion(scheme, g.GroupVersion, g.AddToScheme); err != nil {
		return err
	}
	for example, fn := range g.Defaults {
		scheme.AddTypeDefaultingFunc(example, fn)
	}
	for _, s := range g.Served {
		if err := s.FieldLabels(scheme); err != nil {
			return err
		}
	}
	return nil
}

// Storage implements providers.Provider.
func (g Group) Storage(ctx providers.Config) (map[string]map[string]rest.Storage, error) {
	out := map[string]rest.Storage{}
	for _, s := range g.Served {
		m, err := s.Storage(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", g.GroupVersion, err)
		}
		maps.Copy(out, m)
	}
	return map[string]map[string]rest.Storage{g.GroupVersion.Version: out}, nil
}
