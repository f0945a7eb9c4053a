// Package listener is the server's listener: it remembers the connections
// it accepted and counts the requests in flight (watches apart), so that
// Close can wait for requests to end and then close the connections itself
// instead of waiting out HTTP/2's one-second graceful GOAWAY.
package listener

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// Tracking is a listener that remembers the connections it accepted and
// counts the requests its handlers (Track) serve.
type Tracking struct {
	net.Listener

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	closing bool
	// requests are those in flight other than watches, watches the watches:
	// Close waits for the first while the connections are open, for the
	// second once it has closed them, before the storage closes.
	requests, watches requestSet
}

// requestSet counts requests; guarded by Tracking.mu.
type requestSet struct {
	idle    chan struct{} // closed when none is in flight; replaced when one starts
	running map[*http.Request]context.CancelFunc
}

func newRequestSet() requestSet {
	idle := make(chan struct{})
	close(idle)
	return requestSet{idle: idle, running: map[*http.Request]context.CancelFunc{}}
}

func (f *requestSet) add(r *http.Request, cancel context.CancelFunc) {
	if len(f.running) == 0 {
		f.idle = make(chan struct{})
	}
	f.running[r] = cancel
}

func (f *requestSet) done(r *http.Request) {
	delete(f.running, r)
	if len(f.running) == 0 {
		close(f.idle)
	}
}

// New tracks the connections of ln.
func New(ln net.Listener) *Tracking {
	return &Tracking{Listener: ln, conns: map[net.Conn]struct{}{}, requests: newRequestSet(), watches: newRequestSet()}
}

func (l *Tracking) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l}
	l.mu.Lock()
	closing := l.closing
	if !closing {
		l.conns[tc] = struct{}{}
	}
	l.mu.Unlock()
	if closing {
		// A client reconnected while the server shuts down: refuse it
		// rather than let it hold up the graceful shutdown.
		_ = c.Close()
	}
	return tc, nil
}

type trackedConn struct {
	net.Conn
	l    *Tracking
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// CloseConns closes every open connection, and every one accepted from now on.
func (l *Tracking) CloseConns() {
	l.mu.Lock()
	l.closing = true
	conns := make([]net.Conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// EndRequests ends the network's requests in flight, watches included,
// and leaves idle connections open (Server.Reset). Each request's context
// is cancelled, so that its handler returns and an HTTP/2 stream ends as a
// watch's end does, on a connection the client keeps using; the HTTP/1
// connections of requests in flight are closed (an exec's or a
// port-forward's upgraded stream outlives its context), which no client
// reuses as they are busy. Closing idle connections instead would make a
// later client that shares their transport (client-go caches transports
// by TLS configuration) fail its next request on one the server closed
// (unexpected EOF). In-process requests, the server's own controllers'
// among them, are left alone.
func (l *Tracking) EndRequests() {
	l.mu.Lock()
	conns := map[string]net.Conn{}
	for c := range l.conns {
		conns[c.RemoteAddr().String()] = c
	}
	var cancels []context.CancelFunc
	var busy []net.Conn
	for _, f := range []*requestSet{&l.requests, &l.watches} {
		for r, cancel := range f.running {
			c, network := conns[r.RemoteAddr]
			if !network {
				continue // in process: the server's own, or cut by its transport
			}
			cancels = append(cancels, cancel)
			if r.ProtoMajor == 1 {
				busy = append(busy, c)
			}
		}
	}
	l.mu.Unlock()
	for _, cancel := range cancels {
		cancel()
	}
	for _, c := range busy {
		_ = c.Close()
	}
}

// Track counts the requests h serves, watches apart.
func (l *Tracking) Track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := &l.requests
		if isWatch(r) {
			f = &l.watches
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		l.mu.Lock()
		f.add(r, cancel)
		l.mu.Unlock()
		defer func() {
			l.mu.Lock()
			f.done(r)
			l.mu.Unlock()
		}()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

func isWatch(r *http.Request) bool {
	q := r.URL.Query().Get("watch")
	return q == "true" || q == "1"
}

// WaitIdle waits up to timeout until no request other than watches is in
// flight, and reports whether none is.
func (l *Tracking) WaitIdle(timeout time.Duration) bool {
	return l.wait(&l.requests, timeout)
}

// WaitWatches waits up to timeout until no watch is in flight, and reports
// whether none is.
func (l *Tracking) WaitWatches(timeout time.Duration) bool {
	return l.wait(&l.watches, timeout)
}

func (l *Tracking) wait(f *requestSet, timeout time.Duration) bool {
	l.mu.Lock()
	idle := f.idle
	l.mu.Unlock()
	select {
	case <-idle:
		return true
	case <-time.After(timeout):
		return false
	}
}

// InFlight returns the method and URL of the requests in flight, watches
// included.
func (l *Tracking) InFlight() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, f := range []*requestSet{&l.requests, &l.watches} {
		for r := range f.running {
			out = append(out, r.Method+" "+r.URL.String())
		}
	}
	return out
}
