package controlplane

// One compiled regular expression per route path for the whole process.

import (
	"reflect"
	"regexp"
	"sync"

	restful "github.com/emicklei/go-restful/v3"
)

// routeRegexps holds, by source, the regular expressions go-restful
// compiled for the paths of the routes and web services of the process's
// servers (bounded by the distinct paths of the built-in groups: CRDs and
// aggregated groups have no go-restful routes).
var routeRegexps sync.Map // expression -> *regexp.Regexp

// shareRouteRegexps points the routes and web services of c at the
// process's one copy of each path's regular expression. go-restful
// compiles one for every route it builds (RouteBuilder.Build), about
// 2,000 per server, and keeps them for its JSR-311 router and OPTIONS
// filter; the CurlyRouter routeCache wraps reads only their tokens. They
// were ~4 MiB of a server's heap (BENCHMARKS.md), identical in every
// server. A *regexp.Regexp is safe for concurrent use.
//
// The expressions are in unexported fields, reached by reflection; a
// go-restful without them leaves c as it is (and TestRouteRegexpsShared
// fails). c must not be serving yet: the fields are written without its
// lock.
func shareRouteRegexps(c *restful.Container) {
	for _, ws := range c.RegisteredWebServices() {
		sharePathRegexp(reflect.ValueOf(ws).Elem().FieldByName("pathExpr"))
		for _, r := range ws.Routes() {
			// Routes returns copies whose pathExpr is the route's own.
			sharePathRegexp(reflect.ValueOf(&r).Elem().FieldByName("pathExpr"))
		}
	}
}

// sharePathRegexp replaces the Matcher of the *pathExpression in f.
func sharePathRegexp(f reflect.Value) {
	if f.Kind() != reflect.Pointer || f.IsNil() || f.Type().Elem().Kind() != reflect.Struct {
		return
	}
	m := reflect.NewAt(f.Type().Elem(), f.UnsafePointer()).Elem().FieldByName("Matcher")
	if !m.IsValid() || m.Type() != reflect.TypeFor[*regexp.Regexp]() || m.IsNil() {
		return
	}
	re := m.Interface().(*regexp.Regexp)
	shared, _ := routeRegexps.LoadOrStore(re.String(), re)
	m.Set(reflect.ValueOf(shared))
}
