package apiserver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiserverinternalv1alpha1 "k8s.io/api/apiserverinternal/v1alpha1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/core"
	"github.com/kubeembed/apiserver/providers/registry"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// storageVersions is a provider as a user would write one, with the
// providers/registry helpers, for a group kube-apiserver does not serve by
// default: internal.apiserver.k8s.io/v1alpha1 storageversions.
type storageVersions struct{}

var storageVersionGroup = registry.Group{
	GroupVersion: apiserverinternalv1alpha1.SchemeGroupVersion, AddToScheme: apiserverinternalv1alpha1.AddToScheme,
	Served: []registry.Served{registry.Kind[*apiserverinternalv1alpha1.StorageVersion]{
		GroupVersion: apiserverinternalv1alpha1.SchemeGroupVersion, Resource: "storageversions", Singular: "storageversion",
		Status:  true,
		NewObj:  func() runtime.Object { return &apiserverinternalv1alpha1.StorageVersion{} },
		NewList: func() runtime.Object { return &apiserverinternalv1alpha1.StorageVersionList{} },
	}},
}

func (storageVersions) GroupName() string { return storageVersionGroup.GroupName() }
func (storageVersions) Install(scheme *runtime.Scheme) error {
	return storageVersionGroup.Install(scheme)
}
func (storageVersions) Storage(cfg providers.Config) (map[string]map[string]rest.Storage, error) {
	return storageVersionGroup.Storage(cfg)
}

// OpenAPIDefinitions implements providers.OpenAPIProvider: these types are
// not among kubeembed's generated definitions. Written by hand here; a real
// provider would run openapi-gen.
func (storageVersions) OpenAPIDefinitions(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	const pkg = "io.k8s.api.apiserverinternal.v1alpha1."
	object := func(props map[string]spec.Schema, deps ...string) common.OpenAPIDefinition {
		return common.OpenAPIDefinition{Schema: spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}, Properties: props}}, Dependencies: deps}
	}
	refTo := func(name string) spec.Schema { return spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref(name)}} }
	str := spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"string"}}}
	const meta, listMeta = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"
	return map[string]common.OpenAPIDefinition{
		pkg + "StorageVersion": object(map[string]spec.Schema{"apiVersion": str, "kind": str, "metadata": refTo(meta),
			"spec": refTo(pkg + "StorageVersionSpec"), "status": refTo(pkg + "StorageVersionStatus")}, meta, pkg+"StorageVersionSpec", pkg+"StorageVersionStatus"),
		pkg + "StorageVersionList": object(map[string]spec.Schema{"apiVersion": str, "kind": str, "metadata": refTo(listMeta),
			"items": {SchemaProps: spec.SchemaProps{Type: []string{"array"}, Items: &spec.SchemaOrArray{Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref(pkg + "StorageVersion")}}}}}},
			listMeta, pkg+"StorageVersion"),
		pkg + "StorageVersionSpec":   object(nil),
		pkg + "StorageVersionStatus": object(map[string]spec.Schema{"commonEncodingVersion": str}),
	}
}

func TestUserProviderAndCRDObjects(t *testing.T) {
	t.Parallel()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gizmos.example.kubeembed.dev"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.kubeembed.dev", Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gizmos", Singular: "gizmo", Kind: "Gizmo", ListKind: "GizmoList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptrTo(true)}},
			}},
		},
	}
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{
		Providers: []providers.Provider{storageVersions{}},
		CRDs:      []*apiextensionsv1.CustomResourceDefinition{crd},
	}))
	c := clientset(t, srv)
	sv, err := c.InternalV1alpha1().StorageVersions().Create(t.Context(), &apiserverinternalv1alpha1.StorageVersion{
		ObjectMeta: metav1.ObjectMeta{Name: "apps.deployments"},
		Status:     apiserverinternalv1alpha1.StorageVersionStatus{CommonEncodingVersion: ptrTo("apps/v1")},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Nil(t, sv.Status.CommonEncodingVersion, "status is written through /status only")
	_, err = c.InternalV1alpha1().StorageVersions().Create(t.Context(), &apiserverinternalv1alpha1.StorageVersion{
		ObjectMeta: metav1.ObjectMeta{Name: "Not_A_Name"}}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "invalid name: %v", err)

	dyn, err := srv.DynamicClient()
	require.NoError(t, err)
	_, err = dyn.Resource(schema.GroupVersionResource{Group: "example.kubeembed.dev", Version: "v1", Resource: "gizmos"}).
		List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err, "CRDs given as objects are served")
}

func TestDuplicateProviderGroup(t *testing.T) {
	t.Parallel()
	_, err := apiserver.New(apiserver.Options{Providers: []providers.Provider{core.Provider(), storageVersions{}, storageVersions{}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `Providers[0] serves group "", which is already served`)
	assert.Contains(t, err.Error(), `Providers[2] serves group "internal.apiserver.k8s.io", which is already served`)
}

func ptrTo[T any](v T) *T { return &v }
