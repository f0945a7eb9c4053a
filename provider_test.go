package apiserver_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	nodev1 "k8s.io/api/node/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/core"
	"github.com/kubeembed/apiserver/providers/registry"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// runtimeClasses is a provider as a user would write one, with the
// providers/registry helpers: node.k8s.io/v1 runtimeclasses.
type runtimeClasses struct{}

func (runtimeClasses) GroupName() string { return nodev1.GroupName }

func (runtimeClasses) Install(scheme *runtime.Scheme) error {
	if err := nodev1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := providers.AddInternalVersion(scheme, nodev1.SchemeGroupVersion); err != nil {
		return err
	}
	return scheme.SetVersionPriority(nodev1.SchemeGroupVersion)
}

func (runtimeClasses) Storage(ctx providers.Context) (map[string]map[string]rest.Storage, error) {
	st := &registry.Strategy{ObjectTyper: ctx.Scheme, NameGenerator: names.SimpleNameGenerator}
	st.ValidateCreate = func(_ context.Context, obj runtime.Object) field.ErrorList {
		rc := obj.(*nodev1.RuntimeClass)
		errs := apivalidation.ValidateObjectMeta(&rc.ObjectMeta, false, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
		for _, msg := range apivalidation.NameIsDNSLabel(rc.Handler, false) {
			errs = append(errs, field.Invalid(field.NewPath("handler"), rc.Handler, msg))
		}
		return errs
	}
	store, err := registry.NewStore(ctx, registry.StoreConfig{
		Resource: nodev1.Resource("runtimeclasses"), Singular: "runtimeclass",
		NewFunc:  func() runtime.Object { return &nodev1.RuntimeClass{} },
		NewList:  func() runtime.Object { return &nodev1.RuntimeClassList{} },
		Strategy: st,
	})
	if err != nil {
		return nil, err
	}
	return map[string]map[string]rest.Storage{"v1": {"runtimeclasses": store}}, nil
}

func TestUserProviderAndCRDObjects(t *testing.T) {
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
		Providers: []providers.Provider{runtimeClasses{}},
		CRDs:      []*apiextensionsv1.CustomResourceDefinition{crd},
	}))
	c := clientset(t, srv)
	rc, err := c.NodeV1().RuntimeClasses().Create(t.Context(), &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc"}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "runsc", rc.Handler)
	_, err = c.NodeV1().RuntimeClasses().Create(t.Context(), &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Handler: "Not_A_Label"}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "invalid handler: %v", err)

	dyn, err := srv.DynamicClient()
	require.NoError(t, err)
	_, err = dyn.Resource(schema.GroupVersionResource{Group: "example.kubeembed.dev", Version: "v1", Resource: "gizmos"}).
		List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err, "CRDs given as objects are served")
}

func TestDuplicateProviderGroup(t *testing.T) {
	_, err := apiserver.New(apiserver.Options{Providers: []providers.Provider{core.Provider{}, runtimeClasses{}, runtimeClasses{}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `Providers[0] serves group "", which is already served`)
	assert.Contains(t, err.Error(), `Providers[2] serves group "node.k8s.io", which is already served`)
}

func ptrTo[T any](v T) *T { return &v }
