package controller

import (
	"context"
	"slices"
	"sync"

	"k8s.io/client-go/tools/cache"
)

// fanOut hands the events of one client-go registration on its informer
// to every handler added before the informer runs, in the order they were
// added. client-go gives each registration a buffer of 1,024 events (16
// KiB, kept while the informer lives) and two goroutines; Monitors'
// informers, one per resource a server serves, each have a handler of the
// garbage collector, the quota and the namespace controllers, ~150
// registrations a server (BENCHMARKS.md). Their handlers only queue work,
// so sharing one goroutine between the three costs them nothing.
//
// A handler added once the informer runs gets a registration of its own,
// as before: client-go then replays the informer's store to it, which the
// shared registration, long past its initial list, cannot.
type fanOut struct {
	cache.SharedIndexInformer
	shared cache.ResourceEventHandlerRegistration

	mu       sync.RWMutex
	started  bool
	handlers []*fanned
}

// fanned is a handler's registration on a fanOut: synced with the shared
// registration, which returns from an initial event only once every
// handler has.
type fanned struct {
	cache.ResourceEventHandlerRegistration
	cache.ResourceEventHandler
}

func newFanOut(informer cache.SharedIndexInformer) *fanOut {
	f := &fanOut{SharedIndexInformer: informer}
	// Before the informer runs, AddEventHandler cannot fail.
	f.shared, _ = informer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			for _, h := range f.current() {
				h.OnAdd(obj, initial)
			}
		},
		UpdateFunc: func(old, obj any) {
			for _, h := range f.current() {
				h.OnUpdate(old, obj)
			}
		},
		DeleteFunc: func(obj any) {
			for _, h := range f.current() {
				h.OnDelete(obj)
			}
		},
	})
	return f
}

func (f *fanOut) current() []*fanned {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.handlers
}

// AddEventHandler implements cache.SharedInformer.
func (f *fanOut) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.started {
		return f.SharedIndexInformer.AddEventHandler(h)
	}
	reg := &fanned{f.shared, h}
	// A new slice: current's callers range over the old one unlocked.
	f.handlers = append(slices.Clip(f.handlers), reg)
	return reg, nil
}

// RemoveEventHandler implements cache.SharedInformer.
func (f *fanOut) RemoveEventHandler(reg cache.ResourceEventHandlerRegistration) error {
	h, ok := reg.(*fanned)
	if !ok {
		return f.SharedIndexInformer.RemoveEventHandler(reg)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handlers = slices.DeleteFunc(slices.Clone(f.handlers), func(o *fanned) bool { return o == h })
	return nil
}

// Run implements cache.SharedInformer.
func (f *fanOut) Run(stop <-chan struct{}) {
	f.start()
	f.SharedIndexInformer.Run(stop)
}

// RunWithContext implements cache.SharedInformer.
func (f *fanOut) RunWithContext(ctx context.Context) {
	f.start()
	f.SharedIndexInformer.RunWithContext(ctx)
}

func (f *fanOut) start() {
	f.mu.Lock()
	f.started = true
	f.mu.Unlock()
}
