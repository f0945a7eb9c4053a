package controlplane

// The API groups the core tier serves: the built-in providers and the
// user's, their scheme and OpenAPI definitions.

import (
	"fmt"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	openapicommon "k8s.io/kube-openapi/pkg/common"

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

// The API groups the core tier serves: the built-in providers and the
// user's, their scheme and OpenAPI definitions.

// BuiltinProviders are the built-in API groups, one provider each.
func BuiltinProviders() []providers.Provider {
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

// OpenAPIKey names what determines the tiers' OpenAPI documents: the
// providers served. The built-in ones are the same in every server of a
// binary; the user's are named by type and value (%#v: providers are small
// values). Servers of equal keys share documents.
func OpenAPIKey(user []providers.Provider) string {
	key := "builtin;"
	for _, p := range user {
		key += fmt.Sprintf("%T=%#v;", p, p)
	}
	return key
}
