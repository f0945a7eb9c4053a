package memory

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/apis/example"
	"k8s.io/apiserver/pkg/storage"
)

// TestConcurrentGuaranteedUpdate: 64 writers each add 1000 to one counter
// with optimistic concurrency; no increment is lost, and a watcher sees every
// revision exactly once, in order. History is not compacted by count here:
// on a loaded machine (CI runs other packages beside it) the watcher fell
// more than 10,000 revisions behind the writers and got 410 Gone, which is
// right but not what this test is about.
func TestConcurrentGuaranteedUpdate(t *testing.T) {
	ctx, s := testSetup(t, withBackend(Options{HistoryRevisions: -1}))
	const writers, increments = 64, 1000
	key := "/pods/ns/counter"
	created := &example.Pod{}
	require.NoError(t, s.Create(ctx, key, &example.Pod{ObjectMeta: metav1.ObjectMeta{Name: "counter", Namespace: "ns",
		Annotations: map[string]string{"n": "0"}}}, created, 0))

	w, err := s.Watch(ctx, key, storage.ListOptions{ResourceVersion: created.ResourceVersion, Predicate: storage.Everything})
	require.NoError(t, err)
	defer w.Stop()
	seen := make(chan []int, 1)
	go func() {
		var values []int
		for ev := range w.ResultChan() {
			if ev.Type != watch.Modified {
				break
			}
			n, _ := strconv.Atoi(objectOf(ev).(*example.Pod).Annotations["n"])
			values = append(values, n)
			if n == writers*increments {
				break
			}
		}
		seen <- values
	}()

	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range increments {
				err := s.GuaranteedUpdate(ctx, key, &example.Pod{}, false, nil,
					storage.SimpleUpdate(func(obj runtime.Object) (runtime.Object, error) {
						p := obj.(*example.Pod)
						n, _ := strconv.Atoi(p.Annotations["n"])
						p.Annotations["n"] = strconv.Itoa(n + 1)
						return p, nil
					}), nil)
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	final := &example.Pod{}
	require.NoError(t, s.Get(ctx, key, storage.GetOptions{}, final))
	assert.Equal(t, strconv.Itoa(writers*increments), final.Annotations["n"])

	select {
	case values := <-seen:
		require.Len(t, values, writers*increments)
		for i, v := range values {
			if v != i+1 {
				t.Fatalf("watch event %d has value %d, want %d", i, v, i+1)
			}
		}
	case <-time.After(30 * time.Second):
		t.Fatal("watcher did not see every revision")
	}
}

// TestSlowWatcherDoesNotBlockWriters: a watcher that never reads does not slow
// down writes; once the history it needs is compacted it gets 410 Gone.
func TestSlowWatcherDoesNotBlockWriters(t *testing.T) {
	ctx, s := testSetup(t, withBackend(Options{HistoryRevisions: 100}))
	first := &example.Pod{}
	require.NoError(t, s.Create(ctx, "/pods/ns/p", &example.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}, first, 0))
	slow, err := s.Watch(ctx, "/pods/", storage.ListOptions{ResourceVersion: first.ResourceVersion, Recursive: true, Predicate: storage.Everything})
	require.NoError(t, err)
	defer slow.Stop()

	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 1000 {
			pod := &example.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "ns"}}
			if err := s.Create(ctx, "/pods/ns/"+pod.Name, pod, nil, 0); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("writes blocked behind a watcher that does not read")
	}
	require.Greater(t, s.CompactRevision(), int64(0), "history beyond the window was compacted")

	// Draining the watch: buffered events, then 410 because it fell behind.
	var last watch.Event
	for ev := range slow.ResultChan() {
		last = ev
	}
	require.Equal(t, watch.Error, last.Type)
	st := last.Object.(*metav1.Status)
	assert.Equal(t, int32(410), st.Code)
	assert.Equal(t, metav1.StatusReasonExpired, st.Reason)
}

