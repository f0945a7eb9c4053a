package controlplane

import (
	"net/http"

	restful "github.com/emicklei/go-restful/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	apiextensionslisters "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	"k8s.io/apimachinery/pkg/labels"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	aggregatorscheme "k8s.io/kube-aggregator/pkg/apiserver/scheme"

	"github.com/kubeembed/apiserver/internal/openapi"
	"github.com/kubeembed/apiserver/internal/version"
)

// openAPIV2 serves /openapi/v2 from the routes of tiers (front to back)
// and the established CRDs, built when first asked for
// (internal/openapi.V2).
func openAPIV2(sh *shared, tiers []*genericapiserver.GenericAPIServer, crds apiextensionslisters.CustomResourceDefinitionLister) http.Handler {
	config := genericapiserver.DefaultOpenAPIConfig(withProviderDefinitions(sh.Providers),
		openapinamer.NewDefinitionNamer(sh.scheme, apiextensionsapiserver.Scheme, aggregatorscheme.Scheme))
	config.Info.Title, config.Info.Version = "Kubernetes", "v"+version.Kubernetes()
	routes := func() []*restful.WebService {
		// Each tier serves /version and the like: the first tier's wins.
		var ws []*restful.WebService
		seen := map[string]bool{}
		for _, t := range tiers {
			for _, w := range t.Handler.GoRestfulContainer.RegisteredWebServices() {
				if !seen[w.RootPath()] {
					seen[w.RootPath()] = true
					ws = append(ws, w)
				}
			}
		}
		return ws
	}
	return openapi.NewV2(config, routes, func() ([]*apiextensionsv1.CustomResourceDefinition, error) {
		return crds.List(labels.Everything())
	}, sh.OpenAPIKey)
}
