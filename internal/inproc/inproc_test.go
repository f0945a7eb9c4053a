package inproc

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubeembed/apiserver/internal/leaktest"
)

// modes are the two ways a transport serves a request: on a worker, its
// answer streamed, or inline on its caller's goroutine (here every request
// but a watch), its answer kept whole.
func modes() map[string]func() *Transport {
	return map[string]func() *Transport{
		"worker": func() *Transport { return &Transport{} },
		"inline": func() *Transport {
			tr := &Transport{}
			tr.SetInline(func(r *http.Request) bool { return r.URL.Query().Get("watch") != "true" })
			return tr
		},
	}
}

func TestStreamsAndCancelsOnClose(t *testing.T) {
	handlerDone := make(chan error, 1)
	tr := &Transport{}
	tr.SetHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Test", "yes")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // a watch waits for events until cancelled
		handlerDone <- r.Context().Err()
	}))
	client := &http.Client{Transport: tr}
	resp, err := client.Get("https://server.invalid/stream")
	require.NoError(t, err)
	assert.Equal(t, http.StatusAccepted, resp.StatusCode)
	assert.Equal(t, "yes", resp.Header.Get("X-Test"))
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "first\n", line, "data arrives before the handler returns")

	require.NoError(t, resp.Body.Close())
	select {
	case err := <-handlerDone:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("closing the body did not cancel the handler")
	}
}

// Requests made before the handler is set wait for it (the server's own
// controllers start while it is being built), or fail when the transport
// is closed first or their context ends.
func TestNoHandlerYet(t *testing.T) {
	tr := &Transport{}
	done := make(chan error, 1)
	go func() {
		resp, err := (&http.Client{Transport: tr}).Get("https://server.invalid/")
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	tr.SetHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	require.NoError(t, <-done)

	closed := &Transport{}
	go func() { _, err := (&http.Client{Transport: closed}).Get("https://server.invalid/"); done <- err }()
	closed.Close()
	require.ErrorIs(t, <-done, ErrClosed)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://server.invalid/", nil)
	require.NoError(t, err)
	_, err = (&http.Client{Transport: &Transport{}}).Do(req)
	require.ErrorIs(t, err, context.Canceled)
}

// A caller that gives up ends the handler's context, as a reset stream
// does; while the transport drains, a request other than a watch runs to
// its end instead, until Abandon; after Close no request reaches the
// handler.
func TestDrain(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	ended := make(chan error, 3)
	tr := &Transport{}
	tr.SetHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		ended <- r.Context().Err()
		w.WriteHeader(http.StatusOK)
	}))
	giveUp := func(url string) {
		ctx, cancel := context.WithCancel(t.Context())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { _, err := tr.RoundTrip(req); done <- err }()
		cancel()
		require.ErrorIs(t, <-done, context.Canceled, "the caller returns at once")
	}

	giveUp("https://server.invalid/api/v1/configmaps")
	require.ErrorIs(t, <-ended, context.Canceled, "not draining: the handler is cancelled")

	tr.Drain()
	giveUp("https://server.invalid/api/v1/configmaps?watch=true")
	require.ErrorIs(t, <-ended, context.Canceled, "a watch is cancelled while draining too")
	giveUp("https://server.invalid/api/v1/configmaps")
	select {
	case err := <-ended:
		t.Fatalf("a request was cut off while draining: %v", err)
	default:
	}
	close(release)
	require.NoError(t, <-ended, "it runs to its end")

	release = make(chan struct{})
	giveUp("https://server.invalid/api/v1/configmaps")
	tr.Abandon()
	require.ErrorIs(t, <-ended, context.Canceled, "Abandon ends what the drain left running")

	tr.Close()
	_, err := (&http.Client{Transport: tr}).Get("https://server.invalid/")
	require.ErrorIs(t, err, ErrClosed)
}

// A caller that gives up while reading the body reads its context's error,
// as from net/http; while the transport drains it reads the whole answer.
func TestGiveUpWhileReading(t *testing.T) {
	t.Parallel()
	for _, drain := range []bool{false, true} {
		tr := &Transport{}
		release := make(chan struct{})
		tr.SetHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "head\n")
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
			}
			_, _ = io.WriteString(w, "tail\n")
		}))
		if drain {
			tr.Drain()
		}
		ctx, cancel := context.WithCancel(t.Context())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://server.invalid/api/v1/configmaps", nil)
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		cancel()
		if drain {
			close(release) // else the handler ends with its context
		}
		data, err := io.ReadAll(resp.Body)
		if drain {
			require.NoError(t, err)
			assert.Equal(t, "head\ntail\n", string(data))
		} else {
			require.ErrorIs(t, err, context.Canceled)
		}
		require.NoError(t, resp.Body.Close())
	}
}

