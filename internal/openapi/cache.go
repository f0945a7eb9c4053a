package openapi

import (
	"net/http"
	"strings"
	"sync/atomic"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/kube-openapi/pkg/handler3"
)

// Builtin shares, for the process, the OpenAPI v3 service of the core tier
// of servers that serve only the built-in providers. Its documents are the
// same for every such server, and building them (every group version's
// spec, at PrepareRun) and marshalling them (kube-aggregator fetches and
// hashes them while preparing to run) was a large part of start-up. The
// first server builds its service and publishes it; later servers skip
// building theirs and serve the published one. The service is read-only
// once built and safe for concurrent use.
var Builtin = &Shared{}

// Shared holds a published OpenAPI v3 service.
type Shared struct {
	svc atomic.Pointer[handler3.OpenAPIService]
}

// Service is the published service, or nil before a first server has
// prepared to run.
func (s *Shared) Service() *handler3.OpenAPIService { return s.svc.Load() }

// Publish makes svc the shared service unless one already is.
func (s *Shared) Publish(svc *handler3.OpenAPIService) {
	if svc != nil {
		s.svc.CompareAndSwap(nil, svc)
	}
}

// Delegate wraps a tier built without its own OpenAPI v3 routes, so that
// /openapi/v3 is served by svc.
func Delegate(d *genericapiserver.GenericAPIServer, svc *handler3.OpenAPIService) genericapiserver.DelegationTarget {
	h := d.UnprotectedHandler()
	return &servedOpenAPITarget{GenericAPIServer: d, handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/openapi/v3" || r.URL.Path == "/openapi/v3/":
			svc.HandleDiscovery(w, r)
		case strings.HasPrefix(r.URL.Path, "/openapi/v3/"):
			svc.HandleGroupVersion(w, r)
		default:
			h.ServeHTTP(w, r)
		}
	})}
}

type servedOpenAPITarget struct {
	*genericapiserver.GenericAPIServer
	handler http.Handler
}

// UnprotectedHandler implements genericapiserver.DelegationTarget.
func (t *servedOpenAPITarget) UnprotectedHandler() http.Handler { return t.handler }
