package controller

import (
	"reflect"
	"slices"
	"sync"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
)

// fanOut hands the events of one client-go registration on its informer
// to every handler added before the informer runs, in the order they were
// added. client-go gives each registration a buffer of 1,024 events (16
// KiB, kept while the informer lives) and two goroutines; the typed
// factory's informers (FanOutFactory) have handlers of several
// controllers each. Their handlers only queue work, so sharing one
// goroutine costs them nothing; one that panics does as on client-go's
// own registration (handle). Monitors' informers need no fanOut: they call
// their handlers directly (directInformer).
//
// A handler added once the informer runs gets a registration of its own,
// as before: client-go then replays the informer's store to it, which the
// shared registration, long past its initial list, cannot.
type fanOut struct {
	cache.SharedIndexInformer
	starter any // what tells whether the informer runs

	mu       sync.RWMutex
	shared   cache.ResourceEventHandlerRegistration // with the first handler
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
	return &fanOut{SharedIndexInformer: informer, starter: starterOf(informer)}
}

// AddEventHandler implements cache.SharedInformer.
func (f *fanOut) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	f.mu.Lock()
	// The informer marks itself started before it hands out any event,
	// and the shared registration's events wait for f.mu: a handler that
	// joins while it has not started sees every event the others see.
	if f.started() {
		f.mu.Unlock()
		return f.SharedIndexInformer.AddEventHandler(h)
	}
	defer f.mu.Unlock()
	if f.shared == nil {
		shared, err := f.SharedIndexInformer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			AddFunc:    func(obj any, initial bool) { f.each(func(h *fanned) { h.OnAdd(obj, initial) }) },
			UpdateFunc: func(old, obj any) { f.each(func(h *fanned) { h.OnUpdate(old, obj) }) },
			DeleteFunc: func(obj any) { f.each(func(h *fanned) { h.OnDelete(obj) }) },
		})
		if err != nil {
			return nil, err
		}
		f.shared = shared
	}
	reg := &fanned{f.shared, h}
	// A new slice: each ranges over the old one unlocked.
	f.handlers = append(slices.Clip(f.handlers), reg)
	return reg, nil
}

// started reports whether the informer runs (client-go's informers tell;
// another is taken as running, which keeps client-go's behaviour).
func (f *fanOut) started() bool {
	s, ok := f.starter.(interface{ HasStarted() bool })
	return !ok || s.HasStarted()
}

// starterOf returns the informer that tells whether inf runs: inf, or the
// one it wraps. client-go's typed informers (a factory's, such as
// Core().V1().Pods().Informer()) embed an untyped one in an exported field
// and do not promote its HasStarted.
func starterOf(inf any) any {
	for range 4 {
		if _, ok := inf.(interface{ HasStarted() bool }); ok {
			return inf
		}
		v := reflect.ValueOf(inf)
		if v.Kind() == reflect.Pointer {
			v = v.Elem()
		}
		if v.Kind() != reflect.Struct {
			return nil
		}
		f := v.FieldByName("SharedIndexInformer")
		if !f.IsValid() || !f.CanInterface() {
			return nil
		}
		inf = f.Interface()
	}
	return nil
}

func (f *fanOut) each(call func(*fanned)) {
	f.mu.RLock()
	handlers := f.handlers
	f.mu.RUnlock()
	for _, h := range handlers {
		handle(h, call)
	}
}

// handle calls one handler as client-go calls a registration's: a panic
// is utilruntime.HandleCrash's (it crashes the process, as client-go's
// listener does, unless ReallyCrash is off: then it is logged), and the
// handlers after it still get the event, as client-go's other
// registrations would.
func handle[H any](h H, call func(H)) {
	defer utilruntime.HandleCrash()
	call(h)
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
