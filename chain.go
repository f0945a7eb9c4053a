package apiserver

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"

	restful "github.com/emicklei/go-restful/v3"
	noopoteltrace "go.opentelemetry.io/otel/trace/noop"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/recognizer"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	discoveryaggregated "k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/registry/generic"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	basecompatibility "k8s.io/component-base/compatibility"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationv1beta1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1beta1"
	aggregatorapiserver "k8s.io/kube-aggregator/pkg/apiserver"
	aggregatorscheme "k8s.io/kube-aggregator/pkg/apiserver/scheme"
	openapicommon "k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kubeembed/apiserver/internal/globals"
	"github.com/kubeembed/apiserver/internal/inproc"
	"github.com/kubeembed/apiserver/internal/openapi"
	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/admissionregistration"
	"github.com/kubeembed/apiserver/providers/apps"
	"github.com/kubeembed/apiserver/providers/authentication"
	"github.com/kubeembed/apiserver/providers/authorization"
	"github.com/kubeembed/apiserver/providers/autoscaling"
	"github.com/kubeembed/apiserver/providers/batch"
	"github.com/kubeembed/apiserver/providers/certificates"
	"github.com/kubeembed/apiserver/providers/coordination"
	"github.com/kubeembed/apiserver/providers/core"
	"github.com/kubeembed/apiserver/providers/discovery"
	"github.com/kubeembed/apiserver/providers/events"
	"github.com/kubeembed/apiserver/providers/flowcontrol"
	"github.com/kubeembed/apiserver/providers/networking"
	"github.com/kubeembed/apiserver/providers/node"
	"github.com/kubeembed/apiserver/providers/policy"
	"github.com/kubeembed/apiserver/providers/rbac"
	"github.com/kubeembed/apiserver/providers/resource"
	"github.com/kubeembed/apiserver/providers/scheduling"
	"github.com/kubeembed/apiserver/providers/storage"
	"github.com/kubeembed/apiserver/providers/storagemigration"
)

// KubernetesVersion is the version of kube-apiserver whose API this server
// serves and reports at /version.
const KubernetesVersion = "1.37.2"

// etcdPrefix is the key prefix of every stored object, kube-apiserver's
// --etcd-prefix default.
const etcdPrefix = "/registry"

func builtinProviders() []providers.Provider {
	return []providers.Provider{core.Provider{}, apps.Provider{}, batch.Provider{}, coordination.Provider{}, events.Provider{},
		networking.Provider{}, policy.Provider{}, rbac.Provider{}, scheduling.Provider{},
		admissionregistration.Provider{}, authentication.Provider{}, authorization.Provider{}, autoscaling.Provider{}, certificates.Provider{}, discovery.Provider{},
		flowcontrol.Provider{}, node.Provider{}, resource.Provider{}, storage.Provider{}, storagemigration.Provider{}}
}

// withProviderDefinitions adds the OpenAPI definitions of the user's
// providers that have some to the built-in ones.
func withProviderDefinitions(ps []providers.Provider) openapicommon.GetOpenAPIDefinitions {
	var extra []providers.OpenAPIProvider
	for _, p := range ps {
		if o, ok := p.(providers.OpenAPIProvider); ok {
			extra = append(extra, o)
		}
	}
	if len(extra) == 0 {
		return openapi.AllDefinitions
	}
	return func(ref openapicommon.ReferenceCallback) map[string]openapicommon.OpenAPIDefinition {
		defs := openapi.AllDefinitions(ref)
		for _, o := range extra {
			maps.Copy(defs, o.OpenAPIDefinitions(ref))
		}
		return defs
	}
}

// chain is the three delegating tiers kube-apiserver's CreateServerChain
// builds: aggregator -> core -> apiextensions -> 404.
type chain struct {
	aggregator *aggregatorapiserver.APIAggregator
	// publish, if set, runs once the chain is prepared to run (the first
	// built-in-only server publishes its OpenAPI v3 service).
	publish func()
	// informers starts the informers that post-start hooks wait for and
	// returns their HasSynced.
	informers func(ctx context.Context) []cache.InformerSynced
}

