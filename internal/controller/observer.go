package controller

import (
	"fmt"
	"hash/fnv"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeembed/apiserver/internal/writes"
)

// Observer registers a controller's event handlers and notes, per resource,
// the latest revision they have handled.
type Observer struct {
	writes interface{ Latest() uint64 }

	mu      sync.Mutex
	watched map[schema.GroupResource]*watched
}

type watched struct {
	informer     cache.SharedIndexInformer
	registration cache.ResourceEventHandlerRegistration
	// since is the last write before the handler was added, which the
	// informer's list covers when the handler is added before the
	// informer starts (as the server does), so once the handler has
	// synced it has seen every write up to since. An informer that tells
	// its first list's revision (Monitors') covers up to that.
	since uint64
	// observed is the latest revision the handler has handled; stored
	// the latest it has been handed, which the informer's store (its
	// listers) holds by then: the store is updated before the handlers
	// are called.
	observed, stored uint64
	// view is the digest of the objects the handler holds, as the
	// events it handled leave them (see listed).
	view uint64
}

// NewObserver returns an observer comparing what it sees with writes; nil
// (a controller run against another API server, whose writes it cannot
// count) compares with none.
func NewObserver(writes interface{ Latest() uint64 }) *Observer {
	if writes == nil {
		writes = noWrites{}
	}
	return &Observer{writes: writes, watched: map[schema.GroupResource]*watched{}}
}

// Watch adds h to informer, which lists and watches resource gr, noting
// each object's revision after h has handled it. A resource is watched
// once per observer.
func (o *Observer) Watch(gr schema.GroupResource, informer cache.SharedIndexInformer, h cache.ResourceEventHandler) error {
	w := &watched{informer: informer, since: o.writes.Latest()}
	o.mu.Lock()
	if _, ok := o.watched[gr]; ok {
		o.mu.Unlock()
		return fmt.Errorf("%v is already watched", gr)
	}
	o.watched[gr] = w
	o.mu.Unlock()
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			o.handing(w, writes.Revision(obj))
			h.OnAdd(obj, initial)
			o.saw(w, obj, digestOf(obj))
		},
		UpdateFunc: func(old, obj any) {
			o.handing(w, writes.Revision(obj))
			h.OnUpdate(old, obj)
			o.saw(w, obj, digestOf(old)^digestOf(obj))
		},
		DeleteFunc: func(obj any) {
			rv := writes.Revision(obj)
			d, relist := obj.(cache.DeletedFinalStateUnknown)
			if relist {
				// A relist found it gone, at the relist's revision.
				if l, ok := informer.(listed); ok {
					_, rv = l.Listed()
				}
			}
			if !relist {
				// A relist's revision is noted when its list returns,
				// before the store has it: relisted decides instead.
				o.handing(w, rv)
			}
			h.OnDelete(obj)
			if relist {
				obj = d.Obj
				o.sawRevision(w, rv, 0)
			}
			o.saw(w, obj, digestOf(obj))
		},
	})
	if err != nil {
		o.Unwatch(gr)
		return err
	}
	o.mu.Lock()
	w.registration = reg
	o.mu.Unlock()
	return nil
}

// Unwatch removes the handler Watch added for gr, if any.
func (o *Observer) Unwatch(gr schema.GroupResource) {
	o.mu.Lock()
	w := o.watched[gr]
	delete(o.watched, gr)
	o.mu.Unlock()
	if w != nil && w.registration != nil {
		_ = w.informer.RemoveEventHandler(w.registration)
	}
}

// Watching reports whether gr is watched.
func (o *Observer) Watching(gr schema.GroupResource) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.watched[gr]
	return ok
}

// saw notes that the handler has handled obj, changing its view by change.
func (o *Observer) saw(w *watched, obj any, change uint64) {
	o.sawRevision(w, writes.Revision(obj), change)
}

// handing notes that the handler is being handed revision rv.
func (o *Observer) handing(w *watched, rv uint64) {
	o.mu.Lock()
	w.stored = max(w.stored, rv)
	o.mu.Unlock()
}

func (o *Observer) sawRevision(w *watched, rv, change uint64) {
	o.mu.Lock()
	w.observed = max(w.observed, rv)
	w.view ^= change
	o.mu.Unlock()
}

// listed is an informer that tells the resourceVersion of its first and
// last lists, and the digest of its last (Monitors' informers).
type listed interface {
	Listed() (first, last uint64)
	LastList() (rv, view uint64)
}

// relisted reports whether w's informer last listed at rv or later and its
// handler holds what that list held: it has handled the list, which covers
// every write up to it, including objects created and deleted while its
// watch was down, which no event shows.
func relisted(w *watched, rv uint64) bool {
	l, ok := w.informer.(listed)
	if !ok {
		return false
	}
	last, view := l.LastList()
	return last >= rv && view == w.view
}

