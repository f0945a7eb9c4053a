package controlplane

// The configuration every tier shares, built once from Config, as
// kube-apiserver builds one generic configuration and copies it into each
// tier (cmd/kube-apiserver/app/config.go).

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	discoveryaggregated "k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/registry/generic"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	basecompatibility "k8s.io/component-base/compatibility"
	aggregatorscheme "k8s.io/kube-aggregator/pkg/apiserver/scheme"
	openapicommon "k8s.io/kube-openapi/pkg/common"
	"k8s.io/utils/clock"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/faults"
	"github.com/kubeembed/apiserver/internal/globals"
	"github.com/kubeembed/apiserver/internal/inproc"
	"github.com/kubeembed/apiserver/internal/version"
	"github.com/kubeembed/apiserver/internal/writes"
	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/storage"
	"github.com/kubeembed/apiserver/timing"
)

// Config is what a control plane is built from: the server's completed
// options, its keys and its listener, as values.
type Config struct {
	Log *zap.Logger
	// Listener is where the server serves; Track wraps its handler chain,
	// outermost.
	Listener net.Listener
	Track    func(http.Handler) http.Handler
	// URL is the server's base URL (https://host:port); Host its bind
	// address, named in the serving certificate.
	URL, Host string
	Keys      Keys
	// ServiceClusterIPRange is the Services' range (zero: the default).
	ServiceClusterIPRange netip.Prefix
	// AdminToken authenticates AdminUser, in system:masters.
	AdminToken string
	// Storage is the backend every tier stores in; Timing slows it down
	// (when enabled).
	Storage storage.Backend
	Timing  timing.Profile
	// Providers are the API groups of the core tier, built-in ones first;
	// OpenAPIKey names them (see internal/openapi.Shared).
	Providers  []providers.Provider
	OpenAPIKey string
	// Controllers are those to run, in start order; Nodes the simulated
	// nodes the kubelet registers; Clock the controllers' clock.
	Controllers             []controllers.Name
	Nodes                   []controllers.Node
	Clock                   clock.WithTickerAndDelayedExecution
	PriorityAndFairness     bool
	ServiceAccountAdmission bool
	Audit                   Audit
	// Faults and Recorder act on the requests clients send, inside
	// authentication.
	Faults   *faults.Injector
	Recorder *faults.Recorder
}

// Audit is the audit policy and where events go; zero when the server does
// not audit (as kube-apiserver without a policy).
type Audit struct {
	Evaluator audit.PolicyRuleEvaluator
	Backend   audit.Backend
}

// shared is what the three tiers' configurations have in common.
type shared struct {
	Config
	serving *genericapiserver.SecureServingInfo
	// servingNotAfter is when the serving certificate expires.
	servingNotAfter time.Time
	// loopback is the configuration of the server's own clients, which
	// call its handler chain in process through the transport.
	loopback  *rest.Config
	transport *inproc.Transport
	informers *informerSet
	// synced are the informers readiness needs, as the parts that need
	// them declare.
	synced []cache.InformerSynced
	// writes notes every write to storage (for WaitIdle and RBAC's
	// read-your-writes); stored is the backend as the tiers see it.
	writes  *writes.Log
	stored  storage.Backend
	metrics *serverMetrics
	access
	controllerBase
	admission admission.Interface
	// services resolves Services to endpoints, for the server's calls to
	// webhooks, conversion webhooks and aggregated API servers.
	services serviceResolver
	version  basecompatibility.EffectiveVersion
	// external is the server's host:port; address its address in its
	// cluster (the default/kubernetes Service's endpoint).
	external string
	address  netip.AddrPort
	// flowControl is API Priority and Fairness, shared by the tiers as
	// kube-apiserver shares it (only the aggregator's filter sees requests).
	flowControl utilflowcontrol.Interface
	flowStatus  *flowSchemaStatus // nil without priority and fairness
	scheme      *runtime.Scheme   // the core tier's: every provider installed
	openAPI     *openapicommon.OpenAPIV3Config
	definitions *heldDefinitions // openAPI's, until the server is ready
	// discovery is the aggregated discovery (/apis) of all tiers: each adds
	// its groups, the aggregator serves them, as in kube-apiserver.
	discovery discoveryaggregated.ResourceManager
	// muxComplete is closed once every tier's routes and discovery are
	// in place (signalMuxComplete).
	muxComplete chan struct{}
}

// access is who a request is and what it may do: authentication and
// authorization, built from the keys and the informers.
type access struct {
	authn authenticator.Request
	// tokens authenticates bearer tokens only, for TokenReview.
	tokens authenticator.Request
	authz  authorizer.Authorizer
	rules  authorizer.RuleResolver
}

