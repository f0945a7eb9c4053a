package listener_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubeembed/apiserver/internal/leaktest"
	"github.com/kubeembed/apiserver/internal/listener"
)

// serve serves h, tracked, on a loopback listener until the test ends.
func serve(t *testing.T, h http.Handler) (*listener.Tracking, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	tl := listener.New(ln)
	srv := &http.Server{Handler: tl.Track(h)}
	go func() { _ = srv.Serve(tl) }()
	t.Cleanup(func() { _ = srv.Close() })
	return tl, "http://" + ln.Addr().String()
}

// A request is in flight until its handler returns; a watch is counted
// apart, so waiting for requests does not wait for watches.
func TestTrackCountsRequestsAndWatchesApart(t *testing.T) {
	t.Parallel()
	entered, release := make(chan string, 2), make(chan struct{})
	tl, url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- r.URL.String()
		<-release
	}))
	assert.True(t, tl.WaitIdle(time.Second), "idle before any request")
	assert.True(t, tl.WaitWatches(time.Second))

	done := make(chan error, 2)
	for _, path := range []string{"/api/v1/pods", "/api/v1/pods?watch=true"} {
		go func() {
			resp, err := http.Get(url + path)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
			done <- err
		}()
		<-entered
	}
	assert.False(t, tl.WaitIdle(10*time.Millisecond), "a request is in flight")
	assert.False(t, tl.WaitWatches(10*time.Millisecond), "a watch is in flight")
	assert.ElementsMatch(t, []string{"GET /api/v1/pods", "GET /api/v1/pods?watch=true"}, tl.InFlight())

	close(release)
	require.NoError(t, <-done)
	require.NoError(t, <-done)
	assert.True(t, tl.WaitIdle(5*time.Second))
	assert.True(t, tl.WaitWatches(5*time.Second))
	assert.Empty(t, tl.InFlight())
}

// CloseConns ends open connections, a watch's among them, and refuses the
// connections accepted after it.
func TestCloseConnsEndsConnectionsAndRefusesNewOnes(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{}, 1)
	tl, url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		entered <- struct{}{}
		<-r.Context().Done() // a watch: runs until its connection ends
	}))
	client := &http.Client{Transport: &http.Transport{}}
	resp, err := client.Get(url + "/api/v1/pods?watch=1")
	require.NoError(t, err)
	defer resp.Body.Close()
	<-entered

	tl.CloseConns()
	_, err = io.Copy(io.Discard, resp.Body)
	require.Error(t, err, "the watch's connection is closed under it") // unexpected EOF
	assert.True(t, tl.WaitWatches(5*time.Second))

	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	_, err = fresh.Get(url + "/api/v1/pods")
	assert.Error(t, err, "a connection accepted while closing is closed at once")
}

// EndRequests ends the request in flight (its context, and its HTTP/1
// connection, busy) and keeps an idle connection: its client's next
// request goes on it.
func TestEndRequestsKeepsIdleConnections(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{}, 1)
	tl, url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "" {
			return
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		entered <- struct{}{}
		<-r.Context().Done()
	}))
	transport := &http.Transport{}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport}
	get := func() (reused bool) {
		trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused }}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodGet, url+"/version", nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
		return reused
	}
	get() // one idle connection
	watcher := &http.Transport{}
	defer watcher.CloseIdleConnections()
	watch, err := (&http.Client{Transport: watcher}).Get(url + "/api/v1/pods?watch=1")
	require.NoError(t, err)
	defer watch.Body.Close()
	<-entered

	tl.EndRequests()
	_, _ = io.Copy(io.Discard, watch.Body) // ends
	assert.True(t, tl.WaitWatches(5*time.Second), "the watch ended")
	assert.True(t, get(), "the idle connection is still open and used")
}

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }
