package controlplane

// A cache of go-restful's route selection.

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/emicklei/go-restful/v3"
)

// routeCache is go-restful's CurlyRouter with its successful choices
// remembered. CurlyRouter scores every route of the chosen web service
// against the request's path at each request, and sorts the matches: the
// core tier's v1 has hundreds of routes, and selecting one was ~10% of a
// GET in process (BENCHMARKS.md).
//
// The choice depends on the method, the Content-Type and Accept headers,
// and the path's tokens only through which are equal to a static token of
// some route (a parameter matches any token): the cache's key is the path
// with every other token replaced by a placeholder. That holds for routes
// whose parameters match anything ({name}, {path:*}), without custom verbs
// or If conditions, under static root paths, as every route of
// k8s.io/apiserver's; web services with any other route are not cached.
// Failures (404, 405, 415, 406) are not cached.
type routeCache struct {
	curly restful.CurlyRouter

	mu       sync.Mutex
	services []*restful.WebService // the web services statics is of
	state    atomic.Pointer[routeState]
}

// routeState is the cache of one set of web services.
type routeState struct {
	statics  map[string]bool // nil: not cacheable
	choices  sync.Map        // key -> routeChoice
	size     atomic.Int32
	services []*restful.WebService
}

type routeChoice struct {
	service *restful.WebService
	route   *restful.Route
}

// maxRoutes bounds the choices kept (keys differ by headers, and by tokens
// that equal a static token: few).
const maxRoutes = 4096

// SelectRoute implements restful.RouteSelector.
func (rc *routeCache) SelectRoute(services []*restful.WebService, r *http.Request) (*restful.WebService, *restful.Route, error) {
	st := rc.stateFor(services)
	if st.statics == nil {
		return rc.curly.SelectRoute(services, r)
	}
	key := st.key(r)
	if c, ok := st.choices.Load(key); ok {
		choice := c.(routeChoice)
		return choice.service, choice.route, nil
	}
	service, route, err := rc.curly.SelectRoute(services, r)
	if err == nil && st.size.Load() < maxRoutes {
		if _, loaded := st.choices.LoadOrStore(key, routeChoice{service, route}); !loaded {
			st.size.Add(1)
		}
	}
	return service, route, err
}

// stateFor returns the cache of services, a new one when they changed
// (go-restful passes the container's slice, replaced or grown by Add and
// Remove).
func (rc *routeCache) stateFor(services []*restful.WebService) *routeState {
	if st := rc.state.Load(); st != nil && sameServices(st.services, services) {
		return st
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if st := rc.state.Load(); st != nil && sameServices(st.services, services) {
		return st
	}
	st := &routeState{statics: staticTokens(services), services: services}
	rc.state.Store(st)
	return st
}

func sameServices(a, b []*restful.WebService) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// staticTokens returns the static path tokens of every route of services,
// nil if a route's choice could depend on more than them.
func staticTokens(services []*restful.WebService) map[string]bool {
	statics := map[string]bool{}
	for _, ws := range services {
		if strings.ContainsAny(ws.RootPath(), "{}:") {
			return nil
		}
		for _, route := range ws.Routes() {
			if len(route.If) > 0 {
				return nil
			}
			for _, token := range strings.Split(route.Path, "/") {
				switch {
				case token == "{path:*}" || isParameter(token):
				case strings.ContainsAny(token, "{}:\x00\x01"): // a custom verb, a pattern
					return nil
				default:
					statics[token] = true
				}
			}
		}
	}
	return statics
}

// key is what route selection depends on for r.
func (st *routeState) key(r *http.Request) string {
	var b strings.Builder
	b.WriteString(r.Method)
	b.WriteByte(0)
	b.WriteString(r.Header.Get("Content-Type"))
	b.WriteByte(0)
	b.WriteString(r.Header.Get("Accept"))
	b.WriteByte(0)
	path := r.URL.Path
	for {
		token, rest, more := strings.Cut(path, "/")
		if token == "" || st.statics[token] {
			b.WriteString(token)
		} else {
			b.WriteByte(1)
		}
		if !more {
			return b.String()
		}
		b.WriteByte('/')
		path = rest
	}
}

// isParameter reports whether token is a plain path parameter, {name}.
func isParameter(token string) bool {
	return len(token) > 2 && token[0] == '{' && token[len(token)-1] == '}' &&
		!strings.ContainsAny(token[1:len(token)-1], "{}:")
}
