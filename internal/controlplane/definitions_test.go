package controlplane

import (
	"reflect"
	"testing"

	restful "github.com/emicklei/go-restful/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiopenapi "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/kube-openapi/pkg/builder3"
	openapicommon "k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/common/restfuladapter"

	"github.com/kubeembed/apiserver/internal/openapi"
)

// The OpenAPI definitions are built once while held and let go at
// release (a later builder builds its own and keeps nothing), and a
// builder's run leaves nothing of itself in the configuration: kube-openapi
// sets a missing GetOperationIDAndTagsFromRoute to a function of its first
// builder, which held the definitions and the builder's spec for the
// server's life.
func TestOpenAPIDefinitionsAreLetGo(t *testing.T) {
	t.Parallel()
	built := 0
	h := &heldDefinitions{get: func(ref openapicommon.ReferenceCallback) map[string]openapicommon.OpenAPIDefinition {
		built++
		return openapi.AllDefinitions(ref)
	}}
	c := genericapiserver.DefaultOpenAPIV3Config(h.Get, apiopenapi.NewDefinitionNamer(runtime.NewScheme()))
	c.Definitions = nil
	c.GetOperationIDAndTagsFromRoute = operationIDAndTags(c)
	ours := reflect.ValueOf(c.GetOperationIDAndTagsFromRoute).Pointer()
	build := func() {
		t.Helper()
		schemas, err := builder3.BuildOpenAPIDefinitionsForResources(c, corev1.ConfigMap{}.OpenAPIModelName())
		require.NoError(t, err)
		require.NotEmpty(t, schemas)
	}
	build()
	build()
	assert.Equal(t, 1, built, "held: built once")
	h.release()
	build()
	build()
	assert.Equal(t, 3, built, "released: each builder builds its own")
	assert.Equal(t, ours, reflect.ValueOf(c.GetOperationIDAndTagsFromRoute).Pointer(), "a builder replaced it")

	ws := new(restful.WebService).Path("/apis/example.com/v1")
	ws.Route(ws.GET("/widgets").To(func(*restful.Request, *restful.Response) {}).Operation("listWidgets"))
	route := ws.Routes()[0]
	wantID, wantTags, wantErr := apiopenapi.GetOperationIDAndTags(&route)
	id, tags, err := c.GetOperationIDAndTagsFromRoute(&restfuladapter.RouteAdapter{Route: &route})
	assert.Equal(t, []any{wantID, wantTags, wantErr}, []any{id, tags, err})
	_, _, err = c.GetOperationIDAndTagsFromRoute(notRestful{})
	assert.Error(t, err)
}

// notRestful is a route that is not go-restful's.
type notRestful struct{ openapicommon.Route }
