package apiserver

// The configuration every tier shares, and the apiextensions and aggregator
// tiers' own (the core tier's is in core.go).

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	noopoteltrace "go.opentelemetry.io/otel/trace/noop"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	discoveryaggregated "k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/registry/generic"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/rest"
	basecompatibility "k8s.io/component-base/compatibility"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationv1beta1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1beta1"
	aggregatorapiserver "k8s.io/kube-aggregator/pkg/apiserver"
	aggregatorscheme "k8s.io/kube-aggregator/pkg/apiserver/scheme"
	openapicommon "k8s.io/kube-openapi/pkg/common"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/globals"
	"github.com/kubeembed/apiserver/internal/inproc"
	"github.com/kubeembed/apiserver/internal/version"
	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/storage"
)

// tierConfig is what the three tiers' configurations have in common, built
// once, as kube-apiserver builds one generic configuration and copies it
// into each tier.
type tierConfig struct {
	serving *genericapiserver.SecureServingInfo
	// servingNotAfter is when the serving certificate expires.
	servingNotAfter time.Time
	loopback        *rest.Config
	authn           authenticator.Request
	// audiences are the API audiences a service account token must name.
	audiences authenticator.Audiences
	issuer    providers.TokenIssuer
	// tokens authenticates bearer tokens only, for TokenReview.
	tokens    authenticator.Request
	authz     authorizer.Authorizer
	rules     authorizer.RuleResolver
	admission admission.Interface
	version   basecompatibility.EffectiveVersion
	external  string
	// address is where clients reach the server.
	address   netip.AddrPort
	informers *informerSet
	// flowControl is API Priority and Fairness, shared by the tiers as
	// kube-apiserver shares it (only the aggregator's filter sees requests).
	flowControl utilflowcontrol.Interface
	storage     storage.Backend
	openAPI     *openapicommon.OpenAPIV3Config
	// discovery is the aggregated discovery (/apis) of all tiers: each adds
	// its groups, the aggregator serves them, as in kube-apiserver.
	discovery discoveryaggregated.ResourceManager

	providers []providers.Provider
	scheme    *runtime.Scheme // the core tier's: every provider installed
	// openAPIKey names the providers, which determine the OpenAPI
	// documents (see internal/openapi.Shared).
	openAPIKey string
	audit      auditConfig
	frontProxy *frontProxy
	// services resolves Services to endpoints, for the server's calls to
	// webhooks, conversion webhooks and aggregated API servers.
	services serviceResolver
	// defaultServiceAccounts: controllers.ServiceAccount is on.
	defaultServiceAccounts bool
	// afterRestore registers what to do after Server.Restore.
	afterRestore func(func(context.Context) error)
}

// newTierConfig builds the shared configuration: certificates, the
// in-process loopback, the informers, authentication, admission, OpenAPI.
func (s *Server) newTierConfig() (*tierConfig, error) {
	serving, notAfter, err := s.servingInfo()
	if err != nil {
		return nil, err
	}
	loopback := s.loopbackConfig()
	if s.informers, err = newInformerSet(loopback, s.log); err != nil {
		return nil, err
	}
	scheme, err := coreScheme(s.opts.providers)
	if err != nil {
		return nil, err
	}
	authz, err := s.authorizer()
	if err != nil {
		return nil, err
	}
	tc := &tierConfig{
		serving: serving, servingNotAfter: notAfter, loopback: loopback,
		authn: s.authenticator(), tokens: s.tokenAuthenticator(), audiences: s.tokens.Audiences(), issuer: s.tokens,
		authz: authz, rules: s.ruleResolver(),
		version:  effectiveVersion(),
		external: strings.TrimPrefix(s.url, "https://"), address: s.servingAddress(),
		informers: s.informers, storage: s.stored,
		discovery: newDiscoveryManager(),
		providers: s.opts.providers, scheme: scheme,
		openAPIKey: s.opts.openAPIKey, audit: s.opts.audit, frontProxy: s.frontProxy,
		defaultServiceAccounts: slices.Contains(s.opts.controllers, controllers.ServiceAccount),
		afterRestore:           func(f func(context.Context) error) { s.afterRestore = append(s.afterRestore, f) },
	}
	if s.opts.priorityAndFairness {
		tc.flowControl = utilflowcontrol.New(s.informers.kube, s.informers.client.FlowcontrolV1(), serverConcurrencyLimit)
	}
	// One OpenAPI configuration for the three tiers, as kube-apiserver
	// shares it: building its definitions is 8.7 MB of allocation.
	tc.openAPI = genericapiserver.DefaultOpenAPIV3Config(withProviderDefinitions(s.opts.providers),
		openapinamer.NewDefinitionNamer(scheme, apiextensionsapiserver.Scheme, aggregatorscheme.Scheme))
	tc.openAPI.Info.Title = "Kubernetes"
	if tc.services, err = newServiceResolver(s.informers, &url.URL{Scheme: "https", Host: tc.external}); err != nil {
		return nil, err
	}
	if tc.admission, err = newAdmission(loopback, s.informers, tc.authz, tc.version, tc.services, s.opts.serviceAccountAdmission); err != nil {
		return nil, err
	}
	return tc, nil
}

