package apiserver_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/testing/apiservertest"
	"github.com/kubeembed/apiserver/timing"
)

// The watch guarantees kube-apiserver gives, held on every timing a server
// can run with: its own, etcd's, and shaken (a fixed seed, so that a
// failure replays). Timing moves when events arrive, never which or in
// what order.
var guaranteeTimings = []struct {
	name    string
	profile timing.Profile
}{
	{"default", timing.Profile{}},
	{"etcd", timing.Etcd()},
	{"shake", timing.Shake(29)},
}

func forEachTiming(t *testing.T, test func(t *testing.T, c kubernetes.Interface)) {
	for _, tm := range guaranteeTimings {
		t.Run(tm.name, func(t *testing.T) {
			t.Parallel()
			srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{
				Profile: apiserver.ProfileEnvtest, Timing: tm.profile}))
			c, err := srv.Clientset()
			require.NoError(t, err)
			test(t, c)
		})
	}
}

// nextEvent is the watch's next event, failing the test after 10 s.
func nextEvent(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		require.True(t, ok, "the watch ended")
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event in 10 s")
		return watch.Event{}
	}
}

// collect reads n events of w while the test writes, as a client that
// keeps up does (a watch whose client stops reading is ended by the
// server, kube-apiserver's too); wait returns them, failing the test if
// the watch ended or stalled for 10 s first.
func collect(t *testing.T, w watch.Interface, n int) (wait func() []watch.Event) {
	done := make(chan struct{})
	var events []watch.Event
	var problem string
	go func() {
		defer close(done)
		for len(events) < n {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					problem = fmt.Sprintf("the watch ended after %d events", len(events))
					return
				}
				events = append(events, ev)
			case <-time.After(10 * time.Second):
				problem = fmt.Sprintf("no event in 10 s after %d", len(events))
				return
			}
		}
	}()
	return func() []watch.Event {
		t.Helper()
		<-done
		require.Empty(t, problem)
		return events
	}
}

func rvOf(t *testing.T, ev watch.Event) uint64 {
	t.Helper()
	m, err := meta.Accessor(ev.Object)
	require.NoError(t, err)
	rv, err := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
	require.NoError(t, err)
	return rv
}

// 200 updates of one object as fast as a client sends them are 200
// MODIFIED events, each with the update's own data, in the order written:
// no event is merged into the next, as kube-apiserver's watch on etcd.
func TestWatchDeliversEveryWriteOfAnObject(t *testing.T) {
	t.Parallel()
	forEachTiming(t, func(t *testing.T, c kubernetes.Interface) {
		ctx := t.Context()
		cms := c.CoreV1().ConfigMaps("default")
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "rapid"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: cm.ResourceVersion, FieldSelector: "metadata.name=rapid"})
		require.NoError(t, err)
		defer w.Stop()
		const n = 200
		events := collect(t, w, n)
		for i := range n {
			patch := fmt.Sprintf(`{"data":{"n":"%d"}}`, i)
			_, err := cms.Patch(ctx, "rapid", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			require.NoError(t, err)
		}
		last := uint64(0)
		for i, ev := range events() {
			require.Equal(t, watch.Modified, ev.Type, "event %d", i)
			assert.Equal(t, strconv.Itoa(i), ev.Object.(*corev1.ConfigMap).Data["n"], "event %d is update %d", i, i)
			rv := rvOf(t, ev)
			require.Greater(t, rv, last, "event %d's resourceVersion", i)
			last = rv
		}
	})
}

// Writes to many objects from many clients at once arrive on one watch,
// every one of them, in resourceVersion order.
func TestWatchOrdersManyObjectsByResourceVersion(t *testing.T) {
	t.Parallel()
	forEachTiming(t, func(t *testing.T, c kubernetes.Interface) {
		ctx := t.Context()
		cms := c.CoreV1().ConfigMaps("default")
		list, err := cms.List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		require.NoError(t, err)
		defer w.Stop()
		const writers, writes = 10, 10
		events := collect(t, w, writers*writes)
		written := concurrentWrites(t, ctx, cms, writers, writes)
		last := uint64(0)
		seen := map[uint64]bool{}
		for i, ev := range events() {
			rv := rvOf(t, ev)
			require.Greater(t, rv, last, "event %d's resourceVersion", i)
			last, seen[rv] = rv, true
		}
		assert.Equal(t, written, seen, "one event per write, at the write's resourceVersion")
	})
}

// concurrentWrites has writers clients each create an object and update it
// writes-1 times, all at once; it returns the resourceVersion of each write.
func concurrentWrites(t *testing.T, ctx context.Context, cms interface {
	Create(context.Context, *corev1.ConfigMap, metav1.CreateOptions) (*corev1.ConfigMap, error)
	Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*corev1.ConfigMap, error)
}, writers, writes int) map[uint64]bool {
	t.Helper()
	var mu sync.Mutex
	written := map[uint64]bool{}
	note := func(cm *corev1.ConfigMap) {
		rv, _ := strconv.ParseUint(cm.ResourceVersion, 10, 64)
		mu.Lock()
		defer mu.Unlock()
		written[rv] = true
	}
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			name := fmt.Sprintf("many-%d", g)
			cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			if !assert.NoError(t, err) {
				return
			}
			note(cm)
			for i := 1; i < writes; i++ {
				cm, err := cms.Patch(ctx, name, types.MergePatchType, fmt.Appendf(nil, `{"data":{"i":"%d"}}`, i), metav1.PatchOptions{})
				if !assert.NoError(t, err) {
					return
				}
				note(cm)
			}
		})
	}
	wg.Wait()
	require.Len(t, written, writers*writes)
	return written
}

// Deleting an unscheduled pod is two writes, as on kube-apiserver: the
// pod gets its deletionTimestamp (MODIFIED), then goes (DELETED). An object
// with a finalizer stops at the first until its finalizer is removed.
func TestGracefulDeletionIsModifiedThenDeleted(t *testing.T) {
	t.Parallel()
	forEachTiming(t, func(t *testing.T, c kubernetes.Interface) {
		ctx := t.Context()
		pods := c.CoreV1().Pods("default")
		pod, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "unscheduled"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: pod.ResourceVersion, FieldSelector: "metadata.name=unscheduled"})
		require.NoError(t, err)
		defer w.Stop()
		require.NoError(t, pods.Delete(ctx, "unscheduled", metav1.DeleteOptions{}))
		modified, deleted := nextEvent(t, w), nextEvent(t, w)
		require.Equal(t, watch.Modified, modified.Type)
		assert.NotNil(t, modified.Object.(*corev1.Pod).DeletionTimestamp, "MODIFIED sets deletionTimestamp")
		require.Equal(t, watch.Deleted, deleted.Type)
		assert.Greater(t, rvOf(t, deleted), rvOf(t, modified))

		cms := c.CoreV1().ConfigMaps("default")
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"example.com/hold"}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		cw, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: cm.ResourceVersion, FieldSelector: "metadata.name=held"})
		require.NoError(t, err)
		defer cw.Stop()
		require.NoError(t, cms.Delete(ctx, "held", metav1.DeleteOptions{}))
		held := nextEvent(t, cw)
		require.Equal(t, watch.Modified, held.Type)
		require.NotNil(t, held.Object.(*corev1.ConfigMap).DeletionTimestamp)
		_, err = cms.Patch(ctx, "held", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
		require.NoError(t, err)
		assert.Equal(t, watch.Deleted, nextEvent(t, cw).Type, "removing the last finalizer deletes, with no MODIFIED before")
	})
}
