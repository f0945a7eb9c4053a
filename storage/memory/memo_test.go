package memory

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/apis/example"
	"k8s.io/apiserver/pkg/storage"
)

// TestReadsShareNoObject: a version read again is copied from what the
// store decoded before (memo), so a caller that changes what it read (as
// every update does) must not change what the next reader gets, through
// Get, GuaranteedUpdate or a watch. A list's items share their maps and
// slices, as the watch cache's do in kube-apiserver, but not their fields.
func TestReadsShareNoObject(t *testing.T) {
	t.Parallel()
	ctx, s := testSetup(t)
	key := "/pods/ns/p"
	created := &example.Pod{}
	require.NoError(t, s.Create(ctx, key, &example.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns",
		Labels: map[string]string{"a": "1"}}}, created, 0))

	for i := range 3 { // the first decode keeps nothing, the second keeps it, the third copies it
		got := &example.Pod{}
		require.NoError(t, s.Get(ctx, key, storage.GetOptions{}, got))
		require.Equal(t, map[string]string{"a": "1"}, got.Labels, "get %d", i)
		require.Equal(t, created.ResourceVersion, got.ResourceVersion)
		got.Labels["a"] = "changed by a reader"
		got.Labels["b"] = "added by a reader"

		list := &example.PodList{}
		require.NoError(t, s.GetList(ctx, "/pods/", storage.ListOptions{Predicate: storage.Everything, Recursive: true}, list))
		require.Len(t, list.Items, 1)
		require.Equal(t, map[string]string{"a": "1"}, list.Items[0].Labels, "list %d", i)
		require.Equal(t, created.ResourceVersion, list.Items[0].ResourceVersion)
		require.Equal(t, "p", list.Items[0].Name)
		list.Items[0].Name, list.Items[0].ResourceVersion = "renamed by a lister", "1"
	}

	// An update starts from a copy: its change is what is stored.
	updated := &example.Pod{}
	require.NoError(t, s.GuaranteedUpdate(ctx, key, updated, false, nil,
		storage.SimpleUpdate(func(obj runtime.Object) (runtime.Object, error) {
			p := obj.(*example.Pod)
			assert.Equal(t, map[string]string{"a": "1"}, p.Labels)
			p.Labels["a"] = "2"
			return p, nil
		}), nil))

	// Two watches from before the update see the same change, one object
	// shared between them, from which each reader gets its own copy.
	var objs []*example.Pod
	var sent []runtime.Object
	for range 2 {
		w, err := s.Watch(ctx, key, storage.ListOptions{ResourceVersion: created.ResourceVersion, Predicate: storage.Everything})
		require.NoError(t, err)
		defer w.Stop()
		ev := <-w.ResultChan()
		require.Equal(t, watch.Modified, ev.Type, "%v", ev.Object)
		sent = append(sent, ev.Object)
		p := objectOf(ev).(*example.Pod)
		assert.Equal(t, map[string]string{"a": "2"}, p.Labels)
		assert.Equal(t, updated.ResourceVersion, p.ResourceVersion)
		objs = append(objs, p)
	}
	assert.Same(t, sent[0], sent[1])
	objs[0].Labels["a"] = "changed by a watcher"
	assert.Equal(t, "2", objs[1].Labels["a"])
	got := &example.Pod{}
	require.NoError(t, s.Get(ctx, key, storage.GetOptions{}, got))
	assert.Equal(t, map[string]string{"a": "2"}, got.Labels)
}
