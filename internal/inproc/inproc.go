// Package inproc is an http.RoundTripper that serves requests by calling an
// http.Handler in the same process: no TCP, no TLS, but the same handler
// chain (authentication, authorization, admission) as over the network.
//
// The server's loopback clients (its own informers and controllers) use it,
// and so do the in-process clients of users (Server.InProcess), through a
// Transport of their own: WithTLS presents their client certificates to the
// handler as a TLS connection would, and Cut ends their requests at the
// server's Close as closing connections ends network clients'.
//
// It also serves requests before the listener is up, so the server can sync
// its informers before running the post-start hooks that wait for them; those
// hooks poll every 100 ms and would otherwise add 100 ms to every start.
//
// A caller that gives up on a request (its context ends, or it closes the
// body) ends the handler's context, as a reset HTTP/2 stream does, and reads
// its context's error from the body, as from net/http's; except while the
// transport drains (Drain, from the server's Close): then a request other
// than a watch runs to its end, read whole by a caller that has the body,
// dropped otherwise. The server's controllers stop at Close with requests
// in flight; cut off, each would make the API server log errors ("http:
// Handler timeout", "post-timeout activity"), and client-go its reader
// ("Unexpected error when reading response body"), into the output of the
// test that closed it.
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
	"sync"
	"sync/atomic"
	"time"
)

// Transport serves requests with the handler set by SetHandler. The zero
// value is ready to use.
type Transport struct {
	handler atomic.Pointer[http.Handler]
	inline  atomic.Pointer[func(*http.Request) bool]

	once     sync.Once
	ready    chan struct{}   // closed by SetHandler
	closed   context.Context // ends at Close
	close    context.CancelFunc
	cut      context.Context // ends at Cut
	cutAll   context.CancelFunc
	setOnce  sync.Once
	draining atomic.Bool

	mu       sync.Mutex
	detached map[*exchange]struct{} // running on while their callers are gone

	// idle takes the next handler to run from RoundTrip to an idle worker.
	idle chan func()
}

// ErrClosed is returned for requests made after Close.
var ErrClosed = errors.New("inproc: transport closed")

// ErrAborted is the error of a request whose handler aborted it (panicked,
// with http.ErrAbortHandler or with anything else, as k8s.io/apiserver's
// panic filter does again after its 500), from RoundTrip or the body's
// reads: where an HTTP/2 client reads its stream reset, and with the same
// words.
var ErrAborted = errors.New("inproc: stream error: INTERNAL_ERROR; received from peer (the server aborted the request)")

