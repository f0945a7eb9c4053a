package memory

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/apis/example"
	"k8s.io/apiserver/pkg/storage"
	cacherstorage "k8s.io/apiserver/pkg/storage/cacher"
	"k8s.io/utils/clock"
)

// benchSetup is a store as the server's core tier has them: no transformer,
// protobuf storage encoding of the example Pod's closest real kin, corev1
// objects... the example API has no protobuf, so JSON is measured too.
func benchSetup(b *testing.B) (context.Context, *store) {
	return testSetup(b, withTransformer(identity{}))
}

func benchPod(i int) *example.Pod {
	return &example.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: fmt.Sprintf("pod-%05d", i), Namespace: "bench",
		Labels: map[string]string{"app": "bench", "index": fmt.Sprint(i % 10)},
	}, Spec: example.PodSpec{NodeName: "node-1", ServiceAccountName: "default"}}
}

func fill(b *testing.B, ctx context.Context, s storage.Interface, n int) {
	for i := range n {
		p := benchPod(i)
		if err := s.Create(ctx, "/pods/bench/"+p.Name, p, nil, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCodec is the encode+decode cost every write and read pays, for
// reading the other numbers "plus codec cost".
func BenchmarkCodec(b *testing.B) {
	_, s := benchSetup(b)
	p := benchPod(1)
	for b.Loop() {
		data, err := runtime.Encode(s.codec, p)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := s.codec.Decode(data, nil, &example.Pod{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCreate(b *testing.B) {
	ctx, s := benchSetup(b)
	i := 0
	for b.Loop() {
		p := benchPod(i)
		i++
		if err := s.Create(ctx, "/pods/bench/"+p.Name, p, &example.Pod{}, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGet(b *testing.B) {
	ctx, s := benchSetup(b)
	fill(b, ctx, s, 1000)
	for b.Loop() {
		if err := s.Get(ctx, "/pods/bench/pod-00500", storage.GetOptions{}, &example.Pod{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGuaranteedUpdate(b *testing.B) {
	ctx, s := benchSetup(b)
	fill(b, ctx, s, 1)
	n := 0
	for b.Loop() {
		n++
		err := s.GuaranteedUpdate(ctx, "/pods/bench/pod-00000", &example.Pod{}, false, nil,
			storage.SimpleUpdate(func(obj runtime.Object) (runtime.Object, error) {
				obj.(*example.Pod).Spec.Hostname = fmt.Sprint(n)
				return obj, nil
			}), nil)
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkList1000(b *testing.B) {
	ctx, s := benchSetup(b)
	fill(b, ctx, s, 1000)
	b.Run("whole", func(b *testing.B) {
		for b.Loop() {
			list := &example.PodList{}
			if err := s.GetList(ctx, "/pods/bench", storage.ListOptions{Recursive: true, Predicate: storage.Everything}, list); err != nil || len(list.Items) != 1000 {
				b.Fatal(err, len(list.Items))
			}
		}
	})
	b.Run("paged-by-100", func(b *testing.B) {
		for b.Loop() {
			pred := storage.Everything
			pred.Limit = 100
			total := 0
			for {
				list := &example.PodList{}
				if err := s.GetList(ctx, "/pods/bench", storage.ListOptions{Recursive: true, Predicate: pred}, list); err != nil {
					b.Fatal(err)
				}
				total += len(list.Items)
				if list.Continue == "" {
					break
				}
				pred.Continue = list.Continue
			}
			if total != 1000 {
				b.Fatal(total)
			}
		}
	})
	b.Run("cacher", func(b *testing.B) {
		c := newCacher(b, s)
		defer c.Stop()
		for b.Loop() {
			list := &example.PodList{}
			if err := c.GetList(ctx, "/pods/bench", storage.ListOptions{Recursive: true, ResourceVersion: "0", Predicate: storage.Everything}, list); err != nil || len(list.Items) != 1000 {
				b.Fatal(err, len(list.Items))
			}
		}
	})
}

// BenchmarkCacherStartup is what a watch cache in front of one resource of
// 1,000 objects costs before it can serve: kube-apiserver would pay it for
// every resource at start-up.
func BenchmarkCacherStartup(b *testing.B) {
	ctx, s := benchSetup(b)
	fill(b, ctx, s, 1000)
	for b.Loop() {
		newCacher(b, s).Stop()
	}
}

// newCacher puts the upstream watch cache in front of s and waits until it is
// ready; the poll is what a benchmark of readiness can do, the cacher has no
// ready signal.
func newCacher(b *testing.B, s *store) *cacherstorage.Cacher {
	// A cacher enables size estimation on its storage, for good; let the
	// next one enable it again.
	s.sizeMu.Lock()
	s.sizeKeys = nil
	s.sizeMu.Unlock()
	c, err := cacherstorage.NewCacherFromConfig(cacherstorage.Config{
		Storage: s, Versioner: storage.APIObjectVersioner{}, GroupResource: schema.GroupResource{Resource: "pods"},
		EventsHistoryWindow: 2 * time.Minute, ResourcePrefix: "/pods/",
		KeyFunc:      func(obj runtime.Object) (string, error) { return storage.NamespaceKeyFunc("/pods/", obj) },
		GetAttrsFunc: storage.DefaultNamespaceScopedAttr,
		NewFunc:      func() runtime.Object { return &example.Pod{} },
		NewListFunc:  func() runtime.Object { return &example.PodList{} },
		Codec:        s.codec, Clock: clock.RealClock{},
	})
	if err != nil {
		b.Fatal(err)
	}
	for !c.Ready() {
		time.Sleep(100 * time.Microsecond)
	}
	return c
}

// BenchmarkWatchFanOut measures one write delivered to 100 watchers.
func BenchmarkWatchFanOut(b *testing.B) {
	ctx, s := benchSetup(b)
	const watchers = 100
	ws := make([]<-chan watchEvent, 0, watchers)
	for range watchers {
		w, err := s.Watch(ctx, "/pods/", storage.ListOptions{ResourceVersion: "1", Recursive: true, Predicate: storage.Everything})
		if err != nil {
			b.Fatal(err)
		}
		defer w.Stop()
		ws = append(ws, relay(w.ResultChan()))
	}
	i := 0
	for b.Loop() {
		p := benchPod(i)
		i++
		if err := s.Create(ctx, "/pods/bench/"+p.Name, p, nil, 0); err != nil {
			b.Fatal(err)
		}
		for _, c := range ws {
			<-c
		}
	}
}

type watchEvent struct{}

func relay[T any](in <-chan T) <-chan watchEvent {
	out := make(chan watchEvent, 1024)
	go func() {
		defer close(out)
		for range in {
			out <- watchEvent{}
		}
	}()
	return out
}

// protobufStore is a store of corev1 ConfigMaps encoded as protobuf, which is
// how the server's core tier stores built-in objects.
func protobufStore(b *testing.B) (context.Context, *store) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	codecs := serializer.NewCodecFactory(scheme)
	info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	codec := codecs.CodecForVersions(info.Serializer, info.Serializer, corev1.SchemeGroupVersion, corev1.SchemeGroupVersion)
	bk := NewBackend(Options{})
	b.Cleanup(func() { _ = bk.Close() })
	s, err := bk.newStore(Config{
		Codec: codec, ResourcePrefix: "/configmaps/", GroupResource: schema.GroupResource{Resource: "configmaps"},
		NewFunc:     func() runtime.Object { return &corev1.ConfigMap{} },
		NewListFunc: func() runtime.Object { return &corev1.ConfigMapList{} },
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := range 1000 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%05d", i), Namespace: "bench",
			Labels: map[string]string{"app": "bench"}}, Data: map[string]string{"key": "value", "other": "data"}}
		if err := s.Create(ctx, "/configmaps/bench/"+cm.Name, cm, nil, 0); err != nil {
			b.Fatal(err)
		}
	}
	return ctx, s
}

func BenchmarkProtobuf(b *testing.B) {
	ctx, s := protobufStore(b)
	b.Run("Get", func(b *testing.B) {
		for b.Loop() {
			if err := s.Get(ctx, "/configmaps/bench/cm-00500", storage.GetOptions{}, &corev1.ConfigMap{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("List1000", func(b *testing.B) {
		for b.Loop() {
			list := &corev1.ConfigMapList{}
			if err := s.GetList(ctx, "/configmaps/bench", storage.ListOptions{Recursive: true, Predicate: storage.Everything}, list); err != nil || len(list.Items) != 1000 {
				b.Fatal(err, len(list.Items))
			}
		}
	})
}
