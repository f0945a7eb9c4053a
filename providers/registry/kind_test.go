package registry_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	k8sstorage "k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"
	"github.com/kubeembed/apiserver/storage"
	"github.com/kubeembed/apiserver/storage/memory"
)

// getter stores every resource on a memory backend with gv's codec.
type getter struct {
	backend *memory.Backend
	codec   runtime.Codec
}

func (g getter) GetRESTOptions(resource schema.GroupResource, _ runtime.Object) (generic.RESTOptions, error) {
	return generic.RESTOptions{
		StorageConfig: &storagebackend.ConfigForResource{GroupResource: resource,
			Config: storagebackend.Config{Codec: g.codec, Prefix: "/registry"}},
		Decorator: func(cfg *storagebackend.ConfigForResource, prefix string, _ func(runtime.Object) (string, error),
			newFunc, newListFunc func() runtime.Object, _ k8sstorage.AttrFunc, _ k8sstorage.IndexerFuncs, _ *cache.Indexers) (k8sstorage.Interface, factory.DestroyFunc, error) {
			s, err := g.backend.Store(storage.ResourceConfig{GroupResource: cfg.GroupResource, Codec: cfg.Codec, Prefix: cfg.Prefix,
				ResourcePrefix: prefix, NewFunc: newFunc, NewListFunc: newListFunc})
			return s, func() {}, err
		},
		ResourcePrefix: "/" + resource.Group + "/" + resource.Resource,
	}, nil
}

// storageOf builds the storage of a group serving kinds in gv.
func storageOf(t *testing.T, gv schema.GroupVersion, addToScheme func(*runtime.Scheme) error, kinds ...registry.Served) (map[string]rest.Storage, *runtime.Scheme) {
	t.Helper()
	scheme := runtime.NewScheme()
	g := registry.Group{GroupVersion: gv, AddToScheme: addToScheme, Served: kinds,
		Register: func(s *runtime.Scheme) error { registry.AddScale(s); return nil }}
	require.NoError(t, g.Install(scheme))
	backend := memory.NewBackend(memory.Options{})
	t.Cleanup(func() { _ = backend.Close() })
	cfg := providers.Config{Scheme: scheme, RESTOptionsGetter: getter{backend, serializer.NewCodecFactory(scheme).LegacyCodec(gv)}}
	s, err := g.Storage(cfg)
	require.NoError(t, err)
	return s[gv.Version], scheme
}

func ctx(t *testing.T) context.Context {
	return genericapirequest.WithNamespace(t.Context(), "default")
}

func create[T runtime.Object](t *testing.T, s rest.Storage, obj T) (T, error) {
	t.Helper()
	out, err := s.(rest.Creater).Create(ctx(t), obj, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	if err != nil {
		var zero T
		return zero, err
	}
	return out.(T), nil
}

func update[T runtime.Object](t *testing.T, s rest.Storage, name string, obj T) (T, error) {
	t.Helper()
	out, _, err := s.(rest.Updater).Update(ctx(t), name, rest.DefaultUpdatedObjectInfo(obj),
		rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	if err != nil {
		var zero T
		return zero, err
	}
	return out.(T), nil
}

var deploymentKind = registry.Kind[*appsv1.Deployment]{
	GroupVersion: appsv1.SchemeGroupVersion, Resource: "deployments", Singular: "deployment", Namespaced: true,
	NewObj:       func() runtime.Object { return &appsv1.Deployment{} },
	NewList:      func() runtime.Object { return &appsv1.DeploymentList{} },
	Status:       true,
	GenerationOf: func(d *appsv1.Deployment) any { return d.Spec },
	Default: func(d *appsv1.Deployment) {
		if d.Spec.Replicas == nil {
			d.Spec.Replicas = ptr.To(int32(1))
		}
	},
	Scale: &registry.ScaleAccess{
		Replicas:       func(o runtime.Object) int32 { return *o.(*appsv1.Deployment).Spec.Replicas },
		SetReplicas:    func(o runtime.Object, n int32) { o.(*appsv1.Deployment).Spec.Replicas = &n },
		StatusReplicas: func(o runtime.Object) int32 { return o.(*appsv1.Deployment).Status.Replicas },
		Selector:       func(o runtime.Object) *metav1.LabelSelector { return o.(*appsv1.Deployment).Spec.Selector },
	},
	OrphanByDefault: true,
	ReturnDeleted:   true,
}

func deployment(name string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}}
}