func (t *Transport) init() {
	t.once.Do(func() {
		t.idle = make(chan func())
		t.ready = make(chan struct{})
		t.closed, t.close = context.WithCancel(context.Background())
		t.cut, t.cutAll = context.WithCancel(context.Background())
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

// SetInline has the requests for which short reports true served on their
// caller's goroutine, their answer kept whole for the caller (see
// roundTripInline): short must report only requests whose handlers answer
// without waiting for the caller (not a watch, a proxy, logs, exec, ...).
// A request whose body could be written by its caller after RoundTrip
// returns (one without GetBody) always runs on a worker.
func (t *Transport) SetInline(short func(*http.Request) bool) { t.inline.Store(&short) }

func (t *Transport) inlined(req *http.Request) bool {
	short := t.inline.Load()
	return short != nil && (req.Body == nil || req.Body == http.NoBody || req.GetBody != nil) && (*short)(req)
}

// Drain makes requests other than watches run to their end when their
// callers give up on them from now on, and answers that ask to be retried
// (Retry-After) fail with ErrClosed.
func (t *Transport) Drain() { t.draining.Store(true) }

// Abandon ends the drain: the requests it left running end as their callers
// did, and so do those whose callers give up from now on.
func (t *Transport) Abandon() {
	t.mu.Lock()
	t.draining.Store(false)
	detached := t.detached
	t.detached = nil
	t.mu.Unlock()
	for x := range detached {
		x.end(context.Canceled)
	}
}

// Close refuses requests from now on and ends the wait of requests made
// before SetHandler. Requests in flight go on.
func (t *Transport) Close() {
	t.init()
	t.close()
}

// Cut refuses requests from now on, as Close, and ends those in flight as
// a closed connection ends its streams: their handlers' contexts are
// cancelled and their callers read io.ErrUnexpectedEOF, as from an HTTP/2
// connection the server closed (the server's Close cuts its clients'
// watches so).
func (t *Transport) Cut() {
	t.Close()
	t.cutAll()
}

// RoundTrip implements http.RoundTripper. The response body streams what the
// handler writes (watches included); closing it cancels the request.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.roundTrip(req, nil)
}

// WithTLS returns a round tripper that serves requests through t as if they
// came over a TLS connection of that state: the handler sees it as the
// request's TLS field (the peer certificates of a client certificate are
// what authenticates it).
func (t *Transport) WithTLS(state *tls.ConnectionState) http.RoundTripper {
	return tlsTransport{t, state}
}

type tlsTransport struct {
	t     *Transport
	state *tls.ConnectionState
}

func (tt tlsTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return tt.t.roundTrip(req, tt.state)
}

// Owns reports whether rt is t or a round tripper of t's WithTLS.
func (t *Transport) Owns(rt http.RoundTripper) bool {
	tt, ok := rt.(tlsTransport)
	return rt == http.RoundTripper(t) || ok && tt.t == t
}

func (t *Transport) roundTrip(req *http.Request, state *tls.ConnectionState) (*http.Response, error) {
	h, err := t.handlerFor(req.Context())
	if err != nil {
		return nil, err
	}
	if t.inlined(req) {
		return t.roundTripInline(req, state, h)
	}
	x := t.newExchange(req, state)
	t.run(func() { x.serve(h) })
	select {
	case <-x.w.ready:
		if x.aborted.Load() {
			x.leave()
			return nil, x.abortErr
		}
		if err := x.handOut(); err != nil {
			return nil, err
		}
		if t.draining.Load() && x.w.sent.Get("Retry-After") != "" {
			// The server is closing and asks its own client to come back
			// (a 503 or 429 of its shutdown): client-go would retry for
			// up to 10 s, holding Close; its caller is told the server
			// closed instead. Nobody reads the body: the handler's writes
			// fail rather than block.
			_ = x.pr.CloseWithError(ErrClosed)
			x.leave()
			return nil, ErrClosed
		}
	case <-req.Context().Done():
		x.leave()
		return nil, req.Context().Err()
	case <-t.cut.Done(): // before the handler answered
		x.leave()
		return nil, io.ErrUnexpectedEOF
	}
	return x.response(&body{PipeReader: x.pr, leave: x.leave}), nil
}

// contentLength is the length h gives, or -1 (unknown), as net/http's
// client reads it.
func contentLength(h http.Header) int64 {
	if n, err := strconv.ParseInt(h.Get("Content-Length"), 10, 64); err == nil && n >= 0 {
		return n
	}
	return -1
}

// response is the handler's answer, its body read from b.
func (x *exchange) response(b io.ReadCloser) *http.Response {
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", x.w.code, http.StatusText(x.w.code)),
		StatusCode:    x.w.code,
		Proto:         "HTTP/2.0",
		ProtoMajor:    2,
		Header:        x.w.sent,
		Body:          b,
		ContentLength: contentLength(x.w.sent),
		Request:       x.req,
	}
}

// roundTripInline serves req on the caller's goroutine, the answer kept
// whole: a request's two handoffs between goroutines (to a worker, then its
// body through a pipe) were ~10% of a create's time in process. What the
// caller can observe is as on a worker: its giving up (its context, the
// transport's Cut) ends the handler's context and is its error, a panic is
// ErrAborted, before the answer or from its body after a flush.
func (t *Transport) roundTripInline(req *http.Request, state *tls.ConnectionState, h http.Handler) (_ *http.Response, err error) {
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	x := t.newExchange(req, state)
	body := &inlineBody{buf: takeAnswer()}
	x.w.body = body
	x.serve(h)
	answer := body.seal()
	// The handler has ended: the caller's giving up from now on has
	// nothing to end (nor, while draining, to keep running).
	x.stopGone()
	defer func() {
		if err != nil {
			x.leave()
			giveBackAnswer(answer)
		}
	}()
	// The caller's own error first, as net/http's: the handler's context
	// ended with it, and the chain's timeout aborts a handler that had
	// answered when its context ends.
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	if err := x.ended(); err != nil {
		return nil, err
	}
	if x.aborted.Load() {
		return nil, x.abortErr
	}
	if err := x.handOut(); err != nil {
		return nil, err
	}
	if t.draining.Load() && x.w.sent.Get("Retry-After") != "" {
		return nil, ErrClosed // as on a worker
	}
	var r io.Reader = answer
	if x.abortErr != nil { // after a flush: the body ends in the reset
		r = io.MultiReader(answer, errReader{x.abortErr})
	}
	return x.response(&keptBody{r: r, answer: answer, leave: x.leave}), nil
}

// run runs serve on an idle worker, or on a new one. A worker runs one
// handler after another, its stack grown by the first: each request on a
// goroutine of its own grew (copied) a new stack through the whole handler
// chain, ~7% of a GET's time (BENCHMARKS.md). A worker idle for
// workerIdle, or when the transport closes, ends.
func (t *Transport) run(serve func()) {
	select {
	case t.idle <- serve:
	default:
		go t.worker(serve)
	}
}

const workerIdle = time.Second

func (t *Transport) worker(serve func()) {
	timer := time.NewTimer(workerIdle)
	defer timer.Stop()
	for {
		serve()
		timer.Reset(workerIdle)
		select {
		case serve = <-t.idle:
		case <-timer.C:
			return
		case <-t.closed.Done():
			return
		}
	}
}

// handlerFor returns the handler, waiting for SetHandler if need be.
func (t *Transport) handlerFor(ctx context.Context) (http.Handler, error) {
	t.init()
	if t.closed.Err() != nil {
		return nil, ErrClosed
	}
	if hp := t.handler.Load(); hp != nil {
		return *hp, nil
	}
	select {
	case <-t.ready:
		return *t.handler.Load(), nil
	case <-t.closed.Done():
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// exchange is one request in flight, between its caller and the handler.
type exchange struct {
	t      *Transport
	req, r *http.Request // the caller's, the handler's
	w      *responseWriter
	pr     *io.PipeReader
	pw     *io.PipeWriter
	// leave tells that the caller gave up (its context ended, or it closed
	// the body); cancel ends the handler's context.
	leave, cancel context.CancelFunc
	stopCut       func() bool // the exchange no longer ends at Cut
	stopGone      func() bool // nor when its caller gives up
	aborted       atomic.Bool // the handler panicked; abortErr says how
	abortErr      error

	mu              sync.Mutex
	gone, handedOut bool  // the caller gave up; it has the body
	endErr          error // what end ended the exchange with
}

func (t *Transport) newExchange(req *http.Request, state *tls.ConnectionState) *exchange {
	x := &exchange{t: t, req: req}
	gone, leave := context.WithCancel(req.Context())
	// The handler's context has req's values but not its deadline (which
	// does not cross the wire: the server sets its own from the timeout
	// parameter) nor its cancellation: see callerGone.
	ctx, cancel := context.WithCancel(context.WithoutCancel(req.Context()))
	x.leave, x.cancel = leave, cancel
	x.r = req.Clone(ctx)
	x.r.RequestURI = req.URL.RequestURI()
	x.r.RemoteAddr = "127.0.0.1:0"
	x.r.TLS = state
	if x.r.Body == nil {
		x.r.Body = http.NoBody
	}
	x.pr, x.pw = io.Pipe()
	x.w = &responseWriter{header: http.Header{}, ready: make(chan struct{}), done: gone.Done()}
	x.w.body = &bodyBuffer{dst: headFirst{x.w, x.pw}}
	x.stopGone = context.AfterFunc(gone, func() { x.callerGone(context.Cause(gone)) })
	x.stopCut = context.AfterFunc(t.cut, func() { x.end(io.ErrUnexpectedEOF) })
	return x
}

// serve runs the handler; its status is 200 if it wrote none. A handler
// that panics (k8s.io/apiserver's panic filter answers 500, then panics
// again, as upstream's servers do) ends the request as net/http's HTTP/2
// server ends the stream: reset, the headers not sent if the handler had
// not flushed them, what the caller reads of the body cut off.
func (x *exchange) serve(h http.Handler) {
	defer func() {
		x.t.mu.Lock()
		delete(x.t.detached, x)
		x.t.mu.Unlock()
	}()
	defer x.cancel()
	defer x.stopCut()
	defer func() {
		if p := recover(); p != nil {
			x.abortErr = abortError(p)
			x.w.writeHeader(http.StatusInternalServerError)
			// Aborted only if the panic is what hands out the headers:
			// a handler that flushed them first was answered, and its
			// caller reads abortErr from the body instead.
			x.w.sendOnce.Do(func() {
				x.aborted.Store(true) // before ready: RoundTrip answers abortErr
				close(x.w.ready)
			})
			_ = x.pw.CloseWithError(x.abortErr)
			return
		}
		x.w.writeHeader(http.StatusOK)
		x.w.lengthIfWhole(x.r.Method)
		_ = x.w.body.Flush()
		x.w.sendHeader()
		_ = x.pw.Close()
	}()
	h.ServeHTTP(x.w, x.r)
}

// abortError is ErrAborted for the handler's panic p; a panic other than
// http.ErrAbortHandler is named (its first line: the API server's finisher
// adds a stack), which a network client cannot know, to tell a test why.
func abortError(p any) error {
	if p == http.ErrAbortHandler {
		return ErrAborted
	}
	reason, _, _ := strings.Cut(fmt.Sprint(p), "\n")
	return fmt.Errorf("%w: the handler panicked: %s", ErrAborted, reason)
}

// callerGone ends the handler's context and fails the caller's reads with
// cause, as a reset HTTP/2 stream and net/http's body do. While the
// transport drains, a request other than a watch goes on instead: a caller
// that has the body reads the whole answer (or closes it), and with none the
// handler's writes are dropped.
func (x *exchange) callerGone(cause error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.gone = true
	watch := x.req.URL.Query().Get("watch")
	if watch != "true" && watch != "1" && x.t.detach(x) {
		if !x.handedOut {
			_ = x.pr.CloseWithError(cause)
		}
		return
	}
	_ = x.pw.CloseWithError(cause) // before the handler can end the body
	x.cancel()
}

// detach lets x run on while the transport drains.
func (t *Transport) detach(x *exchange) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.draining.Load() {
		return false
	}
	if t.detached == nil {
		t.detached = map[*exchange]struct{}{}
	}
	t.detached[x] = struct{}{}
	return true
}

// end ends x as callerGone does when the transport does not drain: the
// handler's context is cancelled, the caller reads err.
func (x *exchange) end(err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.endErr = err
	_ = x.pw.CloseWithError(err)
	x.cancel()
}

// ended is end's error, if the exchange was ended.
func (x *exchange) ended() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.endErr
}

// handOut gives the caller the body, unless it gave up meanwhile.
func (x *exchange) handOut() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.gone { // only its context can have ended yet
		return context.Cause(x.req.Context())
	}
	x.handedOut = true
	return nil
}