type runner interface {
	Run(ctx context.Context) error
}

func (c *chain) prepare() (runner, error) {
	p, err := c.aggregator.PrepareRun()
	if err != nil {
		return nil, err
	}
	if c.publish != nil {
		c.publish()
	}
	return p, nil
}

// shared is what every tier's configuration has in common.
type shared struct {
	serving       *genericapiserver.SecureServingInfo
	loopback      *rest.Config
	authn         authenticator.Request
	authz         authorizer.Authorizer
	admission     admission.Interface
	version       basecompatibility.EffectiveVersion
	external      string
	kubeInformers informers.SharedInformerFactory
	decorator     generic.StorageDecorator
	openAPI       *openapicommon.OpenAPIV3Config
	providers     []providers.Provider
	scheme        *runtime.Scheme // the core tier's
	// discovery is the aggregated discovery (/apis) of all tiers: each adds
	// its groups, the aggregator serves them, as in kube-apiserver.
	discovery discoveryaggregated.ResourceManager
}

// coreScheme returns a scheme with every provider installed.
func coreScheme(all []providers.Provider) (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	scheme.AddUnversionedTypes(schema.GroupVersion{Version: "v1"},
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
	for _, p := range all {
		if err := p.Install(scheme); err != nil {
			return nil, fmt.Errorf("install group %q: %w", p.GroupName(), err)
		}
	}
	return scheme, nil
}

func (s *Server) buildChain(host string, port int) (*chain, error) {
	globals.Init()

	serving, err := s.ca.Serving("127.0.0.1", "::1", "localhost", host)
	if err != nil {
		return nil, err
	}
	cert, err := dynamiccertificates.NewStaticCertKeyContent("serving-cert", serving.CertPEM, serving.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	clientCA, err := dynamiccertificates.NewStaticCAContent("client-ca", s.ca.CertPEM)
	if err != nil {
		return nil, fmt.Errorf("client CA: %w", err)
	}

	// The server's own clients call its handler chain in process.
	s.loopback = &inproc.Transport{}
	loopback := &rest.Config{
		Host:        s.url,
		BearerToken: randomToken(),
		Transport:   s.loopback,
		QPS:         -1,
		ContentConfig: rest.ContentConfig{
			ContentType:        runtime.ContentTypeProtobuf,
			AcceptContentTypes: runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON,
		},
	}

	kubeClient, err := kubernetes.NewForConfig(loopback)
	if err != nil {
		return nil, err
	}
	dynClient, err := dynamic.NewForConfig(loopback)
	if err != nil {
		return nil, err
	}
	s.kubeInformers = informers.NewSharedInformerFactory(kubeClient, 0)
	s.dynInformers = dynamicinformer.NewDynamicSharedInformerFactory(dynClient, 0)

	sh := &shared{
		serving:       &genericapiserver.SecureServingInfo{Listener: s.listener, Cert: cert, ClientCA: clientCA},
		loopback:      loopback,
		authn:         s.authenticator(),
		authz:         authorizerFunc(authorize),
		version:       globals.EffectiveVersion(KubernetesVersion),
		external:      fmt.Sprintf("%s:%d", hostForURL(host), port),
		kubeInformers: s.kubeInformers,
		decorator:     s.storage.Decorator(),
		discovery:     discoveryaggregated.NewResourceManager("apis"),
	}
	// Aggregated discovery lists groups in kube-apiserver's priority order.
	for gv, p := range groupPriorities {
		sh.discovery.SetGroupVersionPriority(metav1.GroupVersion{Group: gv.Group, Version: gv.Version}, int(p.group), int(p.version))
	}
	sh.providers = append(builtinProviders(), s.opts.Providers...)
	if sh.scheme, err = coreScheme(sh.providers); err != nil {
		return nil, err
	}
	// One OpenAPI configuration for the three tiers, as kube-apiserver
	// shares it: building its definitions is 8.7 MB of allocation.
	sh.openAPI = genericapiserver.DefaultOpenAPIV3Config(withProviderDefinitions(s.opts.Providers),
		openapinamer.NewDefinitionNamer(sh.scheme, apiextensionsapiserver.Scheme, aggregatorscheme.Scheme))
	sh.openAPI.Info.Title = "Kubernetes"
	if sh.admission, err = newAdmission(kubeClient, dynClient, s.kubeInformers, sh.authz, sh.version, loopback, s.admissionStop); err != nil {
		return nil, err
	}

	ext, err := s.extensionsTier(sh)
	if err != nil {
		return nil, fmt.Errorf("apiextensions tier: %w", err)
	}
	s.crdLister = ext.Informers.Apiextensions().V1().CustomResourceDefinitions().Lister()
	// With only the built-in providers, the core tier's OpenAPI documents
	// are the same in every server of the process: the first server builds
	// them, later ones serve its service (internal/openapi.Builtin).
	builtinOnly := len(s.opts.Providers) == 0
	sharedSpec := openapi.Builtin.Service()
	if !builtinOnly {
		sharedSpec = nil
	}
	coreTier, err := s.coreTier(sh, ext.GenericAPIServer, sharedSpec != nil)
	if err != nil {
		return nil, fmt.Errorf("core tier: %w", err)
	}
	var coreTarget genericapiserver.DelegationTarget = coreTier
	if sharedSpec != nil {
		coreTarget = openapi.Delegate(coreTier, sharedSpec)
	}
	agg, err := s.aggregatorTier(sh, coreTarget, coreTier, ext)
	if err != nil {
		return nil, fmt.Errorf("aggregator tier: %w", err)
	}
	if err := s.addStartInformersHook(agg.GenericAPIServer); err != nil {
		return nil, err
	}
	// /openapi/v2, built when first asked for (see internal/openapi.V2).
	v2config := genericapiserver.DefaultOpenAPIConfig(withProviderDefinitions(s.opts.Providers),
		openapinamer.NewDefinitionNamer(sh.scheme, apiextensionsapiserver.Scheme, aggregatorscheme.Scheme))
	v2config.Info.Title, v2config.Info.Version = "Kubernetes", "v"+KubernetesVersion
	routes := func() []*restful.WebService {
		// Each tier serves /version and the like: the first tier's wins.
		var ws []*restful.WebService
		seen := map[string]bool{}
		for _, t := range []*genericapiserver.GenericAPIServer{agg.GenericAPIServer, coreTier, ext.GenericAPIServer} {
			for _, w := range t.Handler.GoRestfulContainer.RegisteredWebServices() {
				if !seen[w.RootPath()] {
					seen[w.RootPath()] = true
					ws = append(ws, w)
				}
			}
		}
		return ws
	}
	crdLister := s.crdLister
	agg.GenericAPIServer.Handler.NonGoRestfulMux.Handle("/openapi/v2", openapi.NewV2(v2config, routes,
		func() ([]*apiextensionsv1.CustomResourceDefinition, error) {
			return crdLister.List(labels.Everything())
		}, builtinOnly))
	s.loopback.SetHandler(agg.GenericAPIServer.Handler)
	crds := ext.Informers.Apiextensions().V1().CustomResourceDefinitions().Informer()
	apiServices := agg.APIRegistrationInformers.Apiregistration().V1().APIServices().Informer()
	namespaces := s.kubeInformers.Core().V1().Namespaces().Informer() // namespace lifecycle admission's
	// The webhook and policy admission plugins refuse requests until their
	// configurations' informers have synced: sync them before ready.
	admissionV1 := s.kubeInformers.Admissionregistration().V1()
	admissionSynced := []cache.InformerSynced{
		admissionV1.MutatingWebhookConfigurations().Informer().HasSynced,
		admissionV1.ValidatingWebhookConfigurations().Informer().HasSynced,
		// The policy plugins are built once a policy exists; until then
		// only the policies' informers are needed, to know.
		admissionV1.ValidatingAdmissionPolicies().Informer().HasSynced,
		admissionV1.MutatingAdmissionPolicies().Informer().HasSynced,
	}
	var publish func()
	if builtinOnly && sharedSpec == nil {
		publish = func() { openapi.Builtin.Publish(coreTier.OpenAPIV3VersionedService) }
	}
	return &chain{
		aggregator: agg,
		publish:    publish,
		informers: func(ctx context.Context) []cache.InformerSynced {
			ext.Informers.StartWithContext(ctx)
			agg.APIRegistrationInformers.StartWithContext(ctx)
			s.kubeInformers.StartWithContext(ctx)
			return append([]cache.InformerSynced{crds.HasSynced, apiServices.HasSynced, namespaces.HasSynced}, admissionSynced...)
		},
	}, nil
}

// genericConfig returns a tier's generic configuration: shared serving,
// authentication, authorization and admission; no priority and fairness, no
// metrics or profiling endpoints (their registries are process-wide).
func (sh *shared) genericConfig(codecs serializer.CodecFactory, getter generic.RESTOptionsGetter, resources *serverstorage.ResourceConfig) *genericapiserver.RecommendedConfig {
	c := genericapiserver.NewRecommendedConfig(codecs)
	c.SecureServing = sh.serving
	c.LoopbackClientConfig = rest.CopyConfig(sh.loopback)
	c.ClientConfig = c.LoopbackClientConfig
	c.Authentication.Authenticator = sh.authn
	c.Authorization.Authorizer = sh.authz
	c.AdmissionControl = sh.admission
	c.EffectiveVersion = sh.version
	c.ExternalAddress = sh.external
	c.SharedInformerFactory = sh.kubeInformers
	c.RESTOptionsGetter = getter
	c.MergedResourceConfig = resources
	c.FlowControl = nil
	c.EnableMetrics = false
	c.EnableProfiling = false
	c.EnableIndex = false
	c.ShutdownDelayDuration = 0
	c.ShutdownWatchTerminationGracePeriod = 0
	c.AggregatedDiscoveryGroupManager = sh.discovery
	c.OpenAPIV3Config = sh.openAPI
	return c
}

// restOptionsGetter gives resources storage from a storage factory (codec,
// key prefix) on the server's storage backend.
type restOptionsGetter struct {
	factory   serverstorage.StorageFactory
	decorator generic.StorageDecorator
	// untyped clears apiVersion and kind of the objects storage decodes.
	untyped bool
}

func (g restOptionsGetter) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	cfg, err := g.factory.NewConfig(resource, example)
	if err != nil {
		return generic.RESTOptions{}, fmt.Errorf("storage for %v: %w", resource, err)
	}
	if g.untyped {
		cfg.Codec = untypedCodec{cfg.Codec}
	}
	return generic.RESTOptions{
		StorageConfig:           cfg,
		Decorator:               g.decorator,
		EnableGarbageCollection: true,
		DeleteCollectionWorkers: 1,
		ResourcePrefix:          g.factory.ResourcePrefix(resource),
	}, nil
}

// untypedCodec makes the built-in objects read from storage look like
// kube-apiserver's. It decodes storage into internal types, which have no
// apiVersion and kind, so that the items of a list it serves carry none
// (only the list itself is typed when encoded). The providers use the
// k8s.io/api types as their internal version too, which the codec leaves
// typed. Custom resources (unstructured) keep theirs, as on kube-apiserver.
type untypedCodec struct{ runtime.Codec }

func (c untypedCodec) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	obj, gvk, err := c.Codec.Decode(data, defaults, into)
	if obj != nil {
		if _, ok := obj.(runtime.Unstructured); !ok {
			obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
		}
	}
	return obj, gvk, err
}

