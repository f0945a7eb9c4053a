package openapi

import (
	"sync"

	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Shared holds, for the process, one value per key: OpenAPI artefacts
// shared by the servers whose documents are equal. The key must name all
// that determines the document; the servers' roots use the providers they
// serve (the built-in ones are the same in every server of a binary). A
// value is read-only once published and safe for concurrent use.
//
// Building the core tier's OpenAPI v3 documents (every group version's spec,
// at PrepareRun) and marshalling them (kube-aggregator fetches and hashes
// them while preparing to run) was a large part of start-up; the first
// server of a key builds them, later ones serve the published service.
type Shared[T any] struct {
	mu sync.Mutex
	m  map[string]*T
}

// Load returns the value published for key, or nil.
func (s *Shared[T]) Load(key string) *T {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key]
}

// Publish makes v the value of key unless one already is, and returns the
// value that is.
func (s *Shared[T]) Publish(key string, v *T) *T {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.m[key]; cur != nil || v == nil {
		return cur
	}
	if s.m == nil {
		s.m = map[string]*T{}
	}
	s.m[key] = v
	return v
}

// V3Services are the core tiers' OpenAPI v3 services, by providers.
var V3Services = &Shared[handler3.OpenAPIService]{}

// V2Routes are the three tiers' routes' OpenAPI v2 specs (before CRDs are
// merged in), by providers.
var V2Routes = &Shared[spec.Swagger]{}
