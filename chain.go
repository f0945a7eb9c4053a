package apiserver

import (
	"context"
	"fmt"
	"net/http"

	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	genericapiserver "k8s.io/apiserver/pkg/server"
	aggregatorapiserver "k8s.io/kube-aggregator/pkg/apiserver"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kubeembed/apiserver/faults"
	"github.com/kubeembed/apiserver/internal/satoken"
)

// chain is the three delegating tiers kube-apiserver's CreateServerChain
// builds: aggregator -> core -> apiextensions -> 404.
type chain struct {
	aggregator *aggregatorapiserver.APIAggregator
	core       *coreTier
	extensions *apiextensionsapiserver.CustomResourceDefinitions
}

// buildChain builds the tiers back to front, each a Config -> Complete() ->
// New(delegate), and serves the aggregator through the loopback.
func (s *Server) buildChain() (*chain, error) {
	tc, err := s.newTierConfig()
	if err != nil {
		return nil, err
	}

	ext, err := tc.extensionsConfig().Complete().New(notFoundDelegate())
	if err != nil {
		return nil, fmt.Errorf("apiextensions tier: %w", err)
	}
	// apiextensions publishes CRDs' OpenAPI v3 only when its tier also has a
	// static OpenAPI v2 spec, which it does not use for v3. kubeembed builds
	// /openapi/v2 itself, lazily (openAPIV2): a placeholder turns the v3
	// publishing on, as on kube-apiserver.
	ext.GenericAPIServer.StaticOpenAPISpec = &spec.Swagger{}
	crds := ext.Informers.Apiextensions().V1().CustomResourceDefinitions()
	s.informers.add(ext.Informers, crds.Informer().HasSynced)

	core, err := tc.newCoreConfig().Complete().New(ext.GenericAPIServer)
	if err != nil {
		return nil, fmt.Errorf("core tier: %w", err)
	}
	if err := s.addHooks(core.GenericAPIServer); err != nil {
		return nil, err
	}
	if err := s.addControllers(core.GenericAPIServer, tc.loopback, crds.Informer()); err != nil {
		return nil, err
	}

	inner := func(h http.Handler) http.Handler {
		return s.metrics.instrument(faults.Handler(h, s.faults, s.recorder))
	}
	agg, err := tc.aggregatorConfig(s.listener.track, inner).Complete().NewWithDelegate(core.delegate)
	if err != nil {
		return nil, fmt.Errorf("aggregator tier: %w", err)
	}
	apiServices := agg.APIRegistrationInformers.Apiregistration().V1().APIServices()
	s.informers.add(agg.APIRegistrationInformers, apiServices.Informer().HasSynced)
	if err := registerAPIServices(agg, core.GenericAPIServer, crds.Informer()); err != nil {
		return nil, err
	}
	if err := s.addReadyzChecks(agg.GenericAPIServer); err != nil {
		return nil, err
	}

	c := &chain{aggregator: agg, core: core, extensions: ext}
	agg.GenericAPIServer.Handler.NonGoRestfulMux.Handle("/openapi/v2", c.openAPIV2(tc, crds.Lister()))
	agg.GenericAPIServer.Handler.NonGoRestfulMux.Handle("/metrics", s.metrics.handler())
	config, jwks := s.tokens.DiscoveryHandlers(s.url)
	agg.GenericAPIServer.Handler.NonGoRestfulMux.Handle(satoken.OpenIDConfigurationPath, config)
	agg.GenericAPIServer.Handler.NonGoRestfulMux.Handle(satoken.JWKSPath, jwks)
	s.crdLister = crds.Lister()
	s.loopback.SetHandler(agg.GenericAPIServer.Handler)
	return c, nil
}

type runner interface {
	Run(ctx context.Context) error
}

// prepare readies the chain to run, as PrepareRun does.
func (c *chain) prepare() (runner, error) {
	p, err := c.aggregator.PrepareRun()
	if err != nil {
		return nil, err
	}
	c.core.publishOpenAPI()
	return p, nil
}

// tiers are the tiers front to back.
func (c *chain) tiers() []*genericapiserver.GenericAPIServer {
	return []*genericapiserver.GenericAPIServer{c.aggregator.GenericAPIServer, c.core.GenericAPIServer, c.extensions.GenericAPIServer}
}
