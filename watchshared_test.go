package apiserver_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/storage/memory"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// seenEvent is what a test compares of a watch event, whatever its encoding.
type seenEvent struct {
	Type            watch.EventType
	ResourceVersion string
	Labels          map[string]string
	Data            string // "" for metadata
}

// The watches of a resource share each event's object and its encodings
// (storage/memory's shared.go, as kube-apiserver's watch cache): every
// watch still gets its own events in its own encoding, at once.
func TestWatchesOfOneEventInEveryEncoding(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	// kube-root-ca.crt is published by then (a server on etcd is new, not
	// yet idle): the watches see only the test's ConfigMap.
	apiservertest.WaitIdle(t, srv)
	ctx := context.Background()
	admin, err := srv.Clientset()
	require.NoError(t, err)
	cms := admin.CoreV1().ConfigMaps("default")
	start, err := cms.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	from := metav1.ListOptions{ResourceVersion: start.ResourceVersion}
	selected := metav1.ListOptions{ResourceVersion: start.ResourceVersion, LabelSelector: "a=1"}

	watches := map[string]watch.Interface{}
	for _, ct := range []string{runtime.ContentTypeProtobuf, runtime.ContentTypeJSON, runtime.ContentTypeCBOR} {
		for i, opts := range []metav1.ListOptions{from, from, selected} {
			w, err := typedClient(t, srv.InProcessRESTConfig(), ct).CoreV1().ConfigMaps("default").Watch(ctx, opts)
			require.NoError(t, err)
			watches[ct+[]string{"/all", "/all again", "/a=1"}[i]] = w
		}
	}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	dw, err := dynamic.NewForConfigOrDie(srv.InProcessRESTConfig()).Resource(gvr).Namespace("default").Watch(ctx, from)
	require.NoError(t, err)
	watches["unstructured"] = dw
	mw, err := metadata.NewForConfigOrDie(srv.RESTConfig()).Resource(gvr).Namespace("default").Watch(ctx, from)
	require.NoError(t, err)
	watches["metadata, network"] = mw

	created, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shared", Labels: map[string]string{"a": "1"}},
		Data: map[string]string{"k": "v1"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	created.Data["k"] = "v2"
	updated, err := cms.Update(ctx, created, metav1.UpdateOptions{})
	require.NoError(t, err)
	updated.Labels["a"] = "2"
	relabelled, err := cms.Update(ctx, updated, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, cms.Delete(ctx, "shared", metav1.DeleteOptions{}))

	all := []seenEvent{
		{watch.Added, created.ResourceVersion, map[string]string{"a": "1"}, "v1"},
		{watch.Modified, updated.ResourceVersion, map[string]string{"a": "1"}, "v2"},
		{watch.Modified, relabelled.ResourceVersion, map[string]string{"a": "2"}, "v2"},
	}
	// Moved out of the selector: DELETED with the state before, at the
	// revision of the change.
	want := map[string][]seenEvent{"a=1": {all[0], all[1], {watch.Deleted, relabelled.ResourceVersion, map[string]string{"a": "1"}, "v2"}}}
	// Every watch reads at once, as a server's informers do; the events
	// are checked once all are read (FailNow only on the test's goroutine).
	var wg sync.WaitGroup
	var mu sync.Mutex
	read := map[string][]watch.Event{}
	for name, w := range watches {
		wg.Go(func() {
			defer w.Stop()
			n := 4
			if name[len(name)-3:] == "a=1" {
				n = 3
			}
			var evs []watch.Event
			timeout := time.After(10 * time.Second)
			for len(evs) < n {
				select {
				case ev := <-w.ResultChan():
					evs = append(evs, ev)
				case <-timeout:
					n = 0
				}
			}
			mu.Lock()
			read[name] = evs
			mu.Unlock()
		})
	}
	wg.Wait()
	got := map[string][]seenEvent{}
	for name, evs := range read {
		for _, ev := range evs {
			got[name] = append(got[name], seenOf(t, ev))
		}
	}
	require.Len(t, got[runtime.ContentTypeProtobuf+"/all"], 4)
	deletedAt := got[runtime.ContentTypeProtobuf+"/all"][3].ResourceVersion
	for name, seen := range got {
		exp := append(append([]seenEvent(nil), all...), seenEvent{watch.Deleted, deletedAt, map[string]string{"a": "2"}, "v2"})
		if name[len(name)-3:] == "a=1" {
			exp = want["a=1"]
		}
		if name == "metadata, network" {
			for i := range exp {
				exp[i].Data = ""
			}
		}
		assert.Equal(t, exp, seen, name)
	}
	assert.Len(t, got, len(watches))
}

func typedClient(t *testing.T, cfg *rest.Config, contentType string) kubernetes.Interface {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = contentType
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return c
}

func seenOf(t *testing.T, ev watch.Event) seenEvent {
	t.Helper()
	switch o := ev.Object.(type) {
	case *corev1.ConfigMap:
		return seenEvent{ev.Type, o.ResourceVersion, o.Labels, o.Data["k"]}
	case *metav1.PartialObjectMetadata:
		return seenEvent{ev.Type, o.ResourceVersion, o.Labels, ""}
	case interface {
		GetResourceVersion() string
		GetLabels() map[string]string
		UnstructuredContent() map[string]any
	}:
		data, _ := o.UnstructuredContent()["data"].(map[string]any)
		k, _ := data["k"].(string)
		return seenEvent{ev.Type, o.GetResourceVersion(), o.GetLabels(), k}
	}
	t.Fatalf("a %s event of a %T", ev.Type, ev.Object)
	return seenEvent{}
}

// A watch is woken only by the writes it watches (storage/memory's
// wake.go); one that waits while others write so much that the history
// from where it waits is compacted goes on, and gets its next event, as
// when every write woke it. (With the history compacted under a watch
// that had lost its place, it would end with 410 Gone.)
func TestQuietWatchOutlivesCompaction(t *testing.T) {
	t.Parallel()
	backend := memory.NewBackend(memory.Options{HistoryRevisions: 100})
	t.Cleanup(func() { _ = backend.Close() })
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Storage: backend}))
	c, err := srv.Clientset()
	require.NoError(t, err)
	ctx := t.Context()
	start, err := c.CoreV1().ConfigMaps("quiet").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	w, err := c.CoreV1().ConfigMaps("quiet").Watch(ctx, metav1.ListOptions{ResourceVersion: start.ResourceVersion})
	require.NoError(t, err)
	defer w.Stop()
	// The watch has read up to its first event once the event is here;
	// it then waits (quiet) while 300 writes of other keys come and the
	// history from its place is compacted (kept: 100 to 200 revisions).
	_, err = c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "quiet"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.CoreV1().ConfigMaps("quiet").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for ev := nextEvent(t, w); ev.Object.(*corev1.ConfigMap).Name != "before"; ev = nextEvent(t, w) {
	}
	for i := range 300 {
		_, err := c.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("s-", i)}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	created, err := c.CoreV1().ConfigMaps("quiet").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// Events of kube-root-ca.crt (the controllers publish it in a new
	// namespace) may come first; none is an error.
	ev := nextEvent(t, w)
	for ; ev.Type == watch.Added && ev.Object.(*corev1.ConfigMap).Name != "after"; ev = nextEvent(t, w) {
	}
	require.Equal(t, watch.Added, ev.Type, "%v", ev.Object)
	assert.Equal(t, created.ResourceVersion, ev.Object.(*corev1.ConfigMap).ResourceVersion)
	// A watch from before the compaction still gets 410 Gone.
	gone, err := c.CoreV1().ConfigMaps("quiet").Watch(ctx, metav1.ListOptions{ResourceVersion: start.ResourceVersion})
	require.NoError(t, err)
	defer gone.Stop()
	ev = nextEvent(t, gone)
	require.Equal(t, watch.Error, ev.Type)
	assert.Equal(t, int32(http.StatusGone), apierrors.FromObject(ev.Object).(apierrors.APIStatus).Status().Code)
}
