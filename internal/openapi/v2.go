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
	shared *sharedV2

	mu   sync.Mutex
	key  string // the CRDs the served spec was built with
	svc  *handler.OpenAPIService
	mux  *http.ServeMux
	base *spec.Swagger
}

// sharedV2 is the built-in routes' spec, for servers with only the
// built-in providers: the same in each.
type sharedV2 struct {
	once sync.Once
	spec *spec.Swagger
	err  error
}

// BuiltinV2 shares the built-in routes' v2 spec across the process.
var BuiltinV2 = &sharedV2{}

// NewV2 returns the handler. routes are every tier's web services; crds
// lists the CRDs to publish; builtinOnly shares the routes' spec with the
// other built-in-only servers of the process.
func NewV2(config *common.Config, routes func() []*restful.WebService,
	crds func() ([]*apiextensionsv1.CustomResourceDefinition, error), builtinOnly bool) *V2 {
	v := &V2{config: config, routes: routes, crds: crds}
	if builtinOnly {
		v.shared = BuiltinV2
	}
	return v
}

func (v *V2) baseSpec() (*spec.Swagger, error) {
	build := func() (*spec.Swagger, error) {
		return builder.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices(v.routes()), v.config)
	}
	if v.shared == nil {
		if v.base == nil {
			s, err := build()
			if err != nil {
				return nil, err
			}
			v.base = s
		}
		return v.base, nil
	}
	v.shared.once.Do(func() { v.shared.spec, v.shared.err = build() })
	return v.shared.spec, v.shared.err
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
	base, err := v.baseSpec()
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