func TestBadInput(t *testing.T) {
	ctx, s := testSetup(t)
	require.NoError(t, s.Create(ctx, "/pods/ns/a", &example.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}}, nil, 0))
	list := func(opts storage.ListOptions) error {
		opts.Recursive = true
		if opts.Predicate.Label == nil {
			opts.Predicate = storage.Everything
		}
		return s.GetList(ctx, "/pods/", opts, &example.PodList{})
	}
	withContinue := func(token string) storage.ListOptions {
		p := storage.Everything
		p.Limit, p.Continue = 1, token
		return storage.ListOptions{Predicate: p}
	}
	// A token minted for another resource stays confined to this prefix.
	foreign, err := storage.EncodeContinue("/secrets/ns/a\x00", "/secrets/", 2)
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		err   error
		check func(error) bool
	}{
		"garbage continue":    {list(withContinue("%%%")), apierrors.IsBadRequest},
		"not json continue":   {list(withContinue(base64.RawURLEncoding.EncodeToString([]byte("nope")))), apierrors.IsBadRequest},
		"path traversal":      {list(withContinue(mustContinue(t, `{"v":"meta.k8s.io/v1","rv":2,"start":"../secrets/"}`))), apierrors.IsBadRequest},
		"unknown version":     {list(withContinue(mustContinue(t, `{"v":"v9","rv":2,"start":"a"}`))), apierrors.IsBadRequest},
		"foreign continue":    {list(withContinue(foreign)), func(err error) bool { return err == nil }},
		"unparsable rv":       {list(storage.ListOptions{ResourceVersion: "abc"}), apierrors.IsBadRequest},
		"future rv":           {list(storage.ListOptions{ResourceVersion: "999", ResourceVersionMatch: metav1.ResourceVersionMatchExact}), storage.IsTooLargeResourceVersion},
		"key outside prefix":  {s.Get(ctx, "/secrets/ns/a", storage.GetOptions{}, &example.Pod{}), func(err error) bool { return err != nil }},
		"rv on create":        {s.Create(ctx, "/pods/ns/b", &example.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b", ResourceVersion: "7"}}, nil, 0), func(err error) bool { return err == storage.ErrResourceVersionSetOnCreate }},
		"impossible uid":      {s.Delete(ctx, "/pods/ns/a", &example.Pod{}, storage.NewUIDPreconditions("other"), storage.ValidateAllObjectFunc, nil, storage.DeleteOptions{}), storage.IsInvalidObj},
		"get unparsable rv":   {s.Get(ctx, "/pods/ns/a", storage.GetOptions{ResourceVersion: "x"}, &example.Pod{}), apierrors.IsBadRequest},
		"watch unparsable rv": {watchErr(s.Watch(ctx, "/pods/", storage.ListOptions{ResourceVersion: "x", Recursive: true, Predicate: storage.Everything})), func(err error) bool { return err != nil }},
	} {
		t.Run(name, func(t *testing.T) {
			assert.True(t, tc.check(tc.err), "unexpected error: %v", tc.err)
		})
	}
}

func mustContinue(t *testing.T, js string) string {
	t.Helper()
	return base64.RawURLEncoding.EncodeToString([]byte(js))
}

func watchErr(w watch.Interface, err error) error {
	if w != nil {
		w.Stop()
	}
	return err
}

func TestCompactErrors(t *testing.T) {
	ctx, s := testSetup(t)
	require.NoError(t, s.Create(ctx, "/pods/ns/a", &example.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}}, nil, 0))
	require.ErrorIs(t, s.b.Compact(100), ErrFutureRevision)
	require.NoError(t, s.b.Compact(2))
	require.ErrorIs(t, s.b.Compact(2), ErrCompacted)
}

func TestCloseStopsWatches(t *testing.T) {
	_, s := testSetup(t)
	w, err := s.Watch(context.Background(), "/pods/", storage.ListOptions{Recursive: true, Predicate: storage.Everything})
	require.NoError(t, err)
	require.NoError(t, s.b.Close())
	for range w.ResultChan() {
	}
	_, err = s.Watch(context.Background(), "/pods/", storage.ListOptions{Recursive: true, Predicate: storage.Everything})
	require.ErrorIs(t, err, ErrClosed)
}

// A watch "from now" (no resourceVersion) has the state of when Watch
// returned, not of when its goroutine first ran: an object created and
// deleted right after is in its events, as on kube-apiserver (issue 29:
// 1 in ~20 such watches saw nothing).
func TestWatchFromNowSeesWritesAfterItReturns(t *testing.T) {
	ctx, s := testSetup(t)
	for i := range 100 {
		key := fmt.Sprintf("/pods/ns/p%d", i)
		w, err := s.Watch(ctx, key, storage.ListOptions{Predicate: storage.Everything})
		require.NoError(t, err)
		require.NoError(t, s.Create(ctx, key, &example.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "ns"}}, nil, 0))
		require.NoError(t, s.Delete(ctx, key, &example.Pod{}, nil, storage.ValidateAllObjectFunc, nil, storage.DeleteOptions{}))
		var got []watch.EventType
		for len(got) < 2 {
			select {
			case ev := <-w.ResultChan():
				got = append(got, ev.Type)
			case <-time.After(10 * time.Second):
				t.Fatalf("watch %d: events %v, then nothing", i, got)
			}
		}
		assert.Equal(t, []watch.EventType{watch.Added, watch.Deleted}, got, "watch %d", i)
		w.Stop()
	}
}

// objectOf is the object of a watch event, as an encoder gets it: a change's
// new state is shared between a store's watches (shared.go).
func objectOf(ev watch.Event) runtime.Object {
	if co, ok := ev.Object.(runtime.CacheableObject); ok {
		return co.GetObject()
	}
	return ev.Object
}

// A list whose request has ended stops with the timeout etcd3's store
// gives, with no transformer too (the server's stores have none; the
// conformance suite's have one).
func TestListStopsWhenItsRequestEnded(t *testing.T) {
	ctx, s := testSetup(t, withTransformer(identity{}))
	for i := range 3 {
		p := benchPod(i)
		require.NoError(t, s.Create(ctx, "/pods/bench/"+p.Name, p, nil, 0))
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	list := &example.PodList{}
	err := s.GetList(ended, "/pods/bench", storage.ListOptions{Recursive: true, Predicate: storage.Everything}, list)
	assert.True(t, storage.IsRequestTimeout(err), "%v", err)
	assert.Empty(t, list.Items)
}