// Cut ends the requests in flight as a closed connection does: a caller
// with the body reads io.ErrUnexpectedEOF, one still waiting for the
// answer gets it from RoundTrip, the handlers' contexts end, and later
// requests fail.
func TestCut(t *testing.T) {
	t.Parallel()
	for mode, newTransport := range modes() {
		t.Run(mode, func(t *testing.T) {
			tr := newTransport()
			ended, entered := make(chan error, 2), make(chan struct{}, 2)
			tr.SetHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Query().Get("watch") == "true" {
					w.WriteHeader(http.StatusOK)
					w.(http.Flusher).Flush()
				}
				entered <- struct{}{}
				<-r.Context().Done()
				ended <- r.Context().Err()
			}))
			client := &http.Client{Transport: tr}
			resp, err := client.Get("https://server.invalid/api/v1/configmaps?watch=true")
			require.NoError(t, err)
			defer resp.Body.Close()
			waiting := make(chan error, 1)
			go func() {
				_, err := client.Get("https://server.invalid/api/v1/configmaps")
				waiting <- err
			}()
			<-entered
			<-entered

			tr.Cut()
			_, err = io.ReadAll(resp.Body)
			require.ErrorIs(t, err, io.ErrUnexpectedEOF)
			require.ErrorIs(t, <-waiting, io.ErrUnexpectedEOF)
			for range 2 {
				require.ErrorIs(t, <-ended, context.Canceled)
			}
			_, err = client.Get("https://server.invalid/")
			require.ErrorIs(t, err, ErrClosed)
		})
	}
}

// WithTLS serves through its transport with the TLS state on the request.
func TestWithTLS(t *testing.T) {
	t.Parallel()
	for mode, newTransport := range modes() {
		t.Run(mode, func(t *testing.T) {
			tr := newTransport()
			tr.SetHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.TLS != nil {
					_, _ = io.WriteString(w, r.TLS.NegotiatedProtocol)
				}
			}))
			rt := tr.WithTLS(&tls.ConnectionState{HandshakeComplete: true, NegotiatedProtocol: "h2"})
			assert.True(t, tr.Owns(rt))
			assert.True(t, tr.Owns(tr))
			assert.False(t, tr.Owns(&Transport{}))
			assert.False(t, tr.Owns(nil))
			for rt, want := range map[http.RoundTripper]string{rt: "h2", tr: ""} {
				resp, err := (&http.Client{Transport: rt}).Get("https://server.invalid/")
				require.NoError(t, err)
				data, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				assert.Equal(t, want, string(data))
				require.NoError(t, resp.Body.Close())
			}
		})
	}
}

// A draining transport does not let its callers retry: an answer asking
// to (the 429 or 503 of a server shutting down, with Retry-After) fails
// with ErrClosed, or client-go would retry for up to 10 s while the server
// closes.
func TestDrainRefusesRetries(t *testing.T) {
	for mode, newTransport := range modes() {
		t.Run(mode, func(t *testing.T) {
			tr := newTransport()
			served := make(chan struct{}, 2)
			tr.SetHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				defer func() { served <- struct{}{} }()
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
				w.(http.Flusher).Flush()
				// More than the buffer: with nobody reading, these writes must
				// fail, not block the handler (a goroutine left behind at Close).
				_, _ = w.Write(make([]byte, 3*bufferSize))
			}))
			client := &http.Client{Transport: tr}
			resp, err := client.Get("https://server.invalid/")
			require.NoError(t, err, "not draining: the answer is the client's")
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
			<-served
			tr.Drain()
			_, err = client.Get("https://server.invalid/")
			require.ErrorIs(t, err, ErrClosed)
			select {
			case <-served:
			case <-time.After(10 * time.Second):
				t.Fatal("the handler of a refused answer is still writing")
			}
		})
	}
}

// A handler that aborts (panics with http.ErrAbortHandler, as a reset
// HTTP/2 stream) fails the request before its answer and the body's read
// after it, never an empty 200.
// A handler that panics, with http.ErrAbortHandler or anything else, ends
// the request as HTTP/2's server resets the stream: before a flush, the
// caller gets no answer (an answer written but not flushed, such as the
// panic filter's 500, is not sent); after one, its read of the body fails.
func TestHandlerAbort(t *testing.T) {
	t.Parallel()
	for mode, newTransport := range modes() {
		for _, p := range []any{http.ErrAbortHandler, "boom"} {
			testHandlerAbort(t, mode, newTransport(), p)
		}
	}
}

