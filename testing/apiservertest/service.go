package apiservertest

import (
	"context"
	"net/http"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/internal/localservice"
)

// ServeService serves handler over TLS as the Service namespace/name of
// srv, as a webhook server or an aggregated API server runs in a cluster,
// until the test ends, and returns the CA bundle that trusts it: the
// caBundle of a webhook configuration, a CRD's conversion webhook or an
// APIService that names the Service, which can be applied unchanged.
//
// The handler listens on 127.0.0.1, asks clients for a certificate (the
// aggregator presents the front proxy's) without verifying it, and has a
// certificate for
// <name>.<namespace>.svc (the name the server checks) and
// <name>.<namespace>.svc.cluster.local. The namespace is created if
// missing; the Service too (type ClusterIP, port 443 named "https"), or
// the one there is kept (as applied from config/webhook/service.yaml); an
// EndpointSlice gives each of its ports the handler's port at
// apiserver.LocalEndpointIP, which the server reaches on the loopback
// interface.
func ServeService(t TB, srv *apiserver.Server, namespace, name string, handler http.Handler) (caBundle []byte) {
	t.Helper()
	c, err := srv.Clientset()
	if err != nil {
		t.Fatalf("ServeService %s/%s: %v", namespace, name, err)
	}
	svc, err := localservice.Serve(t.Context(), c, namespace, name, handler, nil)
	if err != nil {
		t.Fatalf("ServeService %s/%s: %v", namespace, name, err)
	}
	// Not t.Context(): it is cancelled before cleanups run, and the
	// requests in flight deserve their answer, as httptest.Server.Close
	// gives them.
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	return svc.CABundle
}

// RouteService makes the Service namespace/name of srv lead to a server of
// the test that already listens on 127.0.0.1:port (an aggregated API
// server serving its own TLS, say), as ServeService does for a handler: the
// namespace and Service are created if missing, and an EndpointSlice gives
// each of its ports port at apiserver.LocalEndpointIP.
func RouteService(t TB, srv *apiserver.Server, namespace, name string, port int) {
	t.Helper()
	c, err := srv.Clientset()
	if err == nil {
		_, err = localservice.Publish(t.Context(), c, namespace, name, int32(port))
	}
	if err != nil {
		t.Fatalf("RouteService %s/%s: %v", namespace, name, err)
	}
}
