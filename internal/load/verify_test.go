package load

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// The checks find what they are for: a write a watch missed, events out
// of order, a relist's gap forgiven, a final state that is not the last
// acknowledged write. (The runs against servers find nothing: this shows
// they could.)
func TestChecks(t *testing.T) {
	t.Parallel()
	l := newLedger()
	l.objs["a"] = &history{shard: 0, rvs: []uint64{5, 7}, last: 7, data: map[string]string{"v": "2"}, deleted: true}
	l.objs["b"] = &history{shard: 0, rvs: []uint64{6}, last: 6, data: map[string]string{"v": "1"}}
	watchOf := func(segs ...segment) *watcher { return &watcher{shard: 0, segments: segs} }
	ev := func(typ watch.EventType, name string, rv uint64) event { return event{typ, name, rv} }
	complete := watchOf(segment{from: 1, events: []event{ev(watch.Added, "a", 5), ev(watch.Added, "b", 6), ev(watch.Modified, "a", 7), ev(watch.Deleted, "a", 9)}})
	assert.Empty(t, checkWatches(l, []*watcher{complete}))

	missed := watchOf(segment{from: 1, events: []event{ev(watch.Added, "a", 5), ev(watch.Added, "b", 6), ev(watch.Deleted, "a", 9)}})
	assert.Equal(t, []string{"watch 0: no event for the write of a at rv 7 (acknowledged)"}, checkWatches(l, []*watcher{missed}))

	swapped := watchOf(segment{from: 1, events: []event{ev(watch.Added, "b", 6), ev(watch.Added, "a", 5), ev(watch.Modified, "a", 7), ev(watch.Deleted, "a", 9)}})
	assert.Equal(t, []string{"watch 0 segment 0: ADDED a at rv 5 after rv 6"}, checkWatches(l, []*watcher{swapped}))

	// 410 after rv 5: the relist at rv 8 lists b, not a (deleted in the gap).
	relisted := watchOf(segment{from: 1, events: []event{ev(watch.Added, "a", 5)}, gone: true},
		segment{from: 8, listed: map[string]uint64{"b": 6}})
	assert.Empty(t, checkWatches(l, []*watcher{relisted}))

	final := map[string]*corev1.ConfigMap{
		"a": {ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "7"}},
		"b": {ObjectMeta: metav1.ObjectMeta{Name: "b", ResourceVersion: "6"}, Data: map[string]string{"v": "0"}},
	}
	assert.ElementsMatch(t, []string{"a: deleted (acknowledged) but still there",
		"b: data map[v:0], its last acknowledged write had map[v:1]"}, checkFinal(l, final))
}