func testHandlerAbort(t *testing.T, mode string, tr *Transport, p any) {
	{
		tr.SetHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("partial"))
			if r.URL.Path == "/after" {
				w.(http.Flusher).Flush()
			}
			panic(p)
		}))
		_, err := (&http.Client{Transport: tr}).Get("https://server.invalid/before")
		require.ErrorIs(t, err, ErrAborted, mode, p)
		if p == "boom" {
			assert.ErrorContains(t, err, "the handler panicked: boom", mode)
		}
		resp, err := (&http.Client{Transport: tr}).Get("https://server.invalid/after")
		require.NoError(t, err, mode, p)
		body, err := io.ReadAll(resp.Body)
		assert.ErrorIs(t, err, ErrAborted, mode, p)
		assert.Equal(t, "partial", string(body), mode, p)
		tr.Close()
	}
}

// A handler that flushed its headers, with no body yet, then panicked was
// answered: its caller gets the response and reads the reset from the body,
// every time (RoundTrip could see the panic's mark before the headers).
func TestFlushedThenAborted(t *testing.T) {
	t.Parallel()
	for mode, newTransport := range modes() {
		t.Run(mode, func(t *testing.T) {
			tr := newTransport()
			defer tr.Close()
			tr.SetHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusAccepted)
				w.(http.Flusher).Flush()
				panic("boom")
			}))
			client := &http.Client{Transport: tr}
			for range 500 {
				resp, err := client.Get("https://server.invalid/")
				require.NoError(t, err)
				assert.Equal(t, http.StatusAccepted, resp.StatusCode)
				_, err = io.ReadAll(resp.Body)
				require.ErrorIs(t, err, ErrAborted)
				require.NoError(t, resp.Body.Close())
			}
		})
	}
}

// An informational status (103 Early Hints, as a proxied backend may send)
// is not the answer's status, as over HTTP/2; an invalid one resets the
// request, as net/http's servers panic on it.
func TestInformationalStatus(t *testing.T) {
	t.Parallel()
	for mode, newTransport := range modes() {
		t.Run(mode, func(t *testing.T) {
			tr := newTransport()
			defer tr.Close()
			tr.SetHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/invalid" {
					w.WriteHeader(42)
				}
				w.WriteHeader(http.StatusEarlyHints)
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write([]byte("made"))
			}))
			client := &http.Client{Transport: tr}
			resp, err := client.Get("https://server.invalid/")
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, http.StatusCreated, resp.StatusCode)
			assert.Equal(t, "made", string(body))
			_, err = client.Get("https://server.invalid/invalid")
			assert.ErrorIs(t, err, ErrAborted)
		})
	}
}

// Requests run on workers that serve one after another and end at Close.
// Not parallel: goleak sees every goroutine of the process, and the
// parallel tests wait while this one runs.
func TestWorkersEndAtClose(t *testing.T) {
	defer leaktest.VerifyNone(t, leaktest.IgnoreCurrent(t))
	tr := &Transport{}
	tr.SetHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(r.URL.Path)) }))
	client := &http.Client{Transport: tr}
	for i := range 50 {
		resp, err := client.Get(fmt.Sprintf("https://server.invalid/%d", i))
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		assert.Equal(t, fmt.Sprintf("/%d", i), string(body))
	}
	tr.Close()
}

// Served inline, a request whose caller gives up ends its handler's
// context and fails with the caller's error, as on a worker; while the
// transport drains, the handler runs to its end (the caller waits for it:
// it runs on its goroutine), then the caller gets its error. An answer
// kept whole is read whole after the caller's context ends, as an HTTP/2
// stream that has ended.
func TestInlineGiveUp(t *testing.T) {
	t.Parallel()
	tr := modes()["inline"]()
	release, ended, entered := make(chan struct{}), make(chan error, 1), make(chan struct{}, 1)
	tr.SetHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/answer" {
			_, _ = io.WriteString(w, "whole")
			return
		}
		entered <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		ended <- r.Context().Err()
	}))
	for _, drain := range []bool{false, true} {
		if drain {
			tr.Drain()
		}
		ctx, cancel := context.WithCancel(t.Context())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://server.invalid/wait", nil)
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { _, err := tr.RoundTrip(req); done <- err }()
		<-entered
		cancel()
		if drain {
			close(release)
			require.NoError(t, <-ended, "draining: the handler runs to its end")
		} else {
			require.ErrorIs(t, <-ended, context.Canceled)
		}
		require.ErrorIs(t, <-done, context.Canceled)
	}

	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://server.invalid/answer", nil)
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	cancel()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "whole", string(data))
	require.NoError(t, resp.Body.Close())
	_, err = resp.Body.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.ErrClosedPipe)
}

