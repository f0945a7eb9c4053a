package apiserver

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// trackingListener remembers the connections it accepted and counts requests
// in flight, so Close can wait for requests and then close connections
// itself instead of waiting out HTTP/2's one-second graceful GOAWAY.
type trackingListener struct {
	net.Listener

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	idle  chan struct{} // closed when inflight drops to zero; replaced when it rises

	closing  bool
	inflight int                        // requests other than watches, guarded by mu
	running  map[*http.Request]struct{} // the requests counted by inflight
}

func newTrackingListener(ln net.Listener) *trackingListener {
	idle := make(chan struct{})
	close(idle)
	return &trackingListener{Listener: ln, conns: map[net.Conn]struct{}{}, idle: idle, running: map[*http.Request]struct{}{}}
}

func (l *trackingListener) Accept() (net.Conn, error) {
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
	l    *trackingListener
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

// closeConns closes every open connection, and every one accepted from now on.
func (l *trackingListener) closeConns() {
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

// track counts the requests of h that are not watches.
func (l *trackingListener) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isWatch(r) {
			h.ServeHTTP(w, r)
			return
		}
		l.mu.Lock()
		if l.inflight++; l.inflight == 1 {
			l.idle = make(chan struct{})
		}
		l.running[r] = struct{}{}
		l.mu.Unlock()
		defer func() {
			l.mu.Lock()
			delete(l.running, r)
			if l.inflight--; l.inflight == 0 {
				close(l.idle)
			}
			l.mu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
}

func isWatch(r *http.Request) bool {
	q := r.URL.Query().Get("watch")
	return q == "true" || q == "1"
}

// waitIdle waits until no request other than watches is in flight.
func (l *trackingListener) waitIdle(timeout time.Duration) bool {
	l.mu.Lock()
	idle := l.idle
	l.mu.Unlock()
	select {
	case <-idle:
		return true
	case <-time.After(timeout):
		return false
	}
}

// inFlight returns the method and URL of the requests in flight.
func (l *trackingListener) inFlight() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for r := range l.running {
		out = append(out, r.Method+" "+r.URL.String())
	}
	return out
}
