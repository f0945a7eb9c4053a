package controlplane

// The core tier: the built-in API groups and the user's, each installed from
// a providers.Provider, as kube-apiserver's control plane installs its
// RESTStorageProviders.

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	genericapiserver "k8s.io/apiserver/pkg/server"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kube-openapi/pkg/handler3"

	"github.com/kubeembed/apiserver/internal/openapi"
	"github.com/kubeembed/apiserver/providers"
)

// coreConfig is the core tier's configuration.
type coreConfig struct {
	generic   *genericapiserver.RecommendedConfig
	providers []providers.Provider
	build     providers.Config
	codecs    serializer.CodecFactory
	// openAPI is the OpenAPI v3 service of an earlier server with the same
	// providers, served instead of building the tier's own; nil if none.
	openAPI    *handler3.OpenAPIService
	openAPIKey string
	// hooks are the server's own post-start hooks and health checks,
	// controllers its control loops, started by hooks of this tier.
	hooks       serverHooks
	controllers *controllerSet
	// runCtx bounds the controllers: the informers' context.
	runCtx context.Context
}

// newCoreConfig stores each provider's resources as kube-apiserver does:
// protobuf under /registry/<resource>, events.k8s.io events with core
// events. crds feed the controllers' resource monitors.
func newCoreConfig(sh *shared, crds cache.SharedIndexInformer) (*coreConfig, error) {
	set, err := newControllerSet(sh.controllerBase, sh.informers.metadata, crds)
	if err != nil {
		return nil, err
	}
	codecs := serializer.NewCodecFactory(sh.scheme)
	resources := serverstorage.NewResourceConfig()
	for _, p := range sh.Providers {
		resources.EnableVersions(sh.scheme.PrioritizedVersionsForGroup(p.GroupName())...)
	}
	factory := serverstorage.NewDefaultStorageFactory(
		storagebackend.Config{Prefix: etcdPrefix},
		runtime.ContentTypeProtobuf, codecs,
		serverstorage.NewDefaultResourceEncodingConfig(sh.scheme), resources, nil)
	factory.AddCohabitatingResources(corev1.Resource("events"), eventsv1.Resource("events"))
	getter := restOptionsGetter{factory: factory, backend: sh.stored, untyped: true}
	build := providers.Config{RESTOptionsGetter: getter, Scheme: sh.scheme,
		Authenticator: sh.tokens, Authorizer: sh.authz, RuleResolver: sh.rules, ServingAddress: sh.address,
		ServiceClusterIPRange: sh.ServiceClusterIPRange,
		Informers:             sh.informers.kube, PriorityAndFairness: sh.flowControl != nil, ServiceAccountTokens: sh.Keys.Issuer,
		DefaultServiceAccounts: sh.defaultServiceAccounts(), ClusterDialer: set.clusterDialer(),
		Components: components(sh.Controllers, sh.Storage, sh.stored.Check)}
	c := &coreConfig{
		generic: sh.genericConfig(codecs, getter, resources), providers: sh.Providers,
		build: build, codecs: codecs,
		openAPI: openapi.V3Services.Load(sh.OpenAPIKey), openAPIKey: sh.OpenAPIKey,
		hooks: serverHooks{informers: sh.informers, storage: sh.stored, address: sh.address, keys: sh.Keys}, controllers: set, runCtx: sh.informers.ctx,
	}
	c.generic.SkipOpenAPIInstallation = c.openAPI != nil
	return c, nil
}

// completedCoreConfig is a coreConfig whose generic configuration is
// completed.
type completedCoreConfig struct {
	*coreConfig
	generic genericapiserver.CompletedConfig
}

// Complete fills in the generic configuration's defaults.
func (c *coreConfig) Complete() completedCoreConfig {
	return completedCoreConfig{coreConfig: c, generic: c.generic.Complete()}
}

// coreTier is the core tier, and what the aggregator delegates to.
type coreTier struct {
	*genericapiserver.GenericAPIServer
	// delegate is the tier as the aggregator sees it.
	delegate genericapiserver.DelegationTarget
	// publishOpenAPI shares the tier's OpenAPI v3 service once it has
	// prepared to run, when it built its own.
	publishOpenAPI func()
	// restorers are the providers' repairs after a restore.
	restorers   []func(context.Context) error
	controllers *controllerSet
}

// New builds the tier in front of delegate: every provider's groups, the
// server's own hooks and health checks, and the hooks that start its
// controllers.
func (c completedCoreConfig) New(delegate genericapiserver.DelegationTarget) (*coreTier, error) {
	server, err := c.generic.New("kube-apiserver", delegate)
	if err != nil {
		return nil, err
	}
	t := &coreTier{GenericAPIServer: server, delegate: server, publishOpenAPI: func() {}, controllers: c.controllers}
	if err := c.install(t); err != nil {
		return nil, err
	}
	if err := c.hooks.register(server); err != nil {
		return nil, err
	}
	if err := c.controllers.register(server, c.runCtx); err != nil {
		return nil, err
	}
	if c.openAPI != nil {
		t.delegate = newSharedOpenAPIDelegate(server, delegate.PrepareRun, c.openAPI)
	} else {
		t.publishOpenAPI = func() { openapi.V3Services.Publish(c.openAPIKey, server.OpenAPIV3VersionedService) }
	}
	return t, nil
}

// install installs the providers' groups (which register their post-start
// hooks on the tier, and their repairs after a restore). The named groups
// are installed in one call, as kube-apiserver does: their OpenAPI models
// (for server-side apply) are then built once, not once per group with the
// shared definitions built again each time.
func (c completedCoreConfig) install(t *coreTier) error {
	build := c.build
	build.AddPostStartHook = func(name string, hook genericapiserver.PostStartHookFunc) error {
		return addPostStartHook(t.GenericAPIServer, name, hook)
	}
	build.AfterRestore = func(f func(context.Context) error) { t.restorers = append(t.restorers, f) }
	var groups []*genericapiserver.APIGroupInfo
	for _, p := range c.providers {
		storage, err := p.Storage(build)
		if err != nil {
			return fmt.Errorf("storage of group %q: %w", p.GroupName(), err)
		}
		info := genericapiserver.NewDefaultAPIGroupInfo(p.GroupName(), build.Scheme, metav1.ParameterCodec, c.codecs)
		info.NegotiatedSerializer = internalNames{c.codecs}
		info.VersionedResourcesStorageMap = storage
		if p.GroupName() != "" {
			groups = append(groups, &info)
			continue
		}
		if err := t.InstallLegacyAPIGroup(genericapiserver.DefaultLegacyAPIPrefix, &info); err != nil {
			return fmt.Errorf("install the core group: %w", err)
		}
		info.StaticOpenAPISpec = nil // see below
	}
	if err := t.InstallAPIGroups(groups...); err != nil {
		return fmt.Errorf("install groups: %w", err)
	}
	// The tier keeps each group's info for the server's life (its destroy
	// and readiness functions), and with it the OpenAPI schemas built for
	// server-side apply's type converter (~2 MiB a server), which nothing
	// reads once it is built.
	for _, info := range groups {
		info.StaticOpenAPISpec = nil
	}
	return nil
}
