package memory

import (
	"reflect"
	"sync/atomic"
	"weak"

	"k8s.io/apimachinery/pkg/runtime"
)

// memo keeps one stored version decoded, so that a version read again (a
// list that is repeated, an object got again) is copied instead of decoded:
// a copy costs a fraction of a decode, whose every string and map is a new
// allocation (a list of 1,000 ConfigMaps took ~40% less time).
//
// A version's bytes never change, so its decoded object does not either; the
// object kept is a copy no caller holds, and every reader gets a copy of it.
// Only a store's reads keep one, on a version's second decode: a version
// read once costs no memory. Watches reuse a kept object but do not keep
// one: a server's informers read every object through watches, which would
// otherwise keep a second copy of everything an idle server stores (heap
// per server +1.5 MiB, measured; +0 as it is). Each store decodes with its
// own codec (two resources may share keys: core and events.k8s.io Events),
// so the object is kept with the store that decoded it and only that store
// reuses it.
//
// The transformer still runs on every read: it decides whether the bytes
// can be read at all (a removed encryption key) and whether they are stale.
type memo struct {
	seen atomic.Bool
	kept atomic.Pointer[memoized]
	// watched is the object the watches of a store send for the version
	// (shared.go), while one of them holds it.
	watched atomic.Pointer[weak.Pointer[shared]]
}

type memoized struct {
	owner *store
	obj   runtime.Object
}

// recall returns a copy of the object s decoded from m's version, or nil.
// The caller sets its resourceVersion.
func (s *store) recall(m *memo) runtime.Object {
	if m == nil {
		return nil
	}
	if k := m.kept.Load(); k != nil && k.owner == s {
		return k.obj.DeepCopyObject()
	}
	return nil
}

// recallInto copies the object s decoded from m's version into out, if s
// kept one of out's type, and reports whether it did. Unless deep, the copy
// is of the top-level struct only: its maps, slices and pointers are the
// kept object's, as the items of a list from kube-apiserver's watch cache
// share them with the cache (what reads a list encodes it; nothing changes
// it). An Unstructured is always copied deep: its metadata is in its map.
func (s *store) recallInto(m *memo, out runtime.Object, deep bool) bool {
	if m == nil {
		return false
	}
	k := m.kept.Load()
	if k == nil || k.owner != s || reflect.TypeOf(k.obj) != reflect.TypeOf(out) {
		return false
	}
	obj := k.obj
	if _, unstructured := obj.(runtime.Unstructured); deep || unstructured {
		obj = obj.DeepCopyObject()
	}
	reflect.ValueOf(out).Elem().Set(reflect.ValueOf(obj).Elem())
	return true
}

// remember keeps a copy of obj, just decoded by s from m's version, when
// the version has been decoded before.
func (s *store) remember(m *memo, obj runtime.Object) {
	if m != nil && m.seen.Swap(true) {
		m.kept.Store(&memoized{owner: s, obj: obj.DeepCopyObject()})
	}
}
