package registry

import (
	"fmt"
	"maps"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/kubeembed/apiserver/providers"
)

// Served is a resource a Group serves: a Kind, or a Computed resource.
type Served interface {
	Storage(providers.Config) (map[string]rest.Storage, error)
	// Register registers the kind's defaults and field selectors.
	Register(scheme *runtime.Scheme) error
}

// Register implements Served.
func (k Kind[T]) Register(scheme *runtime.Scheme) error {
	example := k.NewObj()
	if k.Default != nil {
		scheme.AddTypeDefaultingFunc(example, func(obj any) { k.Default(obj.(T)) })
	}
	gvk := k.GroupVersion.WithKind(reflect.TypeOf(example).Elem().Name())
	if k.FieldLabel != nil {
		return scheme.AddFieldLabelConversionFunc(gvk, k.FieldLabel)
	}
	return FieldLabelConversion(scheme, gvk, k.Namespaced, k.FieldNames...)
}

// Computed is a resource that is never stored, whose REST storage is built
// from the server's configuration: the review APIs, answered from the
// server's authenticator and authorizer (see CreateOnly).
type Computed struct {
	Resource string
	Build    func(providers.Config) rest.Storage
}

// Storage implements Served.
func (c Computed) Storage(cfg providers.Config) (map[string]rest.Storage, error) {
	return map[string]rest.Storage{c.Resource: c.Build(cfg)}, nil
}

// Register implements Served: nothing to default or select.
func (Computed) Register(*runtime.Scheme) error { return nil }

// Group is the whole of a provider serving a group of k8s.io/api types: a
// provider's methods delegate to it.
type Group struct {
	GroupVersion schema.GroupVersion
	// AddToScheme registers the types of GroupVersion, which Install
	// registers as the group's internal version too and makes preferred.
	// Nil when Register installs the types itself.
	AddToScheme func(*runtime.Scheme) error
	// Register adds what else the group needs in the scheme after its
	// types: conversions, the Scale kind, more versions.
	Register func(*runtime.Scheme) error
	Served   []Served
	// AlsoServedAs are more versions served by the same storage, converted
	// from GroupVersion's types (autoscaling/v1); Register adds their types,
	// conversions and field selectors (FieldLabelConversion).
	AlsoServedAs []string
	// Link connects the storage of the group's resources once all are
	// built, by resource name (a namespace's default service account), and
	// may wrap them (RBAC's escalation checks read roles to write bindings).
	Link func(cfg providers.Config, storage map[string]rest.Storage) error
	// Hooks are the group's post-start hooks by name (see
	// providers.Config.AddPostStartHook); a nil hook does not apply.
	Hooks map[string]Hook
}

// Hook builds a post-start hook from the server's configuration and the
// group's storage by resource name (a hook that seeds objects can create
// them through the store, below the handler chain).
type Hook func(cfg providers.Config, storage map[string]rest.Storage) genericapiserver.PostStartHookFunc

var _ providers.Provider = Group{}

// GroupName implements providers.Provider.
func (g Group) GroupName() string { return g.GroupVersion.Group }

// Install implements providers.Provider.
func (g Group) Install(scheme *runtime.Scheme) error {
	if g.AddToScheme != nil {
		if err := providers.InstallGroupVersion(scheme, g.GroupVersion, g.AddToScheme); err != nil {
			return err
		}
	}
	if g.Register != nil {
		if err := g.Register(scheme); err != nil {
			return fmt.Errorf("install %v: %w", g.GroupVersion, err)
		}
	}
	for _, s := range g.Served {
		if err := s.Register(scheme); err != nil {
			return err
		}
	}
	return nil
}

// Storage implements providers.Provider.
func (g Group) Storage(cfg providers.Config) (map[string]map[string]rest.Storage, error) {
	out := map[string]rest.Storage{}
	for _, s := range g.Served {
		m, err := s.Storage(cfg)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", g.GroupVersion, err)
		}
		maps.Copy(out, m)
	}
	if g.Link != nil {
		if err := g.Link(cfg, out); err != nil {
			return nil, fmt.Errorf("%s: %w", g.GroupVersion, err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(g.Hooks)) {
		if hook := g.Hooks[name](cfg, out); hook != nil {
			if err := cfg.AddPostStartHook(name, hook); err != nil {
				return nil, err
			}
		}
	}
	versions := map[string]map[string]rest.Storage{g.GroupVersion.Version: out}
	for _, v := range g.AlsoServedAs {
		versions[v] = out
	}
	return versions, nil
}

// ConfigHook is a hook that needs only the server's configuration.
func ConfigHook(f func(providers.Config) genericapiserver.PostStartHookFunc) Hook {
	return func(cfg providers.Config, _ map[string]rest.Storage) genericapiserver.PostStartHookFunc {
		return f(cfg)
	}
}