// digest is an object's identity at one revision (namespace, name,
// resourceVersion); a set of objects' is the XOR of theirs.
func digest(m metav1.Object) uint64 {
	h := fnv.New64a()
	for _, s := range []string{m.GetNamespace(), m.GetName(), m.GetResourceVersion()} {
		_, _ = h.Write([]byte(s))
		_, _ = h.Write([]byte{0})
	}
	return h.Sum64()
}

func digestOf(obj any) uint64 {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return 0
	}
	return digest(m)
}

// Synced reports whether every handler has had its informer's initial list.
func (o *Observer) Synced() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, w := range o.watched {
		if w.registration == nil || !w.registration.HasSynced() {
			return false
		}
	}
	return true
}

// CaughtUpTo returns nil once the handlers have seen every write made up
// to revision rv to the resources they watch (as far as written, the last
// write to each, tells), or an error naming a resource they have not: what
// a controller that builds its own view in its handlers (the garbage
// collector's graph) asks before it trusts that view.
func (o *Observer) CaughtUpTo(written map[schema.GroupResource]uint64, rv uint64) error {
	return o.caughtUp(capped(written, rv), func(w *watched) uint64 { return w.observed })
}

// ListersCaughtUpTo returns nil once the informers' stores hold every write
// made up to revision rv to the resources watched, as CaughtUpTo does for
// the handlers: what a controller that reads listers asks. It does not wait
// for the handlers to return: a sync that a handler's event started may
// run before that handler returns, and asking it for its own trigger would
// fail and back off, again after each of its own writes.
func (o *Observer) ListersCaughtUpTo(written map[schema.GroupResource]uint64, rv uint64) error {
	return o.caughtUp(capped(written, rv), func(w *watched) uint64 { return w.stored })
}

func capped(written map[schema.GroupResource]uint64, rv uint64) map[schema.GroupResource]uint64 {
	out := make(map[schema.GroupResource]uint64, len(written))
	for gr, last := range written {
		out[gr] = min(last, rv)
	}
	return out
}

// CaughtUp returns nil once the handlers have seen every write in written
// to the resources they watch, or an error naming a resource they have not.
func (o *Observer) CaughtUp(written map[schema.GroupResource]uint64) error {
	return o.caughtUp(written, func(w *watched) uint64 { return w.observed })
}

func (o *Observer) caughtUp(written map[schema.GroupResource]uint64, seen func(*watched) uint64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for gr, w := range o.watched {
		if w.registration == nil || !w.registration.HasSynced() {
			return fmt.Errorf("%v: not synced", gr)
		}
		since := w.since
		if l, ok := w.informer.(listed); ok {
			first, _ := l.Listed()
			since = max(since, first) // synced: the initial list is handled
		}
		if rv := written[gr]; rv > seen(w) && rv > since && !relisted(w, rv) {
			return fmt.Errorf("%v: seen resourceVersion %d of %d (informer at %s)", gr, seen(w), rv, w.informer.LastSyncResourceVersion())
		}
	}
	return nil
}

// Parts are a controller's observer and queues, and what else keeps it
// busy; their Idle and Finished are the controller's.
type Parts struct {
	// Name names the controller in Idle's errors.
	Name     string
	Observer *Observer
	Queues   []*Queue
	// Busy, if set, reports work outside the queues (a resync).
	Busy func() error
	// Events, if set, writes the controller's events: it is idle once
	// they are written.
	Events *Events
}

// Idle returns nil once the observer has caught up with written and every
// queue is idle.
func (p *Parts) Idle(written map[schema.GroupResource]uint64) error {
	if err := p.idle(written); err != nil {
		return fmt.Errorf("%s: %w", p.Name, err)
	}
	return nil
}

func (p *Parts) idle(written map[schema.GroupResource]uint64) error {
	if p.Busy != nil {
		if err := p.Busy(); err != nil {
			return err
		}
	}
	if err := p.Observer.CaughtUp(written); err != nil {
		return err
	}
	for _, q := range p.Queues {
		if err := q.Idle(); err != nil {
			return err
		}
	}
	if p.Events != nil {
		return p.Events.Idle()
	}
	return nil
}

// ShutDown shuts the queues down (again: a queue's Run does too), for a
// controller whose Run returns before it runs them, so that no queue's
// goroutines outlive it.
func (p *Parts) ShutDown() {
	for _, q := range p.Queues {
		q.ShutDown()
	}
}

// Reset forgets what the controller keeps of the objects it saw beyond
// its informers' caches (Server.Reset): its events' correlation.
func (p *Parts) Reset() {
	if p.Events != nil {
		p.Events.Reset()
	}
}

// Finished counts the items the queues' workers finished.
func (p *Parts) Finished() uint64 {
	var n uint64
	for _, q := range p.Queues {
		n += q.Finished()
	}
	return n
}

// noWrites is the revision counter of a server whose writes are not
// counted.
type noWrites struct{}

func (noWrites) Latest() uint64 { return 0 }
