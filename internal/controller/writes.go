// Package controller is what the server's controllers (controllers/...)
// share so that Server.WaitIdle can tell when they have nothing left to do:
// a work queue that knows whether it is empty and idle (Queue), what each
// controller's event handlers have seen (Observer), the revision of the
// last write to each resource (Writes), fed by the storage seam, and the
// metadata informers of every resource that can be collected (Monitors).
//
// A controller is idle when, for every resource it watches, its handlers
// have seen the last write made to that resource before the check (or its
// informer started listing after that write), and every queue is empty,
// has no item in a worker and no item waiting to be retried after an error.
// Items a controller put off on purpose (AddAfter: waiting for someone
// else's finalizer, a grace period) do not count.
package controller

import (
	"maps"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Writes records the resourceVersion of the last write to each resource.
// The zero value is ready to use.
type Writes struct {
	mu     sync.Mutex
	last   map[schema.GroupResource]uint64
	latest uint64
}

// Wrote records obj, just written to resource gr (created, updated or
// deleted: a deleted object carries the revision of its deletion).
func (w *Writes) Wrote(gr schema.GroupResource, obj runtime.Object) {
	rv := ResourceVersion(obj)
	if rv == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == nil {
		w.last = map[schema.GroupResource]uint64{}
	}
	w.last[gr] = max(w.last[gr], rv)
	w.latest = max(w.latest, rv)
}

// Latest is the revision of the last write to any resource.
func (w *Writes) Latest() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.latest
}

// Snapshot is the last write to each resource so far.
func (w *Writes) Snapshot() map[schema.GroupResource]uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.last)
}

// ResourceVersion is obj's resourceVersion as a number, 0 if it has none.
func ResourceVersion(obj any) uint64 {
	m, err := meta.Accessor(obj)
	if err != nil {
		return 0
	}
	rv, _ := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
	return rv
}