// simpleGetter stores every resource with one codec, under group/resource,
// as kube-apiserver configures the aggregator and apiextensions tiers.
func (sh *shared) simpleGetter(codec runtime.Codec, encode runtime.GroupVersioner) restOptionsGetter {
	return restOptionsGetter{
		factory: &genericoptions.SimpleStorageFactory{StorageConfig: storagebackend.Config{
			Prefix: etcdPrefix, Codec: codec, EncodeVersioner: encode,
		}},
		decorator: sh.decorator,
	}
}

func (s *Server) extensionsTier(sh *shared) (*apiextensionsapiserver.CustomResourceDefinitions, error) {
	codecs := apiextensionsapiserver.Codecs
	getter := sh.simpleGetter(codecs.LegacyCodec(apiextensionsv1beta1.SchemeGroupVersion),
		runtime.NewMultiGroupVersioner(apiextensionsv1beta1.SchemeGroupVersion, schema.GroupKind{Group: apiextensionsv1beta1.GroupName}))
	gc := sh.genericConfig(codecs, getter, apiextensionsapiserver.DefaultAPIResourceConfigSource())

	// Custom resources are stored as JSON; apiextensions puts its own codec
	// (pruning, defaulting, conversion) in front of this one.
	crCodec := runtime.NewCodec(unstructured.UnstructuredJSONScheme, recognizer.NewDecoder(unstructured.UnstructuredJSONScheme))
	cfg := &apiextensionsapiserver.Config{
		GenericConfig: gc,
		ExtraConfig: apiextensionsapiserver.ExtraConfig{
			CRDRESTOptionsGetter: sh.simpleGetter(crCodec, nil),
			MasterCount:          1,
			ServiceResolver:      webhook.NewDefaultServiceResolver(),
			AuthResolverWrapper:  webhook.NewDefaultAuthenticationInfoResolverWrapper(nil, nil, sh.loopback, noopoteltrace.NewTracerProvider()),
		},
	}
	ext, err := cfg.Complete().New(genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, err
	}
	// apiextensions publishes CRDs' OpenAPI v3 (kubectl explain, server-side
	// apply clients) only when its tier also has a static OpenAPI v2 spec,
	// which it does not use for v3. This tier has none (kubeembed builds
	// /openapi/v2 lazily, internal/openapi.V2): a placeholder turns on the
	// v3 publishing, as on kube-apiserver.
	ext.GenericAPIServer.StaticOpenAPISpec = &spec.Swagger{}
	return ext, nil
}