// newShared builds the shared configuration: certificates, the in-process
// loopback, informers, storage as the tiers see it, controllers,
// authentication and authorization, admission, OpenAPI.
func newShared(c Config) (_ *shared, err error) {
	sh := &shared{Config: c, writes: &writes.Log{}, version: effectiveVersion(), muxComplete: make(chan struct{}),
		external: strings.TrimPrefix(c.URL, "https://"), address: servingAddress(c.Listener)}
	defer func() {
		if err != nil {
			sh.abort()
		}
	}()
	if sh.serving, sh.servingNotAfter, err = servingInfo(c.Listener, c.Keys, c.Host); err != nil {
		return nil, err
	}
	sh.loopback, sh.transport = loopbackConfig(c.URL)
	if sh.informers, err = newInformerSet(sh.loopback, c.Log); err != nil {
		return nil, err
	}
	sh.metrics = newServerMetrics(c.Storage)
	sh.stored = sh.metrics.objects.count(writes.Track(slowed(c.Storage, c.Timing), sh.writes))
	if sh.scheme, err = coreScheme(c.Providers); err != nil {
		return nil, err
	}
	if err := sh.buildControllerBase(); err != nil {
		return nil, err
	}
	if err := sh.buildAccess(); err != nil {
		return nil, err
	}
	if err := sh.buildAdmission(); err != nil {
		return nil, err
	}
	if c.PriorityAndFairness {
		if sh.flowStatus, err = newFlowSchemaStatus(sh.informers.kube, sh.writes); err != nil {
			return nil, err
		}
		client := sh.flowStatus.client(sh.informers.ctx, sh.informers.client.FlowcontrolV1())
		sh.flowControl = sh.metrics.priorityAndFairness(sh.informers.kube, client, serverConcurrencyLimit)
	}
	// One OpenAPI configuration for the three tiers, as kube-apiserver
	// shares it: building its definitions is 8.7 MB of allocation. Its
	// builders ask heldDefinitions for them, not its Definitions field,
	// which would keep them for the server's life.
	sh.definitions = &heldDefinitions{get: withProviderDefinitions(c.Providers)}
	sh.openAPI = genericapiserver.DefaultOpenAPIV3Config(sh.definitions.Get,
		openapinamer.NewDefinitionNamer(sh.scheme, apiextensionsapiserver.Scheme, aggregatorscheme.Scheme))
	sh.openAPI.Definitions = nil
	sh.openAPI.GetOperationIDAndTagsFromRoute = operationIDAndTags(sh.openAPI)
	sh.openAPI.Info.Title = "Kubernetes"
	sh.discovery = newDiscoveryManager()
	return sh, nil
}

// slowed is b with timing p, innermost, so that the writes log notes a
// write when it has committed; b itself when p is off, so that a server
// without timing pays nothing for it.
func slowed(b storage.Backend, p timing.Profile) storage.Backend {
	if !p.Enabled() {
		return b
	}
	return timing.Backend(b, p)
}

// buildControllerBase builds what the controllers are built from, when
// any runs.
func (sh *shared) buildControllerBase() error {
	if len(loops(sh.Controllers)) == 0 {
		sh.controllerBase = controllerBase{ready: make(chan struct{})}
		return nil
	}
	cfg, err := controllerConfig(sh.loopback, sh.informers.kube, sh.writes, sh.metrics.queues, sh.Keys)
	if err != nil {
		return err
	}
	cfg.Clock = sh.Clock
	if slices.Contains(sh.Controllers, controllers.Kubelet) {
		cfg.Nodes = sh.Nodes // registered by the simulated kubelet only
	}
	sh.controllerBase, err = newControllerBase(sh.Controllers, cfg)
	return err
}

// buildAccess builds authentication and authorization.
func (sh *shared) buildAccess() error {
	authz, rules, synced, err := newAuthorizer(sh.Providers, sh.informers.kube, sh.writes, sh.aggregation)
	if err != nil {
		return err
	}
	tokens := tokenAuthenticator(sh.AdminToken, sh.Keys.Issuer, sh.informers)
	sh.access = access{authn: requestAuthenticator(sh.Keys, tokens), tokens: tokens, authz: authz, rules: rules}
	sh.synced = append(sh.synced, synced...)
	return nil
}

// buildAdmission builds the Service resolver and the admission chain that
// calls webhooks through it.
func (sh *shared) buildAdmission() error {
	services, synced, err := newServiceResolver(sh.informers, &url.URL{Scheme: "https", Host: sh.external})
	if err != nil {
		return err
	}
	sh.services = services
	sh.synced = append(sh.synced, synced...)
	adm, synced, err := newAdmission(sh.loopback, sh.informers, sh.writes, sh.authz, sh.version, sh.services, sh.ServiceAccountAdmission)
	if err != nil {
		return err
	}
	sh.admission = adm
	sh.synced = append(sh.synced, synced...)
	return nil
}

