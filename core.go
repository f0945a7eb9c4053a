package apiserver

// The core tier: the built-in API groups and the user's, each installed from
// a providers.Provider, as kube-apiserver's control plane installs its
// RESTStorageProviders.

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	genericapiserver "k8s.io/apiserver/pkg/server"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	openapicommon "k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/handler3"

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

func builtinProviders() []providers.Provider {
	return []providers.Provider{core.Provider(), apps.Provider(), batch.Provider(), coordination.Provider(), events.Provider(),
		networking.Provider(), policy.Provider(), rbac.Provider(), scheduling.Provider(),
		admissionregistration.Provider(), authentication.Provider(), authorization.Provider(), autoscaling.Provider(), certificates.Provider(), discovery.Provider(),
		flowcontrol.Provider(), node.Provider(), resource.Provider(), storage.Provider(), storagemigration.Provider()}
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

// withProviderDefinitions adds the OpenAPI definitions of the providers that
// have some to the built-in ones.
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

// openAPIKey names what determines the tiers' OpenAPI documents: the
// providers served. The built-in ones are the same in every server of a
// binary; the user's are named by type and value (%#v: providers are small
// values). Servers of equal keys share documents.
func openAPIKey(user []providers.Provider) string {
	key := "builtin;"
	for _, p := range user {
		key += fmt.Sprintf("%T=%#v;", p, p)
	}
	return key
}

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
	// afterRestore registers what providers do after a restore.
	afterRestore func(func(context.Context) error)
}

// newCoreConfig stores each provider's resources as kube-apiserver does:
// protobuf under /registry/<resource>, events.k8s.io events with core events.
func (tc *tierConfig) newCoreConfig() *coreConfig {
	codecs := serializer.NewCodecFactory(tc.scheme)
	resources := serverstorage.NewResourceConfig()
	for _, p := range tc.providers {
		resources.EnableVersions(tc.scheme.PrioritizedVersionsForGroup(p.GroupName())...)
	}
	factory := serverstorage.NewDefaultStorageFactory(
		storagebackend.Config{Prefix: etcdPrefix},
		runtime.ContentTypeProtobuf, codecs,
		serverstorage.NewDefaultResourceEncodingConfig(tc.scheme), resources, nil)
	factory.AddCohabitatingResources(corev1.Resource("events"), eventsv1.Resource("events"))
	getter := restOptionsGetter{factory: factory, backend: tc.storage, untyped: true}
	build := providers.Config{RESTOptionsGetter: getter, Scheme: tc.scheme,
		Authenticator: tc.tokens, Authorizer: tc.authz, RuleResolver: tc.rules, ServingAddress: tc.address,
		Informers: tc.informers.kube, PriorityAndFairness: tc.flowControl != nil, ServiceAccountTokens: tc.issuer,
		DefaultServiceAccounts: tc.defaultServiceAccounts}
	c := &coreConfig{
		generic: tc.genericConfig(codecs, getter, resources), providers: tc.providers,
		build: build, codecs: codecs,
		openAPI: openapi.V3Services.Load(tc.openAPIKey), openAPIKey: tc.openAPIKey,
		afterRestore: tc.afterRestore,
	}
	c.generic.SkipOpenAPIInstallation = c.openAPI != nil
	return c
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
}

// New builds the tier in front of delegate and installs every provider's
// groups.
func (c completedCoreConfig) New(delegate genericapiserver.DelegationTarget) (*coreTier, error) {
	server, err := c.generic.New("kube-apiserver", delegate)
	if err != nil {
		return nil, err
	}
	if err := c.install(server); err != nil {
		return nil, err
	}
	t := &coreTier{GenericAPIServer: server, delegate: server, publishOpenAPI: func() {}}
	if c.openAPI != nil {
		t.delegate = newSharedOpenAPIDelegate(server, c.openAPI)
	} else {
		t.publishOpenAPI = func() { openapi.V3Services.Publish(c.openAPIKey, server.OpenAPIV3VersionedService) }
	}
	return t, nil
}

// install installs the providers' groups (which register their post-start
// hooks on the tier). The named groups are installed in one call, as kube-apiserver does:
// their OpenAPI models (for server-side apply) are then built once, not once
// per group with the shared definitions built again each time.
func (c completedCoreConfig) install(server *genericapiserver.GenericAPIServer) error {
	c.build.AddPostStartHook = server.AddPostStartHook
	c.build.AfterRestore = c.afterRestore
	var groups []*genericapiserver.APIGroupInfo
	for _, p := range c.providers {
		storage, err := p.Storage(c.build)
		if err != nil {
			return fmt.Errorf("storage of group %q: %w", p.GroupName(), err)
		}
		info := genericapiserver.NewDefaultAPIGroupInfo(p.GroupName(), c.build.Scheme, metav1.ParameterCodec, c.codecs)
		info.VersionedResourcesStorageMap = storage
		if p.GroupName() != "" {
			groups = append(groups, &info)
			continue
		}
		if err := server.InstallLegacyAPIGroup(genericapiserver.DefaultLegacyAPIPrefix, &info); err != nil {
			return fmt.Errorf("install the core group: %w", err)
		}
	}
	if err := server.InstallAPIGroups(groups...); err != nil {
		return fmt.Errorf("install groups: %w", err)
	}
	return nil
}