type body struct {
	*io.PipeReader
	leave context.CancelFunc
}

// keptBody is an answer served inline, whole: as an HTTP/2 response whose
// stream has ended, it is read to its end even after the caller's context
// ends (the data arrived before); not after Close, which gives its buffer
// back for another answer.
type keptBody struct {
	mu     sync.Mutex
	r      io.Reader
	answer *bytes.Buffer
	leave  context.CancelFunc
	closed bool
}

func (b *keptBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, io.ErrClosedPipe
	}
	return b.r.Read(p)
}

func (b *keptBody) Close() error {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		b.r = nil
		giveBackAnswer(b.answer)
	}
	b.mu.Unlock()
	b.leave()
	return nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func (b *body) Close() error {
	b.leave()
	return b.PipeReader.Close()
}

// bufferSize is how much of a body the handler writes before its reader
// gets it (unless the handler flushes, as watches do after each event).
// The API server encodes a list item by item: unbuffered, each item was a
// handoff between goroutines, and a list of 1,000 ConfigMaps was slower in
// process (7.0 ms p50) than over the network (6.0 ms), whose HTTP/2 writer
// buffers as well; buffered, 5.7 ms (BenchmarkClientList1000, one run of
// 50). 4 KiB as net/http's: the server's informers hold a watch each.
const bufferSize = 4 << 10