// abort undoes what a failed build began.
func (sh *shared) abort() {
	if sh.informers != nil {
		sh.informers.shutdown()
	}
	if sh.transport != nil {
		sh.transport.Close()
	}
}

// defaultServiceAccounts: controllers.ServiceAccount is on.
func (sh *shared) defaultServiceAccounts() bool {
	return slices.Contains(sh.Controllers, controllers.ServiceAccount)
}

// servingAddress is the server's address in its cluster, the endpoint of
// the default/kubernetes Service: its bind address, or LocalEndpointIP when
// it listens on the loopback interface or on all (an endpoint may not be a
// loopback address).
func servingAddress(ln net.Listener) netip.AddrPort {
	ap := ln.Addr().(*net.TCPAddr).AddrPort()
	if a := ap.Addr().Unmap(); !a.IsUnspecified() && !a.IsLoopback() {
		return netip.AddrPortFrom(a, ap.Port())
	}
	return netip.AddrPortFrom(localEndpoint, ap.Port())
}

// servingInfo serves TLS on ln with a certificate of the server's CA, and
// asks clients for certificates of that CA or of the front-proxy CA
// (kube-apiserver's serving pool holds both its --client-ca-file and its
// --requestheader-client-ca-file: without the second, a front proxy's TLS
// client would not present its certificate).
func servingInfo(ln net.Listener, keys Keys, host string) (*genericapiserver.SecureServingInfo, time.Time, error) {
	serving, err := keys.CA.Serving("127.0.0.1", "::1", "localhost", host)
	if err != nil {
		return nil, time.Time{}, err
	}
	cert, err := dynamiccertificates.NewStaticCertKeyContent("serving-cert", serving.CertPEM, serving.KeyPEM)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("serving certificate: %w", err)
	}
	clientCA, err := dynamiccertificates.NewStaticCAContent("client-ca", keys.CA.CertPEM)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("client CA: %w", err)
	}
	frontProxyCA, err := dynamiccertificates.NewStaticCAContent("request-header", keys.FrontProxy.ca.CertPEM)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("front-proxy CA: %w", err)
	}
	return &genericapiserver.SecureServingInfo{Listener: ln, Cert: cert,
		ClientCA: dynamiccertificates.NewUnionCAContentProvider(clientCA, frontProxyCA)}, serving.NotAfter, nil
}

// loopbackConfig is the configuration of the server's own clients: they
// call its handler chain in process (internal/inproc, whose handler is set
// once the chain is built), with a token only the server knows.
func loopbackConfig(serverURL string) (*rest.Config, *inproc.Transport) {
	t := NewTransport()
	return &rest.Config{
		Host:        serverURL,
		BearerToken: NewToken(),
		// Named as kube-apiserver's loopback: the field manager of what the
		// server writes itself is "kube-apiserver", not the test binary's
		// name.
		UserAgent: "kube-apiserver/v" + version.Kubernetes(),
		Transport: t,
		// The warnings the server's own requests earn (v1 Endpoints is
		// deprecated, read by its endpoint controllers) are not a user's:
		// client-go would log each one.
		WarningHandler: rest.NoWarnings{},
		QPS:            -1,
		ContentConfig: rest.ContentConfig{
			ContentType:        runtime.ContentTypeProtobuf,
			AcceptContentTypes: runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON,
		},
	}, t
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
// metrics or profiling endpoints (the libraries' registries are
// process-wide: the aggregator serves the server's own /metrics).
func (sh *shared) genericConfig(codecs serializer.CodecFactory, getter generic.RESTOptionsGetter, resources *serverstorage.ResourceConfig) *genericapiserver.RecommendedConfig {
	c := genericapiserver.NewRecommendedConfig(codecs)
	c.SecureServing = sh.serving
	c.LoopbackClientConfig = rest.CopyConfig(sh.loopback)
	c.ClientConfig = c.LoopbackClientConfig
	c.Authentication.Authenticator = sh.authn
	c.Authentication.APIAudiences = sh.Keys.Issuer.Audiences()
	c.Authorization.Authorizer = sh.authz
	c.AdmissionControl = sh.admission
	c.EffectiveVersion = sh.version
	c.ExternalAddress = sh.external
	c.SharedInformerFactory = sh.informers.kube
	c.RESTOptionsGetter = getter
	c.MergedResourceConfig = resources
	c.FlowControl = sh.flowControl // nil: the max-in-flight filter instead
	c.EnableMetrics = false
	c.EnableProfiling = false
	c.EnableIndex = false
	c.ShutdownDelayDuration = 0
	c.ShutdownWatchTerminationGracePeriod = 0
	c.AggregatedDiscoveryGroupManager = sh.discovery
	c.OpenAPIV3Config = sh.openAPI
	c.LongRunningFunc = longRunning
	return c
}
