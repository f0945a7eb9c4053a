package apiserver_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	schedulingv1 "k8s.io/api/scheduling/v1"
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

// priorityClasses is a provider as a user would write one, with the
// providers/registry helpers: scheduling.k8s.io/v1 priorityclasses.
type priorityClasses struct{}

func (priorityClasses) GroupName() string { return schedulingv1.GroupName }

func (priorityClasses) Install(scheme *runtime.Scheme) error {
	if err := schedulingv1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := providers.AddInternalVersion(scheme, schedulingv1.SchemeGroupVersion); err != nil {
		return err
	}
	return scheme.SetVersionPriority(schedulingv1.SchemeGroupVersion)
}

func (priorityClasses) Storage(ctx providers.Context) (map[string]map[string]rest.Storage, error) {
	st := &registry.Strategy{ObjectTyper: ctx.Scheme, NameGenerator: names.SimpleNameGenerator}
	st.ValidateCreate = func(_ context.Context, obj runtime.Object) field.ErrorList {
		pc := obj.(*schedulingv1.PriorityClass)
		errs := apivalidation.ValidateObjectMeta(&pc.ObjectMeta, false, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
		if pc.Value > 1_000_000_000 {
			errs = append(errs, field.Forbidden(field.NewPath("value"), "maximum allowed value of a user defined priority is 1000000000"))
		}
		return errs
	}
	store, err := registry.NewStore(ctx, registry.StoreConfig{
		Resource: schedulingv1.Resource("priorityclasses"), Singular: "priorityclass",
		NewFunc:  func() runtime.Object { return &schedulingv1.PriorityClass{} },
		NewList:  func() runtime.Object { return &schedulingv1.PriorityClassList{} },
		Strategy: st, ShortNames: []string{"pc"},
	})
	if err != nil {
		return nil, err
	}
	return map[string]map[string]rest.Storage{"v1": {"priorityclasses": store}}, nil
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
		Providers: []providers.Provider{priorityClasses{}},
		CRDs:      []*apiextensionsv1.CustomResourceDefinition{crd},
	}))
	c := clientset(t, srv)
	pc, err := c.SchedulingV1().PriorityClasses().Create(t.Context(), &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.EqualValues(t, 1000, pc.Value)
	_, err = c.SchedulingV1().PriorityClasses().Create(t.Context(), &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: "too-high"}, Value: 2_000_000_000}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "over the limit: %v", err)

	dyn, err := srv.DynamicClient()
	require.NoError(t, err)
	_, err = dyn.Resource(schema.GroupVersionResource{Group: "example.kubeembed.dev", Version: "v1", Resource: "gizmos"}).
		List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err, "CRDs given as objects are served")
}

func TestDuplicateProviderGroup(t *testing.T) {
	_, err := apiserver.New(apiserver.Options{Providers: []providers.Provider{core.Provider{}, priorityClasses{}, priorityClasses{}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `Providers[0] serves group "", which is already served`)
	assert.Contains(t, err.Error(), `Providers[2] serves group "scheduling.k8s.io", which is already served`)
}

func ptrTo[T any](v T) *T { return &v }
