package controlplane

// What stands between tiers: each tier hands the requests it does not serve
// to a genericapiserver.DelegationTarget, as in kube-apiserver's chain.

import (
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	genericapifilters "k8s.io/apiserver/pkg/endpoints/filters"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/util/notfoundhandler"
	"k8s.io/kube-openapi/pkg/handler3"
)

// notFoundDelegate ends the chain, behind apiextensions, as kube-apiserver's
// does: a path no tier serves is a 404, or a 503 with Retry-After while the
// tiers are still installing their routes and discovery (the handler chain
// marks such requests: see handlerChain's muxComplete), so that a client
// early for a CRD's or an aggregated group's path retries instead of
// concluding it is not there.
func notFoundDelegate(s runtime.NegotiatedSerializer) genericapiserver.DelegationTarget {
	return genericapiserver.NewEmptyDelegateWithCustomHandler(
		notfoundhandler.New(s, genericapifilters.NoMuxAndDiscoveryIncompleteKey))
}

// sharedOpenAPIDelegate is the core tier as the aggregator sees it when the
// tier was built without OpenAPI v3 routes of its own: /openapi/v3 is served
// from svc, the service of an earlier server of the process with the same
// providers (internal/openapi.V3Services), and everything else by the tier.
// The aggregator fetches and hashes the delegates' OpenAPI documents while
// it prepares to run; serving a built service skips building and
// marshalling every group version's spec again.
//
// Preparing to run, such a tier has nothing left to install but its health
// checks' paths (/healthz, /livez, /readyz and one per check, ~180), which
// no request can reach: the aggregator in front serves those paths, with
// every check of the tiers behind it. Each registration records a stack
// trace (k8s.io/apiserver's PathRecorderMux): the three tiers' ~410
// registrations were 8% of a start's CPU (BenchmarkStart -cpuprofile),
// these ~180 about half of that; start time moved within noise. So
// the delegate's PrepareRun is the next tier's (apiextensions, whose own
// OpenAPI routes the aggregator does fetch), the step the core tier's own
// PrepareRun takes first. PrepareRun's result is of a type that cannot be
// named here, hence R, which newSharedOpenAPIDelegate infers. The tier's
// health registries are thus never marked installed: a check added to it
// after Prepare would be accepted and lost rather than refused, as it is
// lost on kube-apiserver when added after the aggregator copied the
// delegate's checks (nothing adds one: the tiers' checks are all added
// while the chain is built).
type sharedOpenAPIDelegate[R any] struct {
	preparedBy[R] // PrepareRun: depth 1, ahead of the tier's
	tierMethods   // every other method: depth 2
	handler       http.Handler
}

// preparedBy's PrepareRun is prepare.
type preparedBy[R any] struct{ prepare func() R }

func (p preparedBy[R]) PrepareRun() R { return p.prepare() }

// tierMethods puts the tier's methods one level below preparedBy's.
type tierMethods struct {
	*genericapiserver.GenericAPIServer
}

func newSharedOpenAPIDelegate[R any](tier *genericapiserver.GenericAPIServer, next func() R, svc *handler3.OpenAPIService) *sharedOpenAPIDelegate[R] {
	h := tier.UnprotectedHandler()
	return &sharedOpenAPIDelegate[R]{preparedBy: preparedBy[R]{next}, tierMethods: tierMethods{tier},
		handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
func (d *sharedOpenAPIDelegate[R]) UnprotectedHandler() http.Handler { return d.handler }
