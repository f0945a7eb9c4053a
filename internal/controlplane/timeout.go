package controlplane

// The request timeout of the handler chain, without a goroutine per request.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/endpoints/responsewriter"
)

// withTimeout answers a request that is not long-running, and whose
// context ends (its deadline, set by WithRequestDeadline from the timeout
// parameter, or the client gone) while its handler runs, as
// k8s.io/apiserver's WithTimeoutForNonLongRunningRequests does: a 504
// Status "request did not complete within the allotted timeout" if the
// handler has not answered yet, a reset stream if it has; the handler's
// later writes fail with http.ErrHandlerTimeout.
//
// Upstream runs every handler in a goroutine of its own to answer at the
// deadline while the handler goes on: a goroutine per request whose stack
// grows through the whole chain, a quarter of a GET's time in process
// (BENCHMARKS.md). Here the handler runs in the request's goroutine and
// the answer is written from context.AfterFunc, whose goroutine exists only
// for a request that timed out. What differs is only when the client has
// the whole answer to a handler that goes on past its deadline, ignoring
// its context: the 504 is written at the deadline, but the stream ends
// when the handler returns (every handler of the server's stops at its
// context's end: storage, webhooks, the finisher of writes, Faults' delays).
func withTimeout(h http.Handler, longRunning request.LongRunningRequestCheck) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, ok := request.RequestInfoFrom(r.Context())
		if !ok { // the chain is built wrong, as upstream answers it
			responsewriters.InternalError(w, r, errors.New("no request info found for request during timeout"))
			return
		}
		if longRunning(r, info) {
			h.ServeHTTP(w, r)
			return
		}
		tw := &timeoutWriter{w: w, header: w.Header().Clone(), done: make(chan struct{})}
		stop := context.AfterFunc(r.Context(), tw.timeout)
		defer func() {
			if !stop() { // timed out: recovered here, as upstream's filter does
				tw.afterTimeout(recover())
			} // else a panic goes on up the chain, to WithPanicRecovery's 500
		}()
		h.ServeHTTP(responsewriter.WrapForHTTP1Or2(tw), r)
	})
}

// afterTimeout ends a request whose context ended while its handler ran
// (panicked is what the handler's panic was, if it panicked). Stopping the
// timeout before a panic goes on matters: the filters that the panic
// unwinds end the request's context (WithRequestDeadline's cancel), which
// must not turn the chain's 500 into a 504. After the timeout the client
// has its answer, and a panic is only logged, as upstream's filter does.
func (tw *timeoutWriter) afterTimeout(panicked any) {
	<-tw.done
	if panicked != nil && panicked != http.ErrAbortHandler {
		utilruntime.HandleError(fmt.Errorf("the handler panicked after its request timed out: %v", panicked))
	}
	if tw.answered {
		// Answered before the timeout: the client must not take
		// what it has for the whole answer.
		panic(http.ErrAbortHandler)
	}
}

// timeoutWriter passes the handler's answer on until the request times
// out, then answers the timeout if the handler had not answered.
type timeoutWriter struct {
	w      http.ResponseWriter
	header http.Header // the handler's, until it answers
	done   chan struct{}

	mu       sync.Mutex
	timedOut bool
	wrote    bool // the handler's status is written
	hijacked bool
	answered bool // the handler had answered when the request timed out
}

func (tw *timeoutWriter) Unwrap() http.ResponseWriter { return tw.w }

func (tw *timeoutWriter) Header() http.Header {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.timedOut {
		return http.Header{}
	}
	return tw.header
}

func (tw *timeoutWriter) WriteHeader(code int) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.timedOut || tw.wrote || tw.hijacked {
		return
	}
	tw.sendHeader()
	tw.w.WriteHeader(code)
}

// sendHeader hands the handler's headers to the writer; tw.mu is held.
func (tw *timeoutWriter) sendHeader() {
	for k, v := range tw.header {
		tw.w.Header()[k] = v
	}
	tw.wrote = true
}

func (tw *timeoutWriter) Write(p []byte) (int, error) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	switch {
	case tw.timedOut:
		return 0, http.ErrHandlerTimeout
	case tw.hijacked:
		return 0, http.ErrHijacked
	case !tw.wrote:
		tw.sendHeader()
	}
	return tw.w.Write(p)
}

func (tw *timeoutWriter) Flush() {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if !tw.timedOut {
		tw.w.(http.Flusher).Flush()
	}
}

//nolint:staticcheck // the interface is deprecated but still asserted upstream
func (tw *timeoutWriter) CloseNotify() <-chan bool {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.timedOut {
		closed := make(chan bool)
		close(closed)
		return closed
	}
	return tw.w.(http.CloseNotifier).CloseNotify()
}

func (tw *timeoutWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.timedOut {
		return nil, nil, http.ErrHandlerTimeout
	}
	conn, rw, err := tw.w.(http.Hijacker).Hijack()
	tw.hijacked = err == nil
	return conn, rw, err
}

// timeout ends the handler's answer: kube-apiserver's 504 if it had not
// answered (its Status without kind, as upstream's filter writes it).
func (tw *timeoutWriter) timeout() {
	defer close(tw.done)
	tw.mu.Lock()
	defer tw.mu.Unlock()
	tw.timedOut = true
	if tw.wrote || tw.hijacked {
		tw.answered = true
		return
	}
	status := apierrors.NewTimeoutError("request did not complete within the allotted timeout", 0).ErrStatus
	tw.w.WriteHeader(http.StatusGatewayTimeout)
	_ = json.NewEncoder(tw.w).Encode(&status)
	if f, ok := tw.w.(http.Flusher); ok {
		f.Flush()
	}
}