// bodyBuffer keeps what the handler writes until bufferSize bytes are
// waiting, a flush or the handler's end, as bufio.Writer would, but grows
// to what is written: most answers are a few hundred bytes, and bufio's
// 4 KiB up front was the loopback's largest allocation of a request.
type bodyBuffer struct {
	buf []byte
	dst io.Writer
}

func (b *bodyBuffer) Write(p []byte) (int, error) {
	if len(b.buf)+len(p) > bufferSize {
		if err := b.Flush(); err != nil {
			return 0, err
		}
		if len(p) >= bufferSize {
			return b.dst.Write(p)
		}
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *bodyBuffer) Buffered() int { return len(b.buf) }

// Flush writes what is kept; dst (a pipe) has taken all of it when Write
// returns, so the buffer is reused.
func (b *bodyBuffer) Flush() error {
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.dst.Write(b.buf)
	b.buf = b.buf[:0]
	return err
}

// inlineBody keeps a whole answer served inline. It is sealed when the
// handler returns: a write after that (by a goroutine the handler left
// behind) fails, as on a stream that has ended, and never reaches a buffer
// given back for another answer.
type inlineBody struct {
	mu     sync.Mutex
	buf    *bytes.Buffer
	sealed bool
}

var errAnswered = errors.New("inproc: the handler has returned")

func (b *inlineBody) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sealed {
		return 0, errAnswered
	}
	return b.buf.Write(p)
}

