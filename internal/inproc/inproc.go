// Package inproc is an http.RoundTripper that serves requests by calling an
// http.Handler in the same process: no TCP, no TLS, but the same handler
// chain (authentication, authorization, admission) as over the network.
//
// The server's loopback clients (its own informers and controllers) use it.
// It also serves requests before the listener is up, so the server can sync
// its informers before running the post-start hooks that wait for them; those
// hooks poll every 100 ms and would otherwise add 100 ms to every start.
//
// A caller that gives up on a request (its context ends, or it closes the
// body) ends the handler's context, as a reset HTTP/2 stream does, except
// while the transport drains (Drain, from the server's Close): then a
// request other than a watch runs to its end and its answer is dropped.
// The server's controllers stop at Close with requests in flight; cut off,
// each would make the API server log errors ("http: Handler timeout",
// "post-timeout activity") into the output of the test that closed it.
package inproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// Transport serves requests with the handler set by SetHandler. The zero
// value is ready to use.
type Transport struct {
	handler atomic.Pointer[http.Handler]

	once     sync.Once
	ready    chan struct{}   // closed by SetHandler
	closed   context.Context // ends at Close
	close    context.CancelFunc
	setOnce  sync.Once
	draining atomic.Bool
}

// ErrClosed is returned for requests made after Close.
var ErrClosed = errors.New("inproc: transport closed")

func (t *Transport) init() {
	t.once.Do(func() {
		t.ready = make(chan struct{})
		t.closed, t.close = context.WithCancel(context.Background())
	})
}

// SetHandler sets the handler that serves requests. Requests made before
// wait for it (controllers started while the server is being built), until
// their context ends or Close.
func (t *Transport) SetHandler(h http.Handler) {
	t.init()
	t.handler.Store(&h)
	t.setOnce.Do(func() { close(t.ready) })
}

// Drain makes requests other than watches run to their end when their
// callers give up on them from now on.
func (t *Transport) Drain() { t.draining.Store(true) }

// Close refuses requests from now on and ends the wait of requests made
// before SetHandler. Requests in flight go on.
func (t *Transport) Close() {
	t.init()
	t.close()
}

// RoundTrip implements http.RoundTripper. The response body streams what the
// handler writes (watches included); closing it cancels the request.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.init()
	if t.closed.Err() != nil {
		return nil, ErrClosed
	}
	hp := t.handler.Load()
	if hp == nil {
		select {
		case <-t.ready:
			hp = t.handler.Load()
		case <-t.closed.Done():
			return nil, ErrClosed
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	// gone ends when the caller gives up: the handler's writes are dropped.
	gone, leave := context.WithCancel(req.Context())
	ctx, cancel := t.handlerContext(req, gone)
	r := req.Clone(ctx)
	r.RequestURI = req.URL.RequestURI()
	r.RemoteAddr = "127.0.0.1:0"
	if r.Body == nil {
		r.Body = http.NoBody
	}
	pr, pw := io.Pipe()
	w := &responseWriter{header: http.Header{}, body: pw, ready: make(chan struct{}), done: gone.Done()}
	go func() {
		defer cancel()
		defer func() {
			if p := recover(); p != nil && p != http.ErrAbortHandler {
				w.writeHeader(http.StatusInternalServerError)
				_ = pw.CloseWithError(fmt.Errorf("inproc: handler panic: %v", p))
				return
			}
			w.writeHeader(http.StatusOK)
			_ = pw.Close()
		}()
		(*hp).ServeHTTP(w, r)
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		leave()
		_ = pr.CloseWithError(req.Context().Err())
		return nil, req.Context().Err()
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", w.code, http.StatusText(w.code)),
		StatusCode:    w.code,
		Proto:         "HTTP/2.0",
		ProtoMajor:    2,
		Header:        w.sent,
		Body:          &body{PipeReader: pr, cancel: leave},
		ContentLength: -1,
		Request:       req,
	}, nil
}

// handlerContext is the context the handler serves req with: it has req's
// values, and ends when the caller is gone, or, while the transport drains,
// for a request other than a watch, when the handler returns.
// (Not req's deadline: a deadline does not cross the wire; the server sets
// its own from the timeout parameter.)
func (t *Transport) handlerContext(req *http.Request, gone context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(req.Context()))
	watch := req.URL.Query().Get("watch")
	detachable := watch != "true" && watch != "1"
	stopGone := context.AfterFunc(gone, func() {
		if !detachable || !t.draining.Load() {
			cancel()
		}
	})
	return ctx, func() { stopGone(); cancel() }
}

type body struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (b *body) Close() error {
	b.cancel()
	return b.PipeReader.Close()
}

// responseWriter hands the status and headers to RoundTrip on the first
// write, then streams the body through a pipe.
type responseWriter struct {
	header http.Header
	body   *io.PipeWriter

	once  sync.Once
	ready chan struct{}
	code  int
	sent  http.Header
	done  <-chan struct{}
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(code int) { w.writeHeader(code) }

func (w *responseWriter) writeHeader(code int) {
	w.once.Do(func() {
		w.code = code
		w.sent = w.header.Clone()
		close(w.ready)
	})
}

func (w *responseWriter) Write(p []byte) (int, error) {
	w.writeHeader(http.StatusOK)
	select {
	case <-w.done:
		// The client went away; like a reset HTTP/2 stream whose handler
		// has not noticed yet, drop the data. The handler sees its
		// context cancelled next.
		return len(p), nil
	default:
	}
	return w.body.Write(p)
}

// Flush implements http.Flusher: writes reach the reader as they happen.
func (w *responseWriter) Flush() { w.writeHeader(http.StatusOK) }

// CloseNotify implements http.CloseNotifier, which the API server's response
// writer wrappers require (with http.Flusher) to pass flushing through, as
// an HTTP/2 response writer does.
//
//nolint:staticcheck // the interface is deprecated but still asserted upstream
func (w *responseWriter) CloseNotify() <-chan bool {
	ch := make(chan bool, 1)
	go func() {
		<-w.done
		ch <- true
	}()
	return ch
}