// servingAddress is the server's address in its cluster, the endpoint of
// the default/kubernetes Service: its bind address, or LocalEndpointIP when
// it listens on the loopback interface or on all (an endpoint may not be a
// loopback address).
func (s *Server) servingAddress() netip.AddrPort {
	ap := s.listener.Addr().(*net.TCPAddr).AddrPort()
	if a := ap.Addr().Unmap(); !a.IsUnspecified() && !a.IsLoopback() {
		return netip.AddrPortFrom(a, ap.Port())
	}
	return netip.AddrPortFrom(localEndpoint, ap.Port())
}

// servingInfo serves TLS on the server's listener with a certificate of its
// CA, and asks clients for certificates of that CA or of the front-proxy CA
// (kube-apiserver's serving pool holds both its --client-ca-file and its
// --requestheader-client-ca-file: without the second, a front proxy's TLS
// client would not present its certificate).
func (s *Server) servingInfo() (*genericapiserver.SecureServingInfo, time.Time, error) {
	serving, err := s.ca.Serving("127.0.0.1", "::1", "localhost", s.opts.host)
	if err != nil {
		return nil, time.Time{}, err
	}
	cert, err := dynamiccertificates.NewStaticCertKeyContent("serving-cert", serving.CertPEM, serving.KeyPEM)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("serving certificate: %w", err)
	}
	clientCA, err := dynamiccertificates.NewStaticCAContent("client-ca", s.ca.CertPEM)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("client CA: %w", err)
	}
	frontProxyCA, err := dynamiccertificates.NewStaticCAContent("request-header", s.frontProxy.ca.CertPEM)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("front-proxy CA: %w", err)
	}
	return &genericapiserver.SecureServingInfo{Listener: s.listener, Cert: cert,
		ClientCA: dynamiccertificates.NewUnionCAContentProvider(clientCA, frontProxyCA)}, serving.NotAfter, nil
}

// loopbackConfig is the configuration of the server's own clients: they
// call its handler chain in process (internal/inproc), with a token only
// the server knows.
func (s *Server) loopbackConfig() *rest.Config {
	s.loopback = &inproc.Transport{}
	return &rest.Config{
		Host:        s.url,
		BearerToken: randomToken(),
		// Named as kube-apiserver's loopback: the field manager of what the
		// server writes itself is "kube-apiserver", not the test binary's
		// name.
		UserAgent: "kube-apiserver/v" + version.Kubernetes(),
		Transport: s.loopback,
		QPS:       -1,
		ContentConfig: rest.ContentConfig{
			ContentType:        runtime.ContentTypeProtobuf,
			AcceptContentTypes: runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON,
		},
	}
}

// effectiveVersion is the version the tiers serve and report at /version:
// the Kubernetes release of the staging modules kubeembed is built with.
func effectiveVersion() basecompatibility.EffectiveVersion {
	return reportedVersion{globals.EffectiveVersion(version.Kubernetes())}
}

// reportedVersion answers /version with internal/version.Info. The
// library's own answer reads k8s.io/component-base/version, which only
// linker flags set: unset, it is "v0.0.0-master+$Format:%H$", which kubectl
// cannot parse.
type reportedVersion struct {
	basecompatibility.EffectiveVersion
}

func (reportedVersion) Info() *apimachineryversion.Info {
	v := version.Info()
	return &v
}

// serverConcurrencyLimit is kube-apiserver's default total of requests in
// flight (--max-requests-inflight 400 plus --max-mutating-requests-inflight
// 200), which priority and fairness divides among priority levels.
const serverConcurrencyLimit = 600

