package controlplane

// The aggregator tier, in front: APIServices, the merged discovery and
// OpenAPI of the tiers behind it, and what kube-apiserver's
// CreateAggregatorServer adds to it.

import (
	"net/http"

	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationv1beta1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1beta1"
	aggregatorapiserver "k8s.io/kube-aggregator/pkg/apiserver"
	aggregatorscheme "k8s.io/kube-aggregator/pkg/apiserver/scheme"

	"github.com/kubeembed/apiserver/faults"
	"github.com/kubeembed/apiserver/internal/satoken"
)

// newAggregatorConfig is the aggregator tier's configuration. Its handler
// chain is the server's outermost (Config.Track around it); inside
// authentication it records requests, injects faults and counts them for
// /metrics.
func newAggregatorConfig(sh *shared) *aggregatorapiserver.Config {
	codecs := aggregatorscheme.Codecs
	getter := simpleGetter(sh.stored, codecs.LegacyCodec(apiregistrationv1.SchemeGroupVersion, apiregistrationv1beta1.SchemeGroupVersion),
		runtime.NewMultiGroupVersioner(apiregistrationv1.SchemeGroupVersion, schema.GroupKind{Group: apiregistrationv1beta1.GroupName}))
	gc := sh.genericConfig(codecs, getter, aggregatorapiserver.DefaultAPIResourceConfigSource())
	// The aggregator serves /openapi/v3 merged from every tier itself.
	gc.SkipOpenAPIInstallation = true
	// The index at / (and /index.html) lists every tier's paths, as
	// kube-apiserver's does; the tiers behind never see / (the index
	// there, on the last tier, would answer every unknown path with it).
	gc.EnableIndex = true
	// Only the aggregator's handler chain sees requests: it audits them.
	gc.AuditBackend, gc.AuditPolicyRuleEvaluator = sh.Audit.Backend, sh.Audit.Evaluator
	// Of /healthz and /livez only: a tier takes its delegate's health
	// checks into all three.
	certificate := servingCertificateCheck(sh.servingNotAfter)
	gc.HealthzChecks = append(gc.HealthzChecks, certificate)
	gc.LivezChecks = append(gc.LivezChecks, certificate)
	inner := func(h http.Handler) http.Handler {
		return sh.metrics.instrument(faults.Handler(h, sh.Faults, sh.Recorder))
	}
	gc.BuildHandlerChainFunc = func(h http.Handler, c *genericapiserver.Config) http.Handler {
		return sh.Track(handlerChain(inner(h), c, sh.muxComplete))
	}
	return &aggregatorapiserver.Config{
		GenericConfig: gc,
		ExtraConfig: aggregatorapiserver.ExtraConfig{
			// Aggregated API servers behind Services are proxied to an
			// endpoint of the Service, as with kube-apiserver's
			// --enable-aggregator-routing (the default/kubernetes Service
			// is the server itself), with the front proxy's certificate.
			ServiceResolver:           sh.services,
			ProxyTransport:            serviceTransport(),
			ProxyClientCertFile:       sh.Keys.FrontProxy.certFile,
			ProxyClientKeyFile:        sh.Keys.FrontProxy.keyFile,
			RejectForwardingRedirects: true,
		},
	}
}

// createAggregator builds the aggregator in front of the core tier, as
// kube-apiserver's CreateAggregatorServer: APIServices registered for the
// groups the tiers behind serve (and kept for CRDs), the readiness checks
// only the front tier serves, and the routes of the whole server that no
// tier has: /openapi/v2 over every tier, /metrics, and service account
// issuer discovery.
func createAggregator(sh *shared, core *coreTier, ext *apiextensionsapiserver.CustomResourceDefinitions) (*aggregatorapiserver.APIAggregator, error) {
	agg, err := newAggregatorConfig(sh).Complete().NewWithDelegate(core.delegate)
	if err != nil {
		return nil, err
	}
	crds := ext.Informers.Apiextensions().V1().CustomResourceDefinitions()
	if err := registerAPIServices(agg, core.GenericAPIServer, crds.Informer()); err != nil {
		return nil, err
	}
	storage := sh.stored
	if err := agg.GenericAPIServer.AddReadyzChecks(healthz.NamedCheck("etcd-readiness", func(r *http.Request) error {
		return storage.Check(r.Context())
	})); err != nil {
		return nil, err
	}
	mux := agg.GenericAPIServer.Handler.NonGoRestfulMux
	tiers := []*genericapiserver.GenericAPIServer{agg.GenericAPIServer, core.GenericAPIServer, ext.GenericAPIServer}
	mux.Handle("/openapi/v2", openAPIV2(sh, tiers, crds.Lister()))
	// kube-aggregator's hook of this name starts the controller that
	// fetches aggregated APIServices' OpenAPI v2 at start; kubeembed builds
	// /openapi/v2 when it is first asked for (openAPIV2), which saves the
	// start the spec's build would cost. The hook is there by name, as
	// clients (Kubernetes' e2e health check) require it of a
	// kube-apiserver; it has nothing to start.
	if err := addPostStartHook(agg.GenericAPIServer, "apiservice-openapi-controller", func(genericapiserver.PostStartHookContext) error {
		return nil
	}); err != nil {
		return nil, err
	}
	mux.Handle("/metrics", sh.metrics.handler())
	config, jwks := sh.Keys.Issuer.DiscoveryHandlers(sh.URL)
	mux.Handle(satoken.OpenIDConfigurationPath, config)
	mux.Handle(satoken.JWKSPath, jwks)
	return agg, nil
}