// coreTier builds the tier of the providers; with skipOpenAPI it builds no
// OpenAPI v3 documents of its own (a shared service serves them).
func (s *Server) coreTier(sh *shared, delegate genericapiserver.DelegationTarget, skipOpenAPI bool) (*genericapiserver.GenericAPIServer, error) {
	all, scheme := sh.providers, sh.scheme
	codecs := serializer.NewCodecFactory(scheme)
	resources := serverstorage.NewResourceConfig()
	for _, p := range all {
		resources.EnableVersions(scheme.PrioritizedVersionsForGroup(p.GroupName())...)
	}
	factory := serverstorage.NewDefaultStorageFactory(
		storagebackend.Config{Prefix: etcdPrefix},
		runtime.ContentTypeProtobuf, codecs,
		serverstorage.NewDefaultResourceEncodingConfig(scheme), resources, nil)
	// events.k8s.io events are core events, stored once.
	factory.AddCohabitatingResources(corev1.Resource("events"), eventsv1.Resource("events"))
	getter := restOptionsGetter{factory: factory, decorator: sh.decorator, untyped: true}

	gc := sh.genericConfig(codecs, getter, resources)
	gc.SkipOpenAPIInstallation = skipOpenAPI
	server, err := gc.Complete().New("kube-apiserver", delegate)
	if err != nil {
		return nil, err
	}
	pctx := providers.Context{RESTOptionsGetter: getter, Scheme: scheme,
		Authenticator: s.tokenAuthenticator(), Authorizer: sh.authz, RuleResolver: rules{}}
	// The named groups are installed in one call, as kube-apiserver does:
	// their OpenAPI models (for server-side apply) are then built once, not
	// once per group with the shared definitions built again each time.
	var groups []*genericapiserver.APIGroupInfo
	for _, p := range all {
		storage, err := p.Storage(pctx)
		if err != nil {
			return nil, fmt.Errorf("storage of group %q: %w", p.GroupName(), err)
		}
		info := genericapiserver.NewDefaultAPIGroupInfo(p.GroupName(), scheme, metav1.ParameterCodec, codecs)
		info.VersionedResourcesStorageMap = storage
		if p.GroupName() != "" {
			groups = append(groups, &info)
			continue
		}
		if err := server.InstallLegacyAPIGroup(genericapiserver.DefaultLegacyAPIPrefix, &info); err != nil {
			return nil, fmt.Errorf("install the core group: %w", err)
		}
	}
	if err := server.InstallAPIGroups(groups...); err != nil {
		return nil, fmt.Errorf("install groups: %w", err)
	}
	port := int32(s.listener.Addr().(*net.TCPAddr).Port)
	if err := server.AddPostStartHook("bootstrap-system-objects", func(ctx genericapiserver.PostStartHookContext) error {
		return bootstrapSystemObjects(ctx, port)
	}); err != nil {
		return nil, err
	}
	return server, nil
}