// genericConfig returns a tier's generic configuration: shared serving,
// authentication, authorization, admission and priority and fairness; no
// metrics or profiling endpoints (their registries are process-wide).
func (tc *tierConfig) genericConfig(codecs serializer.CodecFactory, getter generic.RESTOptionsGetter, resources *serverstorage.ResourceConfig) *genericapiserver.RecommendedConfig {
	c := genericapiserver.NewRecommendedConfig(codecs)
	c.SecureServing = tc.serving
	c.LoopbackClientConfig = rest.CopyConfig(tc.loopback)
	c.ClientConfig = c.LoopbackClientConfig
	c.Authentication.Authenticator = tc.authn
	c.Authentication.APIAudiences = tc.audiences
	c.Authorization.Authorizer = tc.authz
	c.AdmissionControl = tc.admission
	c.EffectiveVersion = tc.version
	c.ExternalAddress = tc.external
	c.SharedInformerFactory = tc.informers.kube
	c.RESTOptionsGetter = getter
	c.MergedResourceConfig = resources
	c.FlowControl = tc.flowControl // nil: the max-in-flight filter instead
	c.EnableMetrics = false
	c.EnableProfiling = false
	c.EnableIndex = false
	c.ShutdownDelayDuration = 0
	c.ShutdownWatchTerminationGracePeriod = 0
	c.AggregatedDiscoveryGroupManager = tc.discovery
	c.OpenAPIV3Config = tc.openAPI
	return c
}

// extensionsConfig is the apiextensions tier's configuration: CRDs and the
// custom resources they define.
func (tc *tierConfig) extensionsConfig() *apiextensionsapiserver.Config {
	codecs := apiextensionsapiserver.Codecs
	getter := simpleGetter(tc.storage, codecs.LegacyCodec(apiextensionsv1beta1.SchemeGroupVersion),
		runtime.NewMultiGroupVersioner(apiextensionsv1beta1.SchemeGroupVersion, schema.GroupKind{Group: apiextensionsv1beta1.GroupName}))
	return &apiextensionsapiserver.Config{
		GenericConfig: tc.genericConfig(codecs, getter, apiextensionsapiserver.DefaultAPIResourceConfigSource()),
		ExtraConfig: apiextensionsapiserver.ExtraConfig{
			CRDRESTOptionsGetter: simpleGetter(tc.storage, customResourceCodec(), nil),
			MasterCount:          1,
			ServiceResolver:      tc.services,
			AuthResolverWrapper:  webhook.NewDefaultAuthenticationInfoResolverWrapper(serviceTransport(), nil, tc.loopback, noopoteltrace.NewTracerProvider()),
		},
	}
}

// aggregatorConfig is the aggregator tier's configuration: APIServices, the
// merged discovery and OpenAPI of the tiers behind it. track wraps its
// handler chain, the outermost of the server; inner wraps the handler the
// chain protects (inside authentication: faults and recording).
func (tc *tierConfig) aggregatorConfig(track, inner func(http.Handler) http.Handler) *aggregatorapiserver.Config {
	codecs := aggregatorscheme.Codecs
	getter := simpleGetter(tc.storage, codecs.LegacyCodec(apiregistrationv1.SchemeGroupVersion, apiregistrationv1beta1.SchemeGroupVersion),
		runtime.NewMultiGroupVersioner(apiregistrationv1.SchemeGroupVersion, schema.GroupKind{Group: apiregistrationv1beta1.GroupName}))
	gc := tc.genericConfig(codecs, getter, aggregatorapiserver.DefaultAPIResourceConfigSource())
	// The aggregator serves /openapi/v3 merged from every tier itself.
	gc.SkipOpenAPIInstallation = true
	// Only the aggregator's handler chain sees requests: it audits them.
	gc.AuditBackend, gc.AuditPolicyRuleEvaluator = tc.audit.backend, tc.audit.evaluator
	// Of /healthz and /livez only: a tier takes its delegate's health
	// checks into all three.
	certificate := servingCertificateCheck(tc.servingNotAfter)
	gc.HealthzChecks = append(gc.HealthzChecks, certificate)
	gc.LivezChecks = append(gc.LivezChecks, certificate)
	gc.BuildHandlerChainFunc = func(h http.Handler, c *genericapiserver.Config) http.Handler {
		return track(genericapiserver.DefaultBuildHandlerChain(inner(h), c))
	}
	return &aggregatorapiserver.Config{
		GenericConfig: gc,
		ExtraConfig: aggregatorapiserver.ExtraConfig{
			// Aggregated API servers behind Services are proxied to an
			// endpoint of the Service, as with kube-apiserver's
			// --enable-aggregator-routing (the default/kubernetes Service
			// is the server itself), with the front proxy's certificate.
			ServiceResolver:           tc.services,
			ProxyTransport:            serviceTransport(),
			ProxyClientCertFile:       tc.frontProxy.certFile,
			ProxyClientKeyFile:        tc.frontProxy.keyFile,
			RejectForwardingRedirects: true,
		},
	}
}
