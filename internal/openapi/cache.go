package openapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	genericapiserver "k8s.io/apiserver/pkg/server"
)

// Builtin caches, for the process, the OpenAPI v3 documents the core
// tier serves when it serves only the built-in providers. They are the same
// for every such server, but building and marshalling them (every group's
// spec, hashed for the discovery document, which kube-aggregator fetches
// synchronously while preparing to run) was most of a server's start-up.
// The first server computes each document; later ones replay the bytes.
var Builtin = &Cache{docs: map[string]*cachedDoc{}}

// Cache replays the OpenAPI v3 documents a tier served first.
type Cache struct {
	mu   sync.Mutex
	docs map[string]*cachedDoc
}

type cachedDoc struct {
	once   sync.Once
	header http.Header
	body   []byte
	code   int
}

// Delegate wraps a tier so that its /openapi/v3 documents come from c.
func (c *Cache) Delegate(d *genericapiserver.GenericAPIServer) genericapiserver.DelegationTarget {
	return &cachedOpenAPITarget{GenericAPIServer: d, handler: c.wrap(d.UnprotectedHandler())}
}

type cachedOpenAPITarget struct {
	*genericapiserver.GenericAPIServer
	handler http.Handler
}

// UnprotectedHandler implements genericapiserver.DelegationTarget.
func (t *cachedOpenAPITarget) UnprotectedHandler() http.Handler { return t.handler }

func (c *Cache) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.HasPrefix(r.URL.Path, "/openapi/v3") {
			h.ServeHTTP(w, r)
			return
		}
		key := r.URL.Path + "?" + r.URL.RawQuery + "|" + r.Header.Get("Accept")
		c.mu.Lock()
		doc, ok := c.docs[key]
		if !ok {
			doc = &cachedDoc{}
			c.docs[key] = doc
		}
		c.mu.Unlock()
		doc.once.Do(func() {
			// Record without conditional headers, so the stored answer is
			// the full document.
			req := r.Clone(r.Context())
			req.Header.Del("If-None-Match")
			req.Header.Del("If-Modified-Since")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			doc.code, doc.header, doc.body = rec.Code, rec.Header().Clone(), rec.Body.Bytes()
		})
		if doc.code != http.StatusOK {
			// Errors are not cached: forget it and serve this one live.
			c.mu.Lock()
			if c.docs[key] == doc {
				delete(c.docs, key)
			}
			c.mu.Unlock()
			h.ServeHTTP(w, r)
			return
		}
		for k, v := range doc.header {
			w.Header()[k] = v
		}
		if etag := doc.header.Get("Etag"); etag != "" && r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.WriteHeader(doc.code)
		_, _ = bytes.NewReader(doc.body).WriteTo(w)
	})
}
