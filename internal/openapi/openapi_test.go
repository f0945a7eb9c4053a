package openapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	restful "github.com/emicklei/go-restful/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/kubeembed/apiserver/internal/openapi"
)

func TestSharedPublishesOncePerKey(t *testing.T) {
	t.Parallel()
	var s openapi.Shared[string]
	a, b, c := "a", "b", "c"
	assert.Nil(t, s.Load("k"))
	assert.Same(t, &a, s.Publish("k", &a))
	assert.Same(t, &a, s.Publish("k", &b), "the first published value stays")
	assert.Same(t, &a, s.Load("k"))
	assert.Nil(t, s.Publish("other", nil), "nil publishes nothing")
	assert.Same(t, &c, s.Publish("other", &c), "keys are separate")
}

// v2Fixture serves one route (configmaps) and the CRDs it is given.
type v2Fixture struct {
	routesBuilt atomic.Int32
	crds        atomic.Pointer[[]*apiextensionsv1.CustomResourceDefinition]
}

func (f *v2Fixture) handler(key string) *openapi.V2 {
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	config := genericapiserver.DefaultOpenAPIConfig(openapi.AllDefinitions, openapinamer.NewDefinitionNamer(scheme))
	routes := func() []*restful.WebService {
		f.routesBuilt.Add(1)
		ws := new(restful.WebService).Path("/api/v1")
		ws.Route(ws.GET("/namespaces/{namespace}/configmaps").To(func(*restful.Request, *restful.Response) {}).
			Operation("listCoreV1NamespacedConfigMap").Writes(corev1.ConfigMapList{}).Returns(200, "OK", corev1.ConfigMapList{}))
		return []*restful.WebService{ws}
	}
	return openapi.NewV2(config, routes, func() ([]*apiextensionsv1.CustomResourceDefinition, error) {
		if l := f.crds.Load(); l != nil {
			return *l, nil
		}
		return nil, nil
	}, key)
}

func definitions(t *testing.T, h http.Handler) map[string]any {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi/v2", nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var doc struct {
		Definitions map[string]any `json:"definitions"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &doc))
	return doc.Definitions
}

func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", ResourceVersion: "1"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}}},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{Conditions: []apiextensionsv1.CustomResourceDefinitionCondition{
			{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}}},
	}
}

// v2Runs numbers TestV2FollowsCRDsAndSharesRoutes's runs.
var v2Runs atomic.Int32

func TestV2FollowsCRDsAndSharesRoutes(t *testing.T) {
	t.Parallel()
	f := &v2Fixture{}
	// A key of this run's own: V2Routes is process-wide, and -count runs
	// the test again in the same process.
	key := t.Name() + "/" + strconv.Itoa(int(v2Runs.Add(1)))
	h := f.handler(key)
	defs := definitions(t, h)
	assert.Contains(t, defs, "io.k8s.api.core.v1.ConfigMapList")
	assert.NotContains(t, defs, "com.example.v1.Widget")

	f.crds.Store(&[]*apiextensionsv1.CustomResourceDefinition{widgetCRD()})
	assert.Contains(t, definitions(t, h), "com.example.v1.Widget", "an established CRD is published")

	unestablished := widgetCRD()
	unestablished.ResourceVersion, unestablished.Status.Conditions = "2", nil
	f.crds.Store(&[]*apiextensionsv1.CustomResourceDefinition{unestablished})
	assert.NotContains(t, definitions(t, h), "com.example.v1.Widget", "a CRD not established is not")

	definitions(t, f.handler(key))
	assert.Equal(t, int32(1), f.routesBuilt.Load(), "a second server of the same key reuses the routes' spec")
	definitions(t, f.handler(key+"/other"))
	assert.Equal(t, int32(2), f.routesBuilt.Load(), "another key builds its own")
}
