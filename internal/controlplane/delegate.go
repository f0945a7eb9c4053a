package controlplane

// What stands between tiers: each tier hands the requests it does not serve
// to a genericapiserver.DelegationTarget, as in kube-apiserver's chain.

import (
	"net/http"
	"strings"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/kube-openapi/pkg/handler3"
)

// notFoundDelegate ends the chain: the tier behind apiextensions answers 404
// to everything, as kube-apiserver's does.
func notFoundDelegate() genericapiserver.DelegationTarget {
	return genericapiserver.NewEmptyDelegate()
}

// sharedOpenAPIDelegate is the core tier as the aggregator sees it when the
// tier was built without OpenAPI v3 routes of its own: /openapi/v3 is served
// from svc, the service of an earlier server of the process with the same
// providers (internal/openapi.V3Services), and everything else by the tier.
// The aggregator fetches and hashes the delegates' OpenAPI documents while
// it prepares to run; serving a built service skips building and
// marshalling every group version's spec again.
type sharedOpenAPIDelegate struct {
	*genericapiserver.GenericAPIServer
	handler http.Handler
}

func newSharedOpenAPIDelegate(tier *genericapiserver.GenericAPIServer, svc *handler3.OpenAPIService) *sharedOpenAPIDelegate {
	h := tier.UnprotectedHandler()
	return &sharedOpenAPIDelegate{GenericAPIServer: tier, handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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

// UnprotectedHandler implements genericapiserver.DelegationTarget.
func (d *sharedOpenAPIDelegate) UnprotectedHandler() http.Handler { return d.handler }
