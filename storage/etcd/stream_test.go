package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"k8s.io/apimachinery/pkg/api/apitesting"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/apis/example"
	examplev1 "k8s.io/apiserver/pkg/apis/example/v1"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/etcd3/testserver"
	"k8s.io/utils/ptr"

	kestorage "github.com/kubeembed/apiserver/storage"
)

// A watch cache learns of writes made before the last cache's list although
// nothing writes to etcd after it: on a shared stream, the later cache's
// watch (from a revision etcd has not reached) kept etcd from answering
// the earlier cache's progress requests, and a watch-list of the earlier
// resource failed after the cache's 3 s wait (informers never synced on an
// idle etcd).
func TestWatchCacheFreshOnIdleEtcd(t *testing.T) {
	t.Parallel()
	client := testserver.RunEtcd(t, nil)
	b, err := New(t.Context(), Options{Servers: client.Endpoints(), Prefix: "/", CompactionInterval: -1, WatchCache: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	pods := cachedStore(t, b, "pods")
	_, err = b.client.KV.Put(t.Context(), "/unrelated", "written after the pods' cache listed")
	require.NoError(t, err)
	_ = cachedStore(t, b, "widgets") // lists after the write: watches from a revision etcd has not reached

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	w, err := pods.Watch(ctx, "/pods/", storage.ListOptions{
		SendInitialEvents: ptr.To(true), Recursive: true, Predicate: withBookmarks(),
	})
	require.NoError(t, err)
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		require.Equal(t, watch.Bookmark, ev.Type, "%v", ev.Object)
		m, err := meta.Accessor(ev.Object)
		require.NoError(t, err)
		require.Equal(t, "true", m.GetAnnotations()[metav1.InitialEventsAnnotationKey])
	case <-ctx.Done():
		t.Fatal("no event")
	}
}

// cachedStore returns a store of resource behind the watch cache, once the
// cache has listed.
func cachedStore(t *testing.T, b *Backend, resource string) storage.Interface {
	t.Helper()
	prefix := "/" + resource + "/"
	s, err := b.Store(kestorage.ResourceConfig{
		Codec:  apitesting.TestCodec(testScheme(), examplev1.SchemeGroupVersion),
		Prefix: "/registry", ResourcePrefix: prefix,
		GroupResource: schema.GroupResource{Resource: resource},
		NewFunc:       func() runtime.Object { return &example.Pod{} },
		NewListFunc:   func() runtime.Object { return &example.PodList{} },
		KeyFunc:       func(obj runtime.Object) (string, error) { return storage.NamespaceKeyFunc(prefix, obj) },
		AttrFunc:      storage.DefaultNamespaceScopedAttr,
	})
	require.NoError(t, err)
	// A list at resourceVersion 0 is served once the cache has listed.
	require.NoError(t, wait.PollUntilContextTimeout(t.Context(), time.Millisecond, time.Minute, true,
		func(ctx context.Context) (bool, error) {
			err := s.GetList(ctx, prefix, storage.ListOptions{
				ResourceVersion: "0", Recursive: true, Predicate: storage.Everything}, &example.PodList{})
			return err == nil, nil
		}))
	return s
}

func withBookmarks() storage.SelectionPredicate {
	p := storage.Everything
	p.AllowWatchBookmarks = true
	return p
}