func TestKindStatusAndGeneration(t *testing.T) {
	t.Parallel()
	s, _ := storageOf(t, appsv1.SchemeGroupVersion, appsv1.AddToScheme, deploymentKind)
	require.Contains(t, s, "deployments/status")
	d := deployment("web")
	d.Status.Replicas = 5
	got, err := create(t, s["deployments"], d)
	require.NoError(t, err)
	assert.Zero(t, got.Status.Replicas, "Status: create resets the status")
	assert.Equal(t, int64(1), got.Generation, "GenerationOf: 1 on create")

	got.Status.Replicas = 5
	got.Labels["tier"] = "x"
	got, err = update(t, s["deployments"], "web", got)
	require.NoError(t, err)
	assert.Zero(t, got.Status.Replicas, "the main resource keeps the status")
	assert.Equal(t, int64(1), got.Generation, "no spec change, no new generation")

	got.Spec.Replicas = ptr.To(int32(3))
	got.Status.Replicas = 3
	got.Labels["tier"] = "changed"
	st, err := update(t, s["deployments/status"], "web", got)
	require.NoError(t, err)
	assert.Equal(t, int32(3), st.Status.Replicas, "/status writes the status")
	assert.Equal(t, int32(2), *st.Spec.Replicas, "/status keeps the spec")
	assert.Equal(t, "x", st.Labels["tier"], "/status keeps labels unless StatusWritesLabels")

	st.Spec.Replicas = ptr.To(int32(4))
	st, err = update(t, s["deployments"], "web", st)
	require.NoError(t, err)
	assert.Equal(t, int64(2), st.Generation, "a spec change is a new generation")
}

func TestKindScaleDeleteAndDefaults(t *testing.T) {
	t.Parallel()
	s, scheme := storageOf(t, appsv1.SchemeGroupVersion, appsv1.AddToScheme, deploymentKind)
	d := &appsv1.Deployment{}
	scheme.Default(d)
	assert.Equal(t, int32(1), *d.Spec.Replicas, "Default is registered for decoding")

	_, err := create(t, s["deployments"], deployment("web"))
	require.NoError(t, err)
	scale, err := s["deployments/scale"].(rest.Getter).Get(ctx(t), "web", &metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(2), scale.(*autoscalingv1.Scale).Spec.Replicas)

	strategy := s["deployments"].(*registry.Store).Strategy
	assert.Equal(t, rest.OrphanDependents, strategy.DefaultGarbageCollectionPolicy(t.Context()), "OrphanByDefault")
	deleted, _, err := s["deployments"].(rest.GracefulDeleter).Delete(ctx(t), "web", rest.ValidateAllObjectFunc, &metav1.DeleteOptions{})
	require.NoError(t, err)
	assert.IsType(t, &appsv1.Deployment{}, deleted, "ReturnDeleted answers with the object")
}