func (*inlineBody) Flush() error { return nil }

func (b *inlineBody) Buffered() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// seal ends the writes; the answer is what they wrote.
func (b *inlineBody) seal() *bytes.Buffer {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sealed = true
	return b.buf
}

// answers keep inline answers' buffers for the next answer once their
// caller has closed the body (client-go always does): a list of 1,000
// ConfigMaps copied its ~160 KB answer into a new buffer each time, a
// twentieth of what the list allocated in process.
var answers sync.Pool // of *bytes.Buffer

// maxKeptAnswer bounds a kept buffer (4 MiB).
const maxKeptAnswer = 4 << 20

func takeAnswer() *bytes.Buffer {
	if b, ok := answers.Get().(*bytes.Buffer); ok {
		return b
	}
	return &bytes.Buffer{}
}

// giveBackAnswer keeps b for another answer; nothing may read it after.
func giveBackAnswer(b *bytes.Buffer) {
	if b == nil || b.Cap() > maxKeptAnswer {
		return
	}
	b.Reset()
	answers.Put(b)
}

// responseWriter hands the status and headers to RoundTrip when the body
// first leaves its buffer (a flush, a full buffer, the handler's end), as
// HTTP/2's server sends its HEADERS frame, then streams the body through a
// buffer and a pipe.
type responseWriter struct {
	header http.Header
	body   interface {
		io.Writer
		Flush() error
		Buffered() int // bytes written and not flushed
	}

	once, sendOnce sync.Once
	headersSent    atomic.Bool
	ready          chan struct{}
	code           int
	sent           http.Header
	done           <-chan struct{}
}

func (w *responseWriter) Header() http.Header { return w.header }

// WriteHeader records the status, as HTTP/2's server does: an invalid code
// panics (the request is reset), an informational one (1xx) is not the
// final status and the loopback has no way to send it ahead.
func (w *responseWriter) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if code < 200 {
		return
	}
	w.writeHeader(code)
}

func (w *responseWriter) writeHeader(code int) {
	w.once.Do(func() {
		w.code = code
		w.sent = w.header.Clone()
		if _, ok := w.sent["Date"]; !ok { // as net/http's servers add it
			w.sent.Set("Date", time.Now().UTC().Format(http.TimeFormat))
		}
	})
}

// sendHeader hands the status and headers written to RoundTrip.
func (w *responseWriter) sendHeader() {
	w.sendOnce.Do(func() {
		w.headersSent.Store(true)
		close(w.ready)
	})
}

// lengthIfWhole sets Content-Length, at the handler's end, if the headers
// have not gone yet (no flush, the body within the buffer), as HTTP/2's
// server does when it sends its HEADERS frame after the handler returns.
func (w *responseWriter) lengthIfWhole(method string) {
	n := w.body.Buffered()
	if w.headersSent.Load() || n > bufferSize || !bodyAllowed(w.code) || n == 0 && method == http.MethodHead {
		return
	}
	if _, ok := w.sent["Content-Length"]; !ok {
		w.sent.Set("Content-Length", strconv.Itoa(n))
	}
}

// bodyAllowed reports whether an answer of status code may have a body.
func bodyAllowed(code int) bool {
	return code >= 200 && code != http.StatusNoContent && code != http.StatusNotModified
}

// headFirst is the body's way to the caller: the headers go first.
type headFirst struct {
	w  *responseWriter
	pw *io.PipeWriter
}

func (h headFirst) Write(p []byte) (int, error) {
	h.w.sendHeader()
	return h.pw.Write(p)
}

func (w *responseWriter) Write(p []byte) (int, error) {
	w.writeHeader(http.StatusOK)
	n, err := w.body.Write(p)
	if err != nil && w.gone() {
		// The caller went away: like a reset HTTP/2 stream whose handler
		// has not noticed yet, drop the data. The handler sees its context
		// cancelled next, unless the transport drains.
		return len(p), nil
	}
	return n, err
}

func (w *responseWriter) gone() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// Flush implements http.Flusher: what was written reaches the reader.
func (w *responseWriter) Flush() {
	w.writeHeader(http.StatusOK)
	_ = w.body.Flush()
	w.sendHeader()
}

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