// Only a request whose body its caller cannot still be writing (none, or
// one with GetBody: a body in memory, as client-go's) is served inline; a
// streamed body, or a request short says is not, goes to a worker.
func TestInlinedRequests(t *testing.T) {
	t.Parallel()
	tr := modes()["inline"]()
	get, err := http.NewRequest(http.MethodGet, "https://server.invalid/", nil)
	require.NoError(t, err)
	post, err := http.NewRequest(http.MethodPost, "https://server.invalid/", strings.NewReader("{}"))
	require.NoError(t, err)
	pr, _ := io.Pipe()
	streamed, err := http.NewRequest(http.MethodPost, "https://server.invalid/", pr)
	require.NoError(t, err)
	watch, err := http.NewRequest(http.MethodGet, "https://server.invalid/?watch=true", nil)
	require.NoError(t, err)
	assert.True(t, tr.inlined(get))
	assert.True(t, tr.inlined(post))
	assert.False(t, tr.inlined(streamed))
	assert.False(t, tr.inlined(watch))
	assert.False(t, (&Transport{}).inlined(get), "no SetInline: never")
}

// Content-Length is set as HTTP/2's server sets it: for an answer whose
// headers go at the handler's end (not flushed, within the buffer), when
// its status allows a body.
func TestContentLength(t *testing.T) {
	t.Parallel()
	for mode, newTransport := range modes() {
		tr := newTransport()
		tr.SetHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/empty":
				w.WriteHeader(http.StatusNoContent)
				return
			case "/flushed":
				w.(http.Flusher).Flush()
			case "/long":
				_, _ = w.Write(make([]byte, bufferSize+1))
				return
			}
			_, _ = io.WriteString(w, "short")
		}))
		for path, want := range map[string]int64{"/short": 5, "/flushed": -1, "/long": -1, "/empty": -1} {
			resp, err := (&http.Client{Transport: tr}).Get("https://server.invalid" + path)
			require.NoError(t, err, mode, path)
			_, err = io.Copy(io.Discard, resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			assert.Equal(t, want, resp.ContentLength, mode, path)
			if want >= 0 {
				assert.Equal(t, fmt.Sprint(want), resp.Header.Get("Content-Length"), mode, path)
			} else {
				assert.Empty(t, resp.Header.Values("Content-Length"), mode, path)
			}
		}
		tr.Close()
	}
}

// A caller that gives up gets its own error inline, as on a worker and from
// net/http, even when the handler then aborts (the chain's timeout aborts
// a handler whose context ends after it answered).
func TestInlineGiveUpBeforeAbort(t *testing.T) {
	t.Parallel()
	tr := modes()["inline"]()
	entered := make(chan struct{})
	tr.SetHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		close(entered)
		<-r.Context().Done()
		panic(http.ErrAbortHandler)
	}))
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://server.invalid/", nil)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { _, err := tr.RoundTrip(req); done <- err }()
	<-entered
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}

// A write into an inline answer after its handler returned (from a
// goroutine the handler left behind) fails, as on an ended stream: the
// answer's buffer, given back once its caller closed the body, serves the
// next answer, which must not get the late write.
func TestInlineAnswerSealedWhenTheHandlerReturns(t *testing.T) {
	tr := modes()["inline"]()
	left := make(chan http.ResponseWriter, 1)
	lateWrite := make(chan error, 1)
	tr.SetHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/first" {
			left <- w // kept past the handler's return
			_, _ = io.WriteString(w, "first")
			return
		}
		_, err := io.WriteString(<-left, "LATE")
		lateWrite <- err
		_, _ = io.WriteString(w, "second")
	}))
	client := &http.Client{Transport: tr}
	get := func(path string) string {
		resp, err := client.Get("https://server.invalid" + path)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return string(b)
	}
	assert.Equal(t, "first", get("/first"))
	assert.Equal(t, "second", get("/second"))
	// Dropped (the first caller is gone, as a reset stream's write) or
	// refused: never written.
	if err := <-lateWrite; err != nil {
		assert.ErrorIs(t, err, errAnswered)
	}
	_, err := (&keptBody{answer: nil, leave: func() {}, closed: true}).Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.ErrClosedPipe, "a closed body is not read")
}
