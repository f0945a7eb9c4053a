package apiserver_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

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
