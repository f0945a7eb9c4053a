package etcd

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/apis/example"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/etcd3/testserver"
)

// Close returns although a burst of events fills a watch cache's queue as
// it closes: the cacher's reflector blocked for ever sending to its stopped
// dispatcher, and Close in Cacher.Stop (CI's etcd stage: a test's cleanup
// deleted its prefix and closed the backend). A watcher of the cache that
// reads nothing slows the dispatcher down, as a busy server's watchers do.
func TestCloseAfterABurstOfEvents(t *testing.T) {
	t.Parallel()
	client := testserver.RunEtcd(t, nil)
	for i := range 4 {
		b, err := New(t.Context(), Options{Servers: client.Endpoints(), Prefix: fmt.Sprintf("/burst-%d", i),
			CompactionInterval: -1, WatchCache: true})
		require.NoError(t, err)
		pods := cachedStore(t, b, "pods")
		for j := range 400 {
			pod := &example.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", j), Namespace: "ns"}}
			require.NoError(t, pods.Create(t.Context(), "/pods/ns/"+pod.Name, pod, &example.Pod{}, 0))
		}
		w, err := pods.Watch(t.Context(), "/pods/", storage.ListOptions{Recursive: true, Predicate: storage.Everything})
		require.NoError(t, err)
		_, err = b.client.KV.Delete(t.Context(), fmt.Sprintf("/burst-%d/", i), clientv3.WithPrefix())
		require.NoError(t, err)
		closed := make(chan error)
		go func() { closed <- b.Close() }()
		select {
		case err := <-closed:
			require.NoError(t, err)
		case <-time.After(time.Minute):
			t.Fatalf("Close of backend %d has not returned in a minute", i)
		}
		w.Stop()
	}
}