func (s *Server) aggregatorTier(sh *shared, delegate genericapiserver.DelegationTarget, core *genericapiserver.GenericAPIServer, ext *apiextensionsapiserver.CustomResourceDefinitions) (*aggregatorapiserver.APIAggregator, error) {
	codecs := aggregatorscheme.Codecs
	getter := sh.simpleGetter(codecs.LegacyCodec(apiregistrationv1.SchemeGroupVersion, apiregistrationv1beta1.SchemeGroupVersion),
		runtime.NewMultiGroupVersioner(apiregistrationv1.SchemeGroupVersion, schema.GroupKind{Group: apiregistrationv1beta1.GroupName}))
	gc := sh.genericConfig(codecs, getter, aggregatorapiserver.DefaultAPIResourceConfigSource())
	// The aggregator serves /openapi/v3 merged from every tier itself.
	gc.SkipOpenAPIInstallation = true
	gc.BuildHandlerChainFunc = func(h http.Handler, c *genericapiserver.Config) http.Handler {
		return s.listener.track(genericapiserver.DefaultBuildHandlerChain(h, c))
	}
	cfg := &aggregatorapiserver.Config{
		GenericConfig: gc,
		ExtraConfig: aggregatorapiserver.ExtraConfig{
			ServiceResolver: noServices{},
			// Aggregated API servers behind Services are not supported yet;
			// its informers would watch Services the core tier does not serve.
			DisableRemoteAvailableConditionController: true,
		},
	}
	agg, err := cfg.Complete().NewWithDelegate(delegate)
	if err != nil {
		return nil, err
	}
	if err := registerAPIServices(agg, core, ext); err != nil {
		return nil, err
	}
	return agg, nil
}

// noServices resolves no Service: kubeembed serves no aggregated API servers
// behind Services yet.
type noServices struct{}

func (noServices) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	return nil, fmt.Errorf("service %s/%s:%d: aggregated API servers behind services are not supported", namespace, name, port)
}

// addStartInformersHook starts the shared typed and dynamic informer
// factories once the server listens.
func (s *Server) addStartInformersHook(server *genericapiserver.GenericAPIServer) error {
	return server.AddPostStartHook("start-informers", func(ctx genericapiserver.PostStartHookContext) error {
		// The hook's context does not carry the server's logger; informers
		// log through the context they are started with.
		logCtx := withLogger(ctx, s.log)
		s.kubeInformers.StartWithContext(logCtx)
		s.dynInformers.Start(logCtx.Done())
		return nil
	})
}
