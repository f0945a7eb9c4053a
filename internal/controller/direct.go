package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
)

// directInformer is a shared index informer that calls its handlers from
// its own processing goroutine, right after each change to its store,
// instead of handing each registration's events to two goroutines of its
// own through a buffer. client-go's buffer is 1,024 events (16 KiB) per
// registration, kept while the informer lives; Monitors run one informer
// per resource a server serves (~70), and those 1.1 MiB were the largest
// single item of a server's heap. The handlers that share them (the
// garbage collector's, the quota and namespace controllers' and the
// Observer's) only note and queue work, so running them on the
// processing goroutine delays no event.
//
// What a handler sees is client-go's: events in the order of the writes,
// the store updated before it is called, an update that leaves the
// resourceVersion alone not handed out (a resync), the initial list as
// adds marked initial, a handler added later first handed the store's
// objects (marked initial, as client-go does) with no event in between,
// and a registration synced once the informer has. Handlers must not
// block, and must not add a handler to the same informer (they run with
// the processing lock held); removing one is fine. Resync periods are not
// kept: Monitors ask for none.
type directInformer struct {
	lw         cache.ListerWatcher
	objectType runtime.Object
	indexer    cache.Indexer

	// mu guards the store's changes with their dispatch, and the replay of
	// the store to a handler added after the informer started.
	mu sync.Mutex
	// handlers are replaced, never changed in place, under hmu.
	hmu      sync.Mutex
	handlers atomic.Pointer[[]*directRegistration]

	fifo *cache.RealFIFO

	run        sync.Mutex // guards the fields below
	controller cache.Controller
	onError    cache.WatchErrorHandlerWithContext
	stopped    bool
}

func newDirectInformer(lw cache.ListerWatcher, objectType runtime.Object, indexers cache.Indexers) *directInformer {
	d := &directInformer{lw: lw, objectType: objectType,
		indexer: cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, indexers)}
	// client-go's informers' FIFO (InOrderInformers): events in the order
	// of the writes, which the Observer's and the garbage collector's
	// "seen up to revision N" rely on (a DeltaFIFO keeps a key where it
	// first joined the queue). Processed with its lock held.
	d.fifo = cache.NewRealFIFOWithOptions(cache.RealFIFOOptions{KeyFunction: cache.MetaNamespaceKeyFunc,
		KnownObjects: d.indexer})
	d.handlers.Store(&[]*directRegistration{})
	return d
}

var _ cache.SharedIndexInformer = &directInformer{}

// directRegistration is a handler's registration on a directInformer.
type directRegistration struct {
	cache.ResourceEventHandler
	d       *directInformer
	removed atomic.Bool
}

func (r *directRegistration) HasSynced() bool                     { return r.d.HasSynced() }
func (r *directRegistration) HasSyncedChecker() cache.DoneChecker { return r.d.HasSyncedChecker() }

// AddEventHandler implements cache.SharedInformer.
func (d *directInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	reg := &directRegistration{ResourceEventHandler: h, d: d}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.hmu.Lock()
	d.handlers.Store(new(append(slices.Clip(*d.handlers.Load()), reg)))
	d.hmu.Unlock()
	for _, obj := range d.indexer.List() {
		handle(h, func(h cache.ResourceEventHandler) { h.OnAdd(obj, true) })
	}
	return reg, nil
}

// AddEventHandlerWithResyncPeriod implements cache.SharedInformer, without
// resyncs.
func (d *directInformer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, _ time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return d.AddEventHandler(h)
}

// AddEventHandlerWithOptions implements cache.SharedInformer, without
// resyncs.
func (d *directInformer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, _ cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return d.AddEventHandler(h)
}

// RemoveEventHandler implements cache.SharedInformer. The handler is not
// called once it returns.
func (d *directInformer) RemoveEventHandler(handle cache.ResourceEventHandlerRegistration) error {
	reg, ok := handle.(*directRegistration)
	if !ok || reg.d != d {
		return fmt.Errorf("registration %T is not of this informer", handle)
	}
	d.hmu.Lock()
	defer d.hmu.Unlock()
	reg.removed.Store(true)
	d.handlers.Store(new(slices.DeleteFunc(slices.Clone(*d.handlers.Load()), func(o *directRegistration) bool { return o == reg })))
	return nil
}

