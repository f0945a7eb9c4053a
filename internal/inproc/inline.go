package inproc

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
)

// streamingSubresources are the subresources whose answers stream (with
// watches, kube-apiserver's long-running requests): their caller must read
// the body as the handler writes it.
var streamingSubresources = map[string]bool{"log": true, "exec": true, "attach": true, "portforward": true, "proxy": true}

// streams reports whether req's answer may stream: a watch, an upgrade, or
// a path that ends in (or proxies through) a streaming subresource.
// Everything else is one answer the handler writes and returns from.
func streams(req *http.Request) bool {
	if req.Header.Get("Upgrade") != "" || strings.Contains(req.URL.Path, "/watch/") {
		return true
	}
	if strings.Contains(req.URL.RawQuery, "watch=") {
		if w := req.URL.Query().Get("watch"); w == "true" || w == "1" {
			return true
		}
	}
	segs := strings.Split(strings.TrimSuffix(req.URL.Path, "/"), "/")
	for i, seg := range segs {
		if streamingSubresources[seg] && (i == len(segs)-1 || seg == "proxy") {
			return true
		}
	}
	return false
}

// serveInline serves a request whose answer does not stream in the
// caller's goroutine, the whole body buffered: no goroutine, pipe or
// handoff per request, and a stack already grown for the handler chain.
// The caller sees what the streaming path gives it: its context's end
// cancels the handler and fails the request, a Cut fails it with
// io.ErrUnexpectedEOF, a panic is a 500 whose body fails (serve). While the
// transport drains, requests take the streaming path (their callers return
// at once when they give up); one that began before and whose caller gives
// up runs to its end (or Abandon) before its caller returns.
func (t *Transport) serveInline(h http.Handler, req *http.Request, state *tls.ConnectionState) (*http.Response, error) {
	x := t.newInline(req, state)
	defer x.finish()
	if err := x.serve(h); err != nil {
		return nil, err
	}
	switch {
	case req.Context().Err() != nil:
		return nil, context.Cause(req.Context())
	case x.cut.Load():
		return nil, io.ErrUnexpectedEOF
	case t.draining.Load() && x.w.sent.Get("Retry-After") != "":
		return nil, ErrClosed // see roundTrip
	}
	b := x.w.body.(*bufferBody)
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", x.w.code, http.StatusText(x.w.code)),
		StatusCode:    x.w.code,
		Proto:         "HTTP/2.0",
		ProtoMajor:    2,
		Header:        x.w.sent,
		Body:          io.NopCloser(b),
		ContentLength: x.contentLength(req.Method),
		Request:       req,
	}, nil
}

// contentLength sets the Content-Length header where net/http's HTTP/2
// server would (a body allowed for the status, the handler done before it
// wrote more than a buffer or flushed, a HEAD's empty body apart) and
// returns the length, -1 when unknown.
func (x *inline) contentLength(method string) int64 {
	b, code := x.w.body.(*bufferBody), x.w.code
	if n, err := strconv.ParseInt(x.w.sent.Get("Content-Length"), 10, 64); err == nil {
		return n
	}
	bodyAllowed := code >= 200 && code != http.StatusNoContent && code != http.StatusNotModified
	if !bodyAllowed || b.flushed || b.Len() > bufferSize || b.Len() == 0 && method == http.MethodHead {
		return -1
	}
	x.w.sent.Set("Content-Length", strconv.Itoa(b.Len()))
	return int64(b.Len())
}

// inline is a request serveInline serves.
type inline struct {
	t      *Transport
	r      *http.Request
	w      *responseWriter
	cancel context.CancelFunc // ends the handler's context
	cut    atomic.Bool
	stops  []func() bool
	done   context.CancelFunc
}

func (t *Transport) newInline(req *http.Request, state *tls.ConnectionState) *inline {
	x := &inline{t: t}
	ctx, cancel := context.WithCancel(context.WithoutCancel(req.Context()))
	x.cancel = cancel
	x.r = handlerRequest(req, ctx, state)
	// done ends with the request (CloseNotify's goroutines end then).
	done, finish := context.WithCancel(context.Background())
	x.done = finish
	x.w = &responseWriter{header: http.Header{}, body: &bufferBody{}, ready: make(chan struct{}), done: done.Done()}
	x.stops = append(x.stops,
		context.AfterFunc(req.Context(), func() {
			if !t.detach(x) {
				cancel()
			}
		}),
		context.AfterFunc(t.cut, func() { x.end(io.ErrUnexpectedEOF) }))
	return x
}

// serve runs the handler; its status is 200 if it wrote none. A panic
// makes the answer a 500 whose body fails with it, as the streaming path's
// (http.ErrAbortHandler fails the request, as a reset stream).
func (x *inline) serve(h http.Handler) (err error) {
	defer func() {
		p := recover()
		switch {
		case p == http.ErrAbortHandler:
			// Not an EOF, which client-go would retry a GET on.
			err = errAborted
		case p != nil:
			x.w.header = http.Header{}
			x.w.writeHeader(http.StatusInternalServerError)
			x.w.body = &bufferBody{err: fmt.Errorf("inproc: handler panic: %v", p)}
		}
	}()
	h.ServeHTTP(x.w, x.r)
	x.w.writeHeader(http.StatusOK)
	return nil
}

// end cancels the handler; the caller fails with io.ErrUnexpectedEOF, as
// for a Cut (Abandon ends detached requests so).
func (x *inline) end(error) {
	x.cut.Store(true)
	x.cancel()
}

func (x *inline) finish() {
	for _, stop := range x.stops {
		stop()
	}
	x.t.mu.Lock()
	delete(x.t.detached, x)
	x.t.mu.Unlock()
	x.cancel()
	x.done()
}

// errAborted is the error of a request whose handler aborted it
// (http.ErrAbortHandler).
var errAborted = errors.New("inproc: stream error: the server aborted the request")

// bufferBody is an inline request's whole body, and the error its reader
// gets after it (io.EOF if none).
type bufferBody struct {
	bytes.Buffer
	err     error
	flushed bool // as a streamed answer would have been
}

func (b *bufferBody) Flush() error {
	b.flushed = true
	return nil
}

func (b *bufferBody) Read(p []byte) (int, error) {
	n, err := b.Buffer.Read(p)
	if err == io.EOF && b.err != nil {
		return n, b.err
	}
	return n, err
}
