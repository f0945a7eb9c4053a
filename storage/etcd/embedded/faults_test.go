package embedded_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kubeembed/apiserver/storage/etcd"
	"github.com/kubeembed/apiserver/storage/etcd/embedded"
)

// TestClusterFaults runs a server on a 3-member etcd cluster. With the
// leader killed mid-test, writes go on, a watch resumes and sees every
// write, none is lost. With every member down, requests fail with
// kube-apiserver's timeout status; when the members come back, so does the
// server.
func TestClusterFaults(t *testing.T) {
	t.Parallel()
	// Data directories of the test's: a member's own temporary one goes
	// with it, and these come back.
	opts := make([]embedded.Options, 3)
	for i := range opts {
		opts[i] = embedded.Options{DataDir: t.TempDir(), UnsafeNoFsync: true}
	}
	members, err := embedded.StartCluster(t.Context(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { closeAll(members) })
	var servers []string
	for _, m := range members {
		servers = append(servers, m.ClientURLs()...)
	}
	client := startOnEtcd(t, etcd.Options{Servers: servers})

	seen := watchNames(t, client)
	w := &writer{client: client}
	w.write(t, 50)
	leader := killLeader(t, members)
	w.write(t, 50)
	require.Equal(t, 100, w.acked(), "every write after the leader went acked")
	restarted, err := embedded.Start(t.Context(), members[leader].Options())
	require.NoError(t, err, "the member rejoins")
	members[leader] = restarted
	w.write(t, 20)
	w.requireAllStored(t, seen)

	closeAll(members)
	requireTimeoutStatus(t, client, w.next)

	members, err = embedded.StartCluster(t.Context(), optionsOf(members))
	require.NoError(t, err)
	w.write(t, 10)
	w.requireAllStored(t, seen)
}

// requireTimeoutStatus creates ConfigMaps while no etcd member is up, each
// with a request timeout for the server (kube-apiserver's is 60s) and none
// on the client, which waits for the server's answer, until one is a
// Status: kube-apiserver's 504 Timeout. Its timeout filter and the storage
// call end at the same deadline and race: when the filter answers first,
// the message is the filter's "allotted timeout"; when the handler does,
// its own "requested timeout - context deadline exceeded"; when the
// handler has started its answer but the filter is chosen, the filter
// resets the HTTP/2 stream (kube-apiserver's timeout.go does the same).
// Resets are asked again; under load they can be most answers.
func requireTimeoutStatus(t *testing.T, client kubernetes.Interface, next func() *corev1.ConfigMap) {
	const (
		allotted  = "Timeout: request did not complete within the allotted timeout"
		requested = "Timeout: request did not complete within requested timeout - context deadline exceeded"
	)
	deadline := time.Now().Add(45 * time.Second)
	resets := 0
	for {
		body, err := client.CoreV1().RESTClient().Post().Namespace("default").Resource("configmaps").
			Param("timeout", "1s").Body(next()).DoRaw(t.Context())
		if strings.Contains(fmt.Sprint(err), "INTERNAL_ERROR; received from peer") && time.Now().Before(deadline) {
			resets++
			continue
		}
		require.True(t, apierrors.IsTimeout(err), "%v (after %d reset streams)", err, resets)
		var status metav1.Status
		require.NoError(t, json.Unmarshal(body, &status))
		t.Logf("504 %q after %d reset streams", status.Message, resets)
		assert.Contains(t, []string{allotted, requested}, status.Message)
		// The handler's own answer names its kind (Status, v1), the
		// filter's does not (CI saw both, as kube-apiserver answers both).
		status.Message, status.TypeMeta = "", metav1.TypeMeta{}
		assert.Equal(t, metav1.Status{Status: metav1.StatusFailure, Code: 504, Reason: metav1.StatusReasonTimeout,
			Details: &metav1.StatusDetails{}}, status)
		return
	}
}

// writer creates ConfigMaps one after another and remembers those created.
type writer struct {
	client kubernetes.Interface
	n      int
	names  []string
}

func (w *writer) next() *corev1.ConfigMap {
	w.n++
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w-%04d", w.n)}}
}

// write creates n, each retried until acked (a write in flight when a
// member dies may fail; what is acked must stay).
func (w *writer) write(t *testing.T, n int) {
	for range n {
		cm := w.next()
		err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := w.client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
			return err == nil || apierrors.IsAlreadyExists(err), nil
		})
		require.NoError(t, err, "create %s", cm.Name)
		w.names = append(w.names, cm.Name)
	}
}

func (w *writer) acked() int { return len(w.names) }

// requireAllStored checks that every acked write is stored and was seen by
// the watch.
func (w *writer) requireAllStored(t *testing.T, seen *names) {
	list, err := w.client.CoreV1().ConfigMaps("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	stored := map[string]bool{}
	for _, cm := range list.Items {
		stored[cm.Name] = true
	}
	for _, n := range w.names {
		require.True(t, stored[n], "acked write %s is stored", n)
	}
	require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, time.Minute, true,
		func(context.Context) (bool, error) { return seen.hasAll(w.names), nil }), "the watch saw every write")
}

// names are those a watch saw added.
type names struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (n *names) hasAll(want []string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, w := range want {
		if !n.seen[w] {
			return false
		}
	}
	return true
}

// watchNames watches ConfigMaps in default, resuming from the last
// resourceVersion seen whenever the watch ends (client-go's RetryWatcher).
func watchNames(t *testing.T, client kubernetes.Interface) *names {
	list, err := client.CoreV1().ConfigMaps("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	rw, err := watchtools.NewRetryWatcherWithContext(t.Context(), list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.CoreV1().ConfigMaps("default").Watch(ctx, o)
		}})
	require.NoError(t, err)
	t.Cleanup(rw.Stop)
	n := &names{seen: map[string]bool{}}
	go func() {
		for ev := range rw.ResultChan() {
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type == watch.Added {
				n.mu.Lock()
				n.seen[cm.Name] = true
				n.mu.Unlock()
			}
		}
	}()
	return n
}

// killLeader stops the member leading the cluster and returns its index.
func killLeader(t *testing.T, members []*embedded.Server) int {
	for i, m := range members {
		if m.IsLeader() {
			require.NoError(t, m.Close())
			return i
		}
	}
	t.Fatal("no leader")
	return -1
}

// closeAll stops the members at once (one by one, the last ones wait for
// a quorum that is gone).
func closeAll(members []*embedded.Server) {
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Go(func() { _ = m.Close() })
	}
	wg.Wait()
}

func optionsOf(members []*embedded.Server) []embedded.Options {
	out := make([]embedded.Options, len(members))
	for i, m := range members {
		out[i] = m.Options()
	}
	return out
}
