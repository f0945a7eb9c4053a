package controlplane

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/emicklei/go-restful/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// k8sShapedServices are web services routed as k8s.io/apiserver routes a
// group version: named and collection routes, subresources, watch paths,
// proxies with a {path:*} tail, patch's content types.
func k8sShapedServices() []*restful.WebService {
	ws := new(restful.WebService).Path("/api/v1").Produces("application/json", "application/yaml")
	nop := func(*restful.Request, *restful.Response) {}
	for _, path := range []string{
		"/namespaces/{namespace}/configmaps", "/namespaces/{namespace}/configmaps/{name}",
		"/namespaces", "/namespaces/{name}", "/namespaces/{name}/status", "/namespaces/{name}/finalize",
		"/namespaces/{namespace}/pods/{name}", "/namespaces/{namespace}/pods/{name}/status",
		"/namespaces/{namespace}/pods/{name}/log", "/namespaces/{namespace}/pods/{name}/proxy/{path:*}",
		"/nodes/{name}/proxy", "/nodes/{name}/proxy/{path:*}",
	} {
		ws.Route(ws.GET(path).To(nop))
		ws.Route(ws.PUT(path).To(nop))
		ws.Route(ws.DELETE(path).To(nop))
		ws.Route(ws.PATCH(path).Consumes("application/merge-patch+json", "application/apply-patch+yaml").To(nop))
		ws.Route(ws.POST(path).Consumes("application/json").To(nop))
		ws.Route(ws.GET("/watch" + path).To(nop))
	}
	apps := new(restful.WebService).Path("/apis/apps/v1").Produces("application/json")
	apps.Route(apps.GET("/namespaces/{namespace}/deployments/{name}").To(nop))
	apps.Route(apps.GET("/namespaces/{namespace}/deployments/{name}/scale").To(nop))
	return []*restful.WebService{ws, apps}
}

// Every request routes through the cache as CurlyRouter routes it, the
// first time and from the cache, tokens equal to static ones included.
func TestRouteCacheChoosesAsCurlyRouter(t *testing.T) {
	t.Parallel()
	services := k8sShapedServices()
	cache := &routeCache{}
	require.NotNil(t, cache.stateFor(services).statics, "cacheable")
	names := []string{"a", "status", "configmaps", "namespaces", "proxy", "watch", "log", "finalize", "v1", ""}
	var paths []string
	for _, n := range names {
		paths = append(paths, "/api/v1/namespaces/"+n, "/api/v1/namespaces/"+n+"/status", "/api/v1/namespaces/"+n+"/configmaps/x",
			"/api/v1/namespaces/default/configmaps/"+n, "/api/v1/namespaces/default/pods/"+n+"/log",
			"/api/v1/namespaces/default/pods/p/proxy/"+n+"/status", "/api/v1/nodes/"+n+"/proxy", "/api/v1/nodes/n/proxy/"+n,
			"/api/v1/watch/namespaces/"+n+"/configmaps/"+n, "/api/v1/"+n, "/apis/apps/v1/namespaces/"+n+"/deployments/"+n+"/scale",
			"/api/v1/namespaces/"+n+"/", "/apis/"+n+"/v1/namespaces/a/deployments/b")
	}
	n := 0
	for _, path := range paths {
		for _, method := range []string{"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
			for _, ct := range []string{"", "application/json", "application/merge-patch+json", "text/plain"} {
				for _, accept := range []string{"", "application/json", "application/yaml", "text/html"} {
					want := route(t, restful.CurlyRouter{}, services, method, path, ct, accept)
					for i := range 2 {
						assert.Equal(t, want, route(t, cache, services, method, path, ct, accept), "%s %s %q %q (%d)", method, path, ct, accept, i)
					}
					n++
				}
			}
		}
	}
	t.Logf("%d requests, %d choices cached", n, cache.stateFor(services).size.Load())
}

// route is what a router chose for a request: the route's method and path,
// or the error's code.
func route(t *testing.T, r restful.RouteSelector, services []*restful.WebService, method, path, ct, accept string) string {
	req := httptest.NewRequest(method, "https://server"+path, nil)
	req.Header.Set("Content-Type", ct)
	req.Header.Set("Accept", accept)
	ws, rt, err := r.SelectRoute(services, req)
	if err != nil {
		return fmt.Sprintf("error %d", err.(restful.ServiceError).Code)
	}
	require.NotNil(t, ws)
	return rt.Method + " " + rt.Path
}

// A route whose choice depends on more than static tokens (a parameter's
// pattern, a custom verb) turns the cache off; new web services renew it.
func TestRouteCacheOffForPatterns(t *testing.T) {
	t.Parallel()
	ws := new(restful.WebService).Path("/x")
	ws.Route(ws.GET("/{name:[a-z]+}").To(func(*restful.Request, *restful.Response) {}))
	cache := &routeCache{}
	assert.Nil(t, cache.stateFor([]*restful.WebService{ws}).statics)
	services := k8sShapedServices()
	assert.NotNil(t, cache.stateFor(services).statics)
	assert.Equal(t, "GET /api/v1/namespaces/{name}", route(t, cache, services, http.MethodGet, "/api/v1/namespaces/a", "", ""))
}
