package controller

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
)

// The hashes were computed with upstream's history.HashControllerRevision
// (k8s.io/kubernetes v1.37.2).
func TestRevisionHashIsUpstreams(t *testing.T) {
	data := []byte(`{"spec":{"template":{"$patch":"replace"}}}`)
	zero, seven := int32(0), int32(7)
	for _, c := range []struct {
		raw   []byte
		count *int32
		want  string
	}{
		{data, nil, "5c7586484"}, {data, &zero, "589f85db5b"}, {data, &seven, "589f85db67"},
		{nil, nil, "65bb57b6b5"}, {nil, &zero, "d8bfb7bc"}, {nil, &seven, "d8bfb7b4"},
	} {
		if got := RevisionHash(c.raw, c.count); got != c.want {
			t.Errorf("RevisionHash(%s, %v) = %s, want %s", c.raw, c.count, got, c.want)
		}
	}
}

func testParent() *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "set-uid"}}
}

func TestNewRevision(t *testing.T) {
	zero := int32(0)
	r := NewRevision(testParent(), appsv1.SchemeGroupVersion.WithKind("StatefulSet"), map[string]string{"app": "web"},
		[]byte(`{"spec":{"template":{"$patch":"replace"}}}`), 3, &zero)
	if r.Name != "web-589f85db5b" || r.Labels[RevisionHashLabel] != "589f85db5b" || r.Labels["app"] != "web" || r.Revision != 3 {
		t.Fatalf("revision %s labels %v revision %d", r.Name, r.Labels, r.Revision)
	}
	ref := metav1.GetControllerOf(r)
	if ref == nil || ref.UID != "set-uid" || ref.Kind != "StatefulSet" || ref.APIVersion != "apps/v1" {
		t.Fatalf("controller ref %+v", ref)
	}
	if long := RevisionName(string(make([]byte, 300)), "h"); len(long) != 225 {
		t.Fatalf("long name of %d bytes", len(long))
	}
}

func TestSortAndEqualRevisions(t *testing.T) {
	now := metav1.Now()
	later := metav1.NewTime(now.Add(time.Second))
	rev := func(name string, n int64, at metav1.Time, data string) *appsv1.ControllerRevision {
		r := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: at}, Revision: n}
		r.Data.Raw = []byte(data)
		return r
	}
	revs := []*appsv1.ControllerRevision{rev("d", 2, now, "x"), rev("c", 1, later, "y"), rev("b", 1, now, "x"), rev("a", 1, now, "z")}
	SortRevisions(revs)
	var names string
	for _, r := range revs {
		names += r.Name
	}
	if names != "abcd" || MaxRevision(revs) != 2 {
		t.Fatalf("sorted %s, max %d", names, MaxRevision(revs))
	}
	eq := FindEqualRevisions(revs, rev("n", 9, now, "x"))
	if len(eq) != 2 || eq[0].Name != "b" || eq[1].Name != "d" || !EqualRevision(nil, nil) || EqualRevision(revs[0], nil) {
		t.Fatalf("equal revisions %v", eq)
	}
}

func TestHistoryCreateCollides(t *testing.T) {
	ctx := context.Background()
	parent := testParent()
	kind := appsv1.SchemeGroupVersion.WithKind("StatefulSet")
	var count int32
	want := NewRevision(parent, kind, nil, []byte(`{"a":1}`), 1, &count)
	// A revision of other data already has the name the first try takes.
	taken := want.DeepCopy()
	taken.Namespace, taken.Data.Raw = "ns", []byte(`{"b":2}`)
	client := fake.NewClientset(taken)
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	h := History{Client: client, Lister: appslisters.NewControllerRevisionLister(indexer)}

	got, err := h.Create(ctx, parent, want, &count)
	if err != nil {
		t.Fatal(err)
	}
	if count != 1 || got.Name != "web-"+RevisionHash([]byte(`{"a":1}`), &count) {
		t.Fatalf("created %s with collision count %d", got.Name, count)
	}
	// The same data again returns the existing revision.
	again, err := h.Create(ctx, parent, want, &count)
	if err != nil || again.Name != got.Name || count != 1 {
		t.Fatalf("second create %v, %v, count %d", again, err, count)
	}
	updated, err := h.UpdateRevision(ctx, got, 5)
	if err != nil || updated.Revision != 5 {
		t.Fatalf("update: %v %v", updated, err)
	}
	if err := h.Delete(ctx, taken); err != nil {
		t.Fatal(err)
	}
}

func TestHistoryListAdoptRelease(t *testing.T) {
	ctx := context.Background()
	parent := testParent()
	kind := appsv1.SchemeGroupVersion.WithKind("StatefulSet")
	mine := NewRevision(parent, kind, map[string]string{"app": "web"}, []byte("1"), 1, nil)
	orphan := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: "ns", UID: "o", Labels: map[string]string{"app": "web"}}}
	other := NewRevision(&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "x", UID: "x"}}, kind, map[string]string{"app": "web"}, []byte("2"), 1, nil)
	unmatched := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", Labels: map[string]string{"app": "db"}}}
	mine.Namespace, other.Namespace = "ns", "ns"
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, r := range []*appsv1.ControllerRevision{mine, orphan, other, unmatched} {
		if err := indexer.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	client := fake.NewClientset(mine, orphan, other, unmatched)
	h := History{Client: client, Lister: appslisters.NewControllerRevisionLister(indexer)}
	got, err := h.List(parent, labels.SelectorFromSet(labels.Set{"app": "web"}))
	if err != nil || len(got) != 2 {
		t.Fatalf("listed %d: %v", len(got), err)
	}
	if _, err := h.Adopt(ctx, parent, kind, mine); err == nil {
		t.Fatal("adopted a revision with a controller")
	}
	adopted, err := h.Adopt(ctx, parent, kind, orphan)
	if err != nil || metav1.GetControllerOf(adopted) == nil || metav1.GetControllerOf(adopted).UID != "set-uid" {
		t.Fatalf("adopt: %v %v", adopted, err)
	}
	released, err := h.Release(ctx, parent, adopted)
	if err != nil || len(released.OwnerReferences) != 0 {
		t.Fatalf("release: %v %v", released, err)
	}
}
