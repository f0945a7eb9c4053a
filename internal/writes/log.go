// Package writes tracks the revision of the last write to each resource of
// a server: Track wraps the server's storage backend so that every create,
// update and delete that succeeds is noted in a Log. Server.WaitIdle and
// RBAC's read-your-writes ask the Log what has been written, and then wait
// until the informers concerned have seen it (internal/controller).
package writes

import (
	"maps"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Log records the resourceVersion of the last write to each resource.
// The zero value is ready to use.
type Log struct {
	mu     sync.Mutex
	last   map[schema.GroupResource]uint64
	latest uint64
	// prefixes are the resources by the prefix of their keys (Track).
	prefixes map[string][]schema.GroupResource
}

// Wrote records obj, just written to resource gr (created, updated or
// deleted: a deleted object carries the revision of its deletion).
func (l *Log) Wrote(gr schema.GroupResource, obj runtime.Object) {
	rv := Revision(obj)
	if rv == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = map[schema.GroupResource]uint64{}
	}
	l.last[gr] = max(l.last[gr], rv)
	l.latest = max(l.latest, rv)
}

// Latest is the revision of the last write to any resource.
func (l *Log) Latest() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.latest
}

// Written is the revision of the last write to resource gr, 0 if none.
func (l *Log) Written(gr schema.GroupResource) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last[gr]
}

// Snapshot is the last write to each resource so far.
func (l *Log) Snapshot() map[schema.GroupResource]uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.last)
}

// Revision is obj's resourceVersion as a number, 0 if it has none.
func Revision(obj any) uint64 {
	m, err := meta.Accessor(obj)
	if err != nil {
		return 0
	}
	rv, _ := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
	return rv
}
