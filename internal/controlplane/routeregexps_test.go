package controlplane

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"testing"

	restful "github.com/emicklei/go-restful/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two containers' routes of the same paths end up with one regular
// expression each, and still route by it (go-restful's JSR-311 router and
// OPTIONS filter read it). It fails if go-restful moves the expressions
// out of the fields shareRouteRegexps reaches, rather than let the sharing
// stop without a word.
func TestRouteRegexpsShared(t *testing.T) {
	t.Parallel()
	containers := make([]*restful.Container, 2)
	for i := range containers {
		c := restful.NewContainer()
		c.Router(restful.RouterJSR311{})
		c.Filter(c.OPTIONSFilter)
		for _, ws := range k8sShapedServices() {
			c.Add(ws)
		}
		shareRouteRegexps(c)
		containers[i] = c
	}
	first, second := routeMatchers(containers[0]), routeMatchers(containers[1])
	require.Len(t, first, 2+6*12+2, "a matcher for every web service and route")
	for i := range first {
		assert.Same(t, first[i], second[i], "route %d", i)
	}

	for _, c := range containers {
		rec := httptest.NewRecorder()
		c.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/apis/apps/v1/namespaces/a/deployments/d/scale", nil))
		assert.Equal(t, http.StatusOK, rec.Code)
		rec = httptest.NewRecorder()
		c.ServeHTTP(rec, httptest.NewRequest(http.MethodOptions, "/api/v1/namespaces/a/configmaps", nil))
		assert.Equal(t, "GET,PUT,DELETE,PATCH,POST", rec.Header().Get("Allow"))
	}
}

// routeMatchers is the regular expression of every web service and route
// of c, read as shareRouteRegexps reaches them.
func routeMatchers(c *restful.Container) []*regexp.Regexp {
	var res []*regexp.Regexp
	add := func(f reflect.Value) {
		if f.IsValid() && f.Kind() == reflect.Pointer && !f.IsNil() {
			m := reflect.NewAt(f.Type().Elem(), f.UnsafePointer()).Elem().FieldByName("Matcher")
			if m.IsValid() {
				res = append(res, m.Interface().(*regexp.Regexp))
			}
		}
	}
	for _, ws := range c.RegisteredWebServices() {
		add(reflect.ValueOf(ws).Elem().FieldByName("pathExpr"))
		for _, r := range ws.Routes() {
			add(reflect.ValueOf(&r).Elem().FieldByName("pathExpr"))
		}
	}
	return res
}
