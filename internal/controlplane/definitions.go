package controlplane

import (
	"errors"
	"sync"

	openapicommon "k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/common/restfuladapter"
)

// heldDefinitions gives the OpenAPI v3 definitions to the tiers' builders
// (server-side apply's type converters, the OpenAPI documents): one map,
// built once, held while the server starts. kube-apiserver keeps it in its
// OpenAPI configuration for its life (DefaultOpenAPIV3Config), ~3.5 MiB a
// server that nothing reads once the tiers are built; after release, a
// builder that still comes (a tier's document first asked for later)
// builds its own. Every builder of the v3 configuration asks with the same
// references (#/components/schemas/ and the server's namer), so one map
// serves them all, as the configuration's one map does upstream; the v2
// configuration has references of its own and does not use it.
type heldDefinitions struct {
	get openapicommon.GetOpenAPIDefinitions

	mu       sync.Mutex
	defs     map[string]openapicommon.OpenAPIDefinition
	released bool
}

// Get implements openapicommon.GetOpenAPIDefinitions.
func (h *heldDefinitions) Get(ref openapicommon.ReferenceCallback) map[string]openapicommon.OpenAPIDefinition {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.defs != nil {
		return h.defs
	}
	defs := h.get(ref)
	if !h.released {
		h.defs = defs
	}
	return defs
}

// release lets go of the map: the server has started.
func (h *heldDefinitions) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.defs, h.released = nil, true
}

// operationIDAndTags is what kube-openapi's first builder of a
// configuration sets as its GetOperationIDAndTagsFromRoute when it has none
// (c's GetOperationIDAndTags on go-restful routes), set before any: the
// builder's function holds the builder, and with it the definitions and
// everything the builder built (its spec), for the configuration's life.
func operationIDAndTags(c *openapicommon.OpenAPIV3Config) func(openapicommon.Route) (string, []string, error) {
	return func(r openapicommon.Route) (string, []string, error) {
		route, ok := r.(*restfuladapter.RouteAdapter)
		if !ok {
			return "", nil, errors.New("config.GetOperationIDAndTags specified but route is not a restful v1 Route")
		}
		return c.GetOperationIDAndTags(route.Route)
	}
}