// process applies a delta to the store and hands the change to the
// handlers, as client-go's informers do (the FIFO's deltas are added,
// updated, deleted and replaced ones): an update that leaves the
// resourceVersion as it was (a relist's unchanged object) is a resync,
// which client-go hands only to handlers that asked for resyncs, and
// these ask for none.
func (d *directInformer) process(obj any, initial bool) error {
	deltas, ok := obj.(cache.Deltas)
	if !ok {
		return fmt.Errorf("directInformer: %T is not Deltas", obj)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, delta := range deltas {
		obj := delta.Object
		switch delta.Type {
		case cache.Sync, cache.Replaced, cache.Added, cache.Updated:
			if old, exists, err := d.indexer.Get(obj); err == nil && exists {
				if err := d.indexer.Update(obj); err != nil {
					return err
				}
				if !sameVersion(old, obj) {
					d.each(func(h *directRegistration) { h.OnUpdate(old, obj) })
				}
				continue
			}
			if err := d.indexer.Add(obj); err != nil {
				return err
			}
			d.each(func(h *directRegistration) { h.OnAdd(obj, initial) })
		case cache.Deleted:
			if err := d.indexer.Delete(obj); err != nil {
				return err
			}
			d.each(func(h *directRegistration) { h.OnDelete(obj) })
		}
	}
	return nil
}

func sameVersion(old, obj any) bool {
	o, err1 := meta.Accessor(old)
	n, err2 := meta.Accessor(obj)
	return err1 == nil && err2 == nil && o.GetResourceVersion() == n.GetResourceVersion()
}

func (d *directInformer) each(call func(*directRegistration)) {
	for _, h := range *d.handlers.Load() {
		if !h.removed.Load() {
			handle(h, call)
		}
	}
}

// RunWithContext implements cache.SharedInformer: it lists and watches
// until ctx ends. An informer runs once.
func (d *directInformer) RunWithContext(ctx context.Context) {
	d.run.Lock()
	if d.controller != nil || d.stopped {
		d.run.Unlock()
		return
	}
	d.controller = cache.New(&cache.Config{Queue: d.fifo, ListerWatcher: d.lw, ObjectType: d.objectType,
		Process: d.process, WatchErrorHandlerWithContext: d.onError})
	controller := d.controller
	d.run.Unlock()
	defer func() {
		d.run.Lock()
		d.stopped = true
		d.run.Unlock()
	}()
	controller.RunWithContext(ctx)
}

// Run implements cache.SharedInformer.
func (d *directInformer) Run(stopCh <-chan struct{}) {
	d.RunWithContext(wait.ContextForChannel(stopCh))
}

func (d *directInformer) started() cache.Controller {
	d.run.Lock()
	defer d.run.Unlock()
	return d.controller
}

// HasSynced implements cache.SharedInformer: the initial list is in the
// store and every handler has been handed it (a RealFIFO tells it has
// synced once it has processed the last item of its first list). It
// takes no lock: the handlers run with the FIFO's lock held, and a
// subscriber may ask while holding a lock its handler takes (the
// Observer does).
func (d *directInformer) HasSynced() bool {
	select {
	case <-d.fifo.Done():
		return true
	default:
		return false
	}
}

// HasSyncedChecker implements cache.SharedInformer.
func (d *directInformer) HasSyncedChecker() cache.DoneChecker { return d.fifo }

// LastSyncResourceVersion implements cache.SharedInformer.
func (d *directInformer) LastSyncResourceVersion() string {
	if c := d.started(); c != nil {
		return c.LastSyncResourceVersion()
	}
	return ""
}

// SetWatchErrorHandlerWithContext implements cache.SharedInformer.
func (d *directInformer) SetWatchErrorHandlerWithContext(handler cache.WatchErrorHandlerWithContext) error {
	d.run.Lock()
	defer d.run.Unlock()
	if d.controller != nil {
		return errors.New("informer has already started")
	}
	d.onError = handler
	return nil
}

// SetWatchErrorHandler implements cache.SharedInformer.
func (d *directInformer) SetWatchErrorHandler(handler cache.WatchErrorHandler) error {
	return d.SetWatchErrorHandlerWithContext(func(_ context.Context, r *cache.Reflector, err error) { handler(r, err) })
}

// SetTransform implements cache.SharedInformer: Monitors transform nothing.
func (d *directInformer) SetTransform(cache.TransformFunc) error {
	return errors.New("directInformer: transforms are not supported")
}

// IsStopped implements cache.SharedInformer.
func (d *directInformer) IsStopped() bool {
	d.run.Lock()
	defer d.run.Unlock()
	return d.stopped
}

// GetStore implements cache.SharedInformer.
func (d *directInformer) GetStore() cache.Store { return d.indexer }

// GetIndexer implements cache.SharedIndexInformer.
func (d *directInformer) GetIndexer() cache.Indexer { return d.indexer }

// GetController implements cache.SharedInformer.
func (d *directInformer) GetController() cache.Controller {
	return d.started()
}

// AddIndexers implements cache.SharedIndexInformer, before the informer
// runs.
func (d *directInformer) AddIndexers(indexers cache.Indexers) error {
	if d.started() != nil {
		return errors.New("informer has already started")
	}
	return d.indexer.AddIndexers(indexers)
}
