package openapi

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	restful "github.com/emicklei/go-restful/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdopenapi "k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/common/restfuladapter"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// V2 serves /openapi/v2, the Swagger 2.0 document older tools read (helm's
// manifest validation, kubectl's client-side validation, clients that call
// discovery's OpenAPISchema). It is built on the first request rather than
// at start-up, which it would slow for everyone: the built-in routes' spec
// once (per process when Shared), merged with the served CRDs' specs,
// rebuilt when the CRDs change. JSON and protobuf, with ETags, as
// kube-apiserver serves it.
type V2 struct {
	config *common.Config
	routes func() []*restful.WebService
	crds   func() ([]*apiextensionsv1.CustomResourceDefinition, error)
	// routesKey keys the routes' spec in V2Routes.
	routesKey string

	mu  sync.Mutex
	key string // the CRDs the served spec was built with
	svc *handler.OpenAPIService
	mux *http.ServeMux
}

// NewV2 returns the handler. routes are every tier's web services, whose
// spec is shared in V2Routes under routesKey; crds lists the CRDs to
// publish.
func NewV2(config *common.Config, routes func() []*restful.WebService,
	crds func() ([]*apiextensionsv1.CustomResourceDefinition, error), routesKey string) *V2 {
	return &V2{config: config, routes: routes, crds: crds, routesKey: routesKey}
}

// routesSpec returns the routes' spec, built by the first server of its key
// to need it.
func (v *V2) routesSpec() (*spec.Swagger, error) {
	if s := V2Routes.Load(v.routesKey); s != nil {
		return s, nil
	}
	s, err := builder.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices(v.routes()), v.config)
	if err != nil {
		return nil, err
	}
	return V2Routes.Publish(v.routesKey, s), nil
}

// ServeHTTP implements http.Handler.
func (v *V2) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := v.refresh(); err != nil {
		http.Error(w, fmt.Sprintf("building the OpenAPI v2 document: %v", err), http.StatusInternalServerError)
		return
	}
	v.mu.Lock()
	mux := v.mux
	v.mu.Unlock()
	mux.ServeHTTP(w, r)
}

// refresh rebuilds the served spec when the CRDs changed.
func (v *V2) refresh() error {
	crds, err := v.crds()
	if err != nil {
		return err
	}
	var served []*apiextensionsv1.CustomResourceDefinition
	var keys []string
	for _, crd := range crds {
		if established(crd) {
			served = append(served, crd)
			keys = append(keys, crd.Name+"@"+crd.ResourceVersion)
		}
	}
	sort.Strings(keys)
	key := strings.Join(keys, ",")

	v.mu.Lock()
	defer v.mu.Unlock()
	if v.svc != nil && key == v.key {
		return nil
	}
	base, err := v.routesSpec()
	if err != nil {
		return err
	}
	specs := make([]*spec.Swagger, 0, len(served))
	for _, crd := range served {
		for _, ver := range crd.Spec.Versions {
			if !ver.Served {
				continue
			}
			s, err := crdopenapi.BuildOpenAPIV2(crd, ver.Name, crdopenapi.Options{V2: true, IncludeSelectableFields: true})
			if err != nil {
				continue // as kube-apiserver, a CRD whose spec fails is left out
			}
			specs = append(specs, s)
		}
	}
	merged, err := crdopenapi.MergeSpecs(base, specs...)
	if err != nil {
		return err
	}
	if v.svc == nil {
		v.svc = handler.NewOpenAPIService(merged)
		v.mux = http.NewServeMux()
		v.svc.RegisterOpenAPIVersionedService("/openapi/v2", v.mux)
	} else if err := v.svc.UpdateSpec(merged); err != nil {
		return err
	}
	v.key = key
	return nil
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}
