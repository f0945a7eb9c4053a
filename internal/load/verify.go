package load

import (
	"fmt"
	"maps"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// maxProblems bounds the findings reported per check.
const maxProblems = 20

type findings struct{ list []string }

func (f *findings) add(format string, args ...any) {
	if len(f.list) == maxProblems {
		f.list = append(f.list, "(more not shown)")
	}
	if len(f.list) < maxProblems {
		f.list = append(f.list, fmt.Sprintf(format, args...))
	}
}

// checkWatches checks each watch against the ledger: in each segment the
// events come in increasing resourceVersion; every acknowledged write of
// its shard that a segment covers is an event of it (a create an ADDED),
// every acknowledged delete a DELETED (or the object is missing from a
// later relist); no event is of a write that was not acknowledged, unless
// the object had a write of unknown outcome; nothing follows a DELETED.
func checkWatches(l *ledger, ws []*watcher) []string {
	var f findings
	for _, w := range ws {
		checkOrder(&f, w)
		seen := map[string][]event{}
		for _, s := range w.segments {
			for _, e := range s.events {
				seen[e.name] = append(seen[e.name], e)
			}
		}
		for name, h := range l.objs {
			if h.shard == w.shard {
				checkObject(&f, w, name, h, seen[name])
			}
			delete(seen, name)
		}
		for name := range seen {
			f.add("watch %d: events of %s, never written", w.id, name)
		}
	}
	return f.list
}

func checkOrder(f *findings, w *watcher) {
	for i, s := range w.segments {
		prev := s.from
		for _, e := range s.events {
			if e.rv <= prev {
				f.add("watch %d segment %d: %s %s at rv %d after rv %d", w.id, i, e.typ, e.name, e.rv, prev)
			}
			prev = e.rv
		}
	}
}

func checkObject(f *findings, w *watcher, name string, h *history, seen []event) {
	acked := slices.Sorted(slices.Values(h.rvs))
	got := map[uint64]watch.EventType{}
	deleted := false
	for _, e := range seen {
		switch {
		case deleted:
			f.add("watch %d: %s %s at rv %d after its DELETED", w.id, e.typ, name, e.rv)
		case e.typ == watch.Deleted:
			deleted = true
			if !h.deleted && !h.uncertain {
				f.add("watch %d: DELETED %s at rv %d, a delete never acknowledged", w.id, name, e.rv)
			}
		case !slices.Contains(acked, e.rv) && !h.uncertain:
			f.add("watch %d: %s %s at rv %d, a write never acknowledged", w.id, e.typ, name, e.rv)
		}
		got[e.rv] = e.typ
	}
	for i, v := range acked {
		typ, ok := got[v]
		switch {
		case !w.covers(v):
		case !ok:
			f.add("watch %d: no event for the write of %s at rv %d (acknowledged)", w.id, name, v)
		case i == 0 && typ != watch.Added:
			f.add("watch %d: the create of %s at rv %d came as %s", w.id, name, v, typ)
		}
	}
	if h.deleted && !deleted && !w.relistedWithout(name) {
		f.add("watch %d: no DELETED for %s (the delete was acknowledged)", w.id, name)
	}
}

// covers reports whether a segment of w was responsible for an event at
// resourceVersion v: not one in the gap before a relist.
func (w *watcher) covers(v uint64) bool {
	for _, s := range w.segments {
		end := uint64(math.MaxUint64)
		if s.gone {
			end = s.from
			if n := len(s.events); n > 0 {
				end = s.events[n-1].rv
			}
		}
		if v > s.from && v <= end {
			return true
		}
	}
	return false
}

// relistedWithout reports whether a relist of w did not list name: its
// deletion may have fallen in the gap.
func (w *watcher) relistedWithout(name string) bool {
	for _, s := range w.segments[1:] {
		if _, ok := s.listed[name]; !ok {
			return true
		}
	}
	return false
}

// checkFinal checks the objects listed after the run against the ledger:
// a deleted one is gone, any other is there with its last acknowledged
// write (resourceVersion and data), and nothing else is there. Objects a
// write of unknown outcome touched are only counted.
func checkFinal(l *ledger, final map[string]*corev1.ConfigMap) []string {
	var f findings
	for name, h := range l.objs {
		cm, ok := final[name]
		delete(final, name)
		switch {
		case h.uncertain:
		case h.deleted && ok:
			f.add("%s: deleted (acknowledged) but still there", name)
		case h.deleted:
		case !ok:
			f.add("%s: written at rv %d (acknowledged) but missing", name, h.last)
		case rv(cm.ResourceVersion) != h.last:
			f.add("%s: at rv %s, its last acknowledged write was rv %d", name, cm.ResourceVersion, h.last)
		case !maps.Equal(cm.Data, h.data):
			f.add("%s: data %v, its last acknowledged write had %v", name, cm.Data, h.data)
		}
	}
	for name, cm := range final {
		if _, ours := cm.Labels[shardLabel]; ours { // not the cluster's own (kube-root-ca.crt)
			f.add("%s: there, never written", name)
		}
	}
	return f.list
}