func TestKindValidation(t *testing.T) {
	t.Parallel()
	check := func(name string) field.ErrorList {
		return field.ErrorList{field.Invalid(field.NewPath(name), "", name)}
	}
	configMaps := func(first bool) registry.Kind[*corev1.ConfigMap] {
		return registry.Kind[*corev1.ConfigMap]{
			GroupVersion: corev1.SchemeGroupVersion, Resource: "configmaps", Singular: "configmap", Namespaced: true,
			NewObj:  func() runtime.Object { return &corev1.ConfigMap{} },
			NewList: func() runtime.Object { return &corev1.ConfigMapList{} },
			Validate: func(cm *corev1.ConfigMap) field.ErrorList {
				if cm.Data["bad"] != "" {
					return check("validate")
				}
				return nil
			},
			ValidateUpdate:    func(cm, _ *corev1.ConfigMap) field.ErrorList { return check("update") },
			UpdateChecksFirst: first,
		}
	}
	for _, first := range []bool{false, true} {
		s, _ := storageOf(t, corev1.SchemeGroupVersion, corev1.AddToScheme, configMaps(first))
		_, err := create(t, s["configmaps"], &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "Not_DNS", Namespace: "default"}})
		assert.True(t, apierrors.IsInvalid(err), "names are DNS subdomains by default: %v", err)
		cm, err := create(t, s["configmaps"], &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "default"}})
		require.NoError(t, err)
		cm.Data = map[string]string{"bad": "x"}
		_, err = update(t, s["configmaps"], "c", cm)
		require.True(t, apierrors.IsInvalid(err), "%v", err)
		var order []string
		for _, c := range err.(apierrors.APIStatus).Status().Details.Causes {
			order = append(order, c.Field)
		}
		want := []string{"validate", "update"}
		if first {
			want = []string{"update", "validate"}
		}
		assert.Equal(t, want, order, "errors in order, UpdateChecksFirst=%v", first)
	}
}

func TestKindTableAndFields(t *testing.T) {
	t.Parallel()
	kind := registry.Kind[*corev1.Secret]{
		GroupVersion: corev1.SchemeGroupVersion, Resource: "secrets", Singular: "secret", Namespaced: true,
		NewObj:     func() runtime.Object { return &corev1.Secret{} },
		NewList:    func() runtime.Object { return &corev1.SecretList{} },
		Columns:    []registry.Column{registry.ColumnOf("Type", "string", "", 0, func(s *corev1.Secret) any { return string(s.Type) })},
		Fields:     func(s *corev1.Secret) fields.Set { return fields.Set{"type": string(s.Type)} },
		FieldNames: []string{"type"},
	}
	s, scheme := storageOf(t, corev1.SchemeGroupVersion, corev1.AddToScheme, kind)
	table, err := s["secrets"].(rest.TableConvertor).ConvertToTable(t.Context(), &corev1.Secret{Type: "Opaque"}, nil)
	require.NoError(t, err)
	var names []string
	for _, c := range table.ColumnDefinitions {
		names = append(names, c.Name)
	}
	assert.Equal(t, []string{"Name", "Type", "Age"}, names, "NAME, Columns, then AGE")
	assert.Equal(t, "Opaque", table.Rows[0].Cells[1])

	kind.NoAge, kind.PlainName = true, true
	s, _ = storageOf(t, corev1.SchemeGroupVersion, corev1.AddToScheme, kind)
	table, err = s["secrets"].(rest.TableConvertor).ConvertToTable(t.Context(), &corev1.Secret{}, nil)
	require.NoError(t, err)
	assert.Len(t, table.ColumnDefinitions, 2, "NoAge leaves AGE out")
	assert.Empty(t, table.ColumnDefinitions[0].Format, "PlainName")

	gvk := corev1.SchemeGroupVersion.WithKind("Secret")
	_, _, err = scheme.ConvertFieldLabel(gvk, "type", "Opaque")
	assert.NoError(t, err, "FieldNames are selectable")
	_, _, err = scheme.ConvertFieldLabel(gvk, "data", "x")
	assert.ErrorContains(t, err, "field label not supported: data")
}

func TestKindCustomizeAndStatusLike(t *testing.T) {
	t.Parallel()
	called := false
	kind := deploymentKind
	kind.StatusLike = map[string]registry.StatusWrite[*appsv1.Deployment]{"approval": {}}
	kind.Customize = func(_ providers.Config, store *registry.Store, s map[string]rest.Storage) error {
		called = true
		assert.Same(t, store, s["deployments"], "the main store as built")
		s["deployments/extra"] = store
		return nil
	}
	s, _ := storageOf(t, appsv1.SchemeGroupVersion, appsv1.AddToScheme, kind)
	assert.True(t, called)
	assert.Contains(t, s, "deployments/approval")
	assert.Contains(t, s, "deployments/extra")
}
