package embedded_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/internal/leaktest"
	"github.com/kubeembed/apiserver/storage/etcd"
	"github.com/kubeembed/apiserver/storage/etcd/embedded"
)

// startAndClose runs a server on an embedded etcd (with the watch cache),
// writes and watches, and closes both.
func startAndClose(t *testing.T) {
	b, err := embedded.NewBackend(t.Context(), embedded.Options{UnsafeNoFsync: true}, etcd.Options{WatchCache: true})
	require.NoError(t, err)
	srv, err := apiserver.New(apiserver.Options{Storage: b})
	require.NoError(t, err)
	require.NoError(t, srv.Start(t.Context()))
	c, err := srv.Clientset()
	require.NoError(t, err)
	w, err := c.CoreV1().ConfigMaps("default").Watch(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	_, err = c.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	<-w.ResultChan()
	require.NoError(t, srv.Close())
	w.Stop()
	require.NoError(t, b.Close())
}

// TestNoGoroutineLeakAfterClose checks that closing the server and then the
// backend ends every goroutine they started: the etcd client's, the watch
// caches', the compactor's and the embedded etcd server's. A first round
// starts the libraries' process-wide goroutines; the check is on a second.
//
// Serial on purpose: goleak looks at every goroutine of the process.
func TestNoGoroutineLeakAfterClose(t *testing.T) {
	startAndClose(t)
	before := leaktest.IgnoreCurrent(t)
	startAndClose(t)
	leaktest.VerifyNone(t, before,
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
		// The watch cache wakes a waiting read after at most 3s from a
		// goroutine of its own, which ends then whatever happened.
		goleak.IgnoreTopFunction("k8s.io/apiserver/pkg/storage/cacher.(*watchCache).waitUntilFreshLocked.func2"),
	)
}
