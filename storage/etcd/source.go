package etcd

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"
)

// cacheSource is the store a watch cache reads from, which Close can
// quiesce before it stops the cache.
//
// The cacher's reflector hands each event of its etcd watch to the cache's
// dispatcher through a buffered channel, with no way out of the send
// (k8s.io/apiserver's Cacher.processEvent). Cacher.Stop ends the dispatcher
// and then waits for the reflector: if a burst of events (a test deleting its
// prefix, thousands of writes) has filled the channel, the reflector never
// leaves the send and Stop never returns (CI's etcd stage hung ten minutes in
// Backend.Close). end first ends the etcd watches, so the reflector drains
// what it has through a running dispatcher and leaves its watch, and gives a
// later watch nothing to deliver; only then does Close stop the caches.
type cacheSource struct {
	storage.Interface

	mu      sync.Mutex
	ended   bool
	watches map[*sourceWatch]struct{}
}

func newCacheSource(s storage.Interface) *cacheSource {
	return &cacheSource{Interface: s, watches: map[*sourceWatch]struct{}{}}
}

func (s *cacheSource) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		// A reflector that watches again once end has closed its watch
		// waits here, with nothing to deliver, until its cache stops.
		return &idleWatch{ch: make(chan watch.Event)}, nil
	}
	w, err := s.Interface.Watch(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	sw := &sourceWatch{Interface: w, source: s, left: make(chan struct{})}
	s.watches[sw] = struct{}{}
	return sw, nil
}

func (s *cacheSource) forget(w *sourceWatch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.watches, w)
}

// endTimeout bounds end's wait: client-go's reflector stops every watch it
// leaves but one, a watch-list whose store refused the list (a watch
// cache's Replace does not fail in practice). Past it, Close stops the
// cache anyway.
const endTimeout = 10 * time.Second

// end ends the source's etcd watches and returns once their reflector has
// left them (stopped them, as it does when a watch's channel closes), or
// after endTimeout.
func (s *cacheSource) end() {
	s.mu.Lock()
	s.ended = true
	watches := make([]*sourceWatch, 0, len(s.watches))
	for w := range s.watches {
		watches = append(watches, w)
	}
	s.mu.Unlock()
	for _, w := range watches {
		w.Interface.Stop() // its channel closes once etcd3's goroutines end
	}
	timeout := time.NewTimer(endTimeout)
	defer timeout.Stop()
	for _, w := range watches {
		select {
		case <-w.left:
		case <-timeout.C:
			return
		}
	}
}

// sourceWatch is an etcd watch of a cacheSource; Stop tells end that the
// reflector has left it.
type sourceWatch struct {
	watch.Interface
	source *cacheSource
	once   sync.Once
	left   chan struct{}
}

func (w *sourceWatch) Stop() {
	w.Interface.Stop()
	w.once.Do(func() {
		w.source.forget(w)
		close(w.left)
	})
}

// idleWatch delivers nothing until it is stopped.
type idleWatch struct {
	once sync.Once
	ch   chan watch.Event
}

func (w *idleWatch) ResultChan() <-chan watch.Event { return w.ch }
func (w *idleWatch) Stop()                          { w.once.Do(func() { close(w.ch) }) }
