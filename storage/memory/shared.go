package memory

import (
	"io"
	"reflect"
	"sync"
	"weak"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// shared is a version's object as the watches of one store send it: decoded
// once, whatever the number of watches, and encoded once per encoding
// (protobuf, JSON, as metadata), as kube-apiserver's watch cache sends its
// events (its cachingObject). Without it, every watch of a resource decoded
// each event, and the handler of every watch converted and encoded it.
//
// The object is never changed: what reads it (a watch's selector, the
// handler's encoders through CacheEncode) reads it or a copy. It lives while
// a watch holds an event of it; a version keeps only a weak pointer to it
// (memo.watched), so an idle server keeps nothing of its watches' events.
// The watches that keep up read an event within moments of each other and
// share it (in BenchmarkPods1000Running each event of a pod was decoded for
// two of the server's watches, once now); one that is far behind decodes it
// again, as the object is gone by then.
type shared struct {
	owner *store
	obj   runtime.Object

	mu      sync.Mutex
	encoded map[runtime.Identifier]*encoding
}

// encoding is the object encoded by one encoder.
type encoding struct {
	once sync.Once
	raw  []byte
	err  error
}

var _ runtime.CacheableObject = (*shared)(nil)

// CacheEncode implements runtime.CacheableObject: encode runs once per
// encoder identifier, on a copy of the object (encodable).
func (s *shared) CacheEncode(id runtime.Identifier, encode func(runtime.Object, io.Writer) error, w io.Writer) error {
	s.mu.Lock()
	e := s.encoded[id]
	if e == nil {
		if s.encoded == nil {
			s.encoded = make(map[runtime.Identifier]*encoding, 1)
		}
		e = &encoding{}
		s.encoded[id] = e
	}
	s.mu.Unlock()
	e.once.Do(func() {
		var buf appender
		e.err = encode(s.encodable(), &buf)
		e.raw = buf
	})
	if e.err != nil {
		return e.err
	}
	if sp, ok := w.(runtime.Splice); ok {
		sp.Splice(e.raw)
		return nil
	}
	_, err := w.Write(e.raw)
	return err
}

// GetObject implements runtime.CacheableObject: a deep copy of the object.
func (s *shared) GetObject() runtime.Object { return s.obj.DeepCopyObject() }

// encodable is the copy of the object an encoder gets: of its top-level
// struct only for a typed object. An encoder sets the kind of what it
// encodes (the copy's own TypeMeta) and converts it, reading the rest, as
// the items of a list from kube-apiserver's watch cache share their maps
// and slices with the cache and are encoded by the same encoders. An
// Unstructured is copied deep: its kind is in its map.
func (s *shared) encodable() runtime.Object {
	v := reflect.ValueOf(s.obj)
	_, unstructured := s.obj.(runtime.Unstructured)
	if unstructured || v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return s.obj.DeepCopyObject()
	}
	out := reflect.New(v.Elem().Type())
	out.Elem().Set(v.Elem())
	return out.Interface().(runtime.Object)
}

// GetObjectKind implements runtime.Object with a copy of the object's kind:
// setting it changes nothing shared.
func (s *shared) GetObjectKind() schema.ObjectKind {
	tm := &metav1.TypeMeta{}
	tm.SetGroupVersionKind(s.obj.GetObjectKind().GroupVersionKind())
	return tm
}

// DeepCopyObject implements runtime.Object.
func (s *shared) DeepCopyObject() runtime.Object {
	return &shared{owner: s.owner, obj: s.obj.DeepCopyObject()}
}

// watchedBy returns the object m's version is shared as among s's watches,
// if a watch still holds it.
func (m *memo) watchedBy(s *store) *shared { return sharedBy(m.watched.Load(), s) }

// sharedBy is p's object if it is alive and s's.
func sharedBy(p *weak.Pointer[shared], s *store) *shared {
	if p == nil {
		return nil
	}
	if sh := p.Value(); sh != nil && sh.owner == s {
		return sh
	}
	return nil
}

// share makes obj, just decoded by s from m's version at its own revision,
// the object s's watches send for that version, unless another watch got
// there first: then the caller sends that one.
func (m *memo) share(s *store, obj runtime.Object) *shared {
	sh := &shared{owner: s, obj: obj}
	p := weak.Make(sh)
	for {
		old := m.watched.Load()
		if cur := sharedBy(old, s); cur != nil {
			return cur
		}
		if m.watched.CompareAndSwap(old, &p) {
			return sh
		}
	}
}

// appender keeps what is written to it. A watch event's encoder writes the
// whole event at once: the first write allocates what it needs and no more,
// where a bytes.Buffer doubles its way there.
type appender []byte

func (a *appender) Write(p []byte) (int, error) {
	*a = append(*a, p...)
	return len(p), nil
}
