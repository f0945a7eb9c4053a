package envtest_test

import (
	"context"
	"fmt"
	"os"
	goruntime "runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kubeembed/apiserver/envtest"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// Issue 26's table, side by side in one run: a test's clients of
// kubeembed (apiservertest.Start's server and default profile, its admin
// client in process, as the server hands it out, and over the network;
// the envtest drop-in's Config),
// client-go's fake clientset, and kube-apiserver + etcd as envtest runs
// them (KUBEBUILDER_ASSETS; skipped without). Each path's requests are
// timed alike; every client has no client-side rate limit.

// clientPathOf is one way a test reaches an API, typed and dynamic.
type clientPathOf struct {
	name  string
	start func(b *testing.B) (kubernetes.Interface, dynamic.Interface, func())
}

// benchTB is the testing.TB apiservertest needs, for a server that lives
// across a benchmark's sub-benchmarks: its cleanups run at stop.
type benchTB struct {
	*testing.B
	cleanups []func()
}

func (tb *benchTB) Cleanup(f func()) { tb.cleanups = append(tb.cleanups, f) }

func (tb *benchTB) stop() {
	for i := len(tb.cleanups) - 1; i >= 0; i-- {
		tb.cleanups[i]()
	}
	tb.cleanups = nil
}

func sideBySide() []clientPathOf {
	kubeembed := func(network bool) func(b *testing.B) (kubernetes.Interface, dynamic.Interface, func()) {
		return func(b *testing.B) (kubernetes.Interface, dynamic.Interface, func()) {
			tb := &benchTB{B: b}
			srv := apiservertest.Start(tb, apiservertest.WithNewServer())
			cfg := srv.InProcessRESTConfig()
			if network {
				cfg = srv.RESTConfig()
			}
			return clientsOf(b, cfg, tb.stop)
		}
	}
	out := []clientPathOf{
		{"kubeembed-in-process", kubeembed(false)},
		{"kubeembed-network", kubeembed(true)},
		// The drop-in as a suite uses it: Environment{}.Start()'s Config,
		// the admin by client certificate, in process.
		{"kubeembed-envtest-drop-in", func(b *testing.B) (kubernetes.Interface, dynamic.Interface, func()) {
			te := &envtest.Environment{}
			cfg, err := te.Start()
			if err != nil {
				b.Fatal(err)
			}
			return clientsOf(b, cfg, func() { _ = te.Stop() })
		}},
		{"client-go-fake", func(*testing.B) (kubernetes.Interface, dynamic.Interface, func()) {
			return fake.NewClientset(), dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), func() {}
		}},
	}
	if os.Getenv("KUBEBUILDER_ASSETS") != "" {
		out = append(out, clientPathOf{"kube-apiserver+etcd", func(b *testing.B) (kubernetes.Interface, dynamic.Interface, func()) {
			te := &crenvtest.Environment{}
			cfg, err := te.Start()
			if err != nil {
				b.Fatal(err)
			}
			return clientsOf(b, cfg, func() { _ = te.Stop() })
		}})
	}
	return out
}

func clientsOf(b *testing.B, cfg *rest.Config, stop func()) (kubernetes.Interface, dynamic.Interface, func()) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return clientFor(b, cfg), d, stop
}

// eachPath runs a benchmark once per path, on a client of a server of its
// own: setup prepares the server (once per path) and returns what
// b.Run runs (once per -count, and once more first with b.N 1).
func eachPath(b *testing.B, setup func(b *testing.B, c kubernetes.Interface, d dynamic.Interface) func(b *testing.B)) {
	for _, p := range sideBySide() {
		c, d, stop := p.start(b)
		b.Run(p.name, setup(b, c, d))
		stop()
	}
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"}}
}

func BenchmarkSideBySideCreate(b *testing.B) {
	eachPath(b, func(_ *testing.B, c kubernetes.Interface, _ dynamic.Interface) func(b *testing.B) {
		i := 0
		return func(b *testing.B) {
			timeCreates(b, c, &i, func(name string) *corev1.ConfigMap { return configMap("cm-" + name) }, nil)
		}
	})
}

func BenchmarkSideBySideGet(b *testing.B) {
	eachPath(b, func(b *testing.B, c kubernetes.Interface, _ dynamic.Interface) func(b *testing.B) {
		cms := c.CoreV1().ConfigMaps("default")
		if _, err := cms.Create(context.Background(), configMap("one"), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		return func(b *testing.B) {
			timeEach(b, func(int) error { _, err := cms.Get(context.Background(), "one", metav1.GetOptions{}); return err })
		}
	})
}

func BenchmarkSideBySideUpdate(b *testing.B) {
	eachPath(b, func(b *testing.B, c kubernetes.Interface, _ dynamic.Interface) func(b *testing.B) {
		cms := c.CoreV1().ConfigMaps("default")
		cm, err := cms.Create(context.Background(), configMap("one"), metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		return func(b *testing.B) {
			timeEach(b, func(i int) error {
				cm.Data["k"] = fmt.Sprint(i)
				cm, err = cms.Update(context.Background(), cm, metav1.UpdateOptions{})
				return err
			})
		}
	})
}

// BenchmarkSideBySideWatchLatency is the time from a create's call to its
// event on a watch opened before.
func BenchmarkSideBySideWatchLatency(b *testing.B) {
	eachPath(b, func(b *testing.B, c kubernetes.Interface, _ dynamic.Interface) func(b *testing.B) {
		// One watch per path, not per b.Run: the fake's tracker keeps
		// stopped watchers, and panics once one is full.
		w, err := c.CoreV1().ConfigMaps("default").Watch(context.Background(), metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(w.Stop)
		i := 0
		return func(b *testing.B) {
			timeCreates(b, c, &i, func(name string) *corev1.ConfigMap { return configMap("cm-" + name) },
				func(cm *corev1.ConfigMap) { waitAdded(b, w, cm.Name) })
		}
	})
}

// BenchmarkSideBySideList1000 lists 1,000 ConfigMaps with the typed and
// the dynamic (unstructured) client.
func BenchmarkSideBySideList1000(b *testing.B) {
	eachPath(b, func(b *testing.B, c kubernetes.Interface, d dynamic.Interface) func(b *testing.B) {
		// A namespace of its own (kubeembed's controllers add
		// kube-root-ca.crt to it, as kube-controller-manager's: a list
		// of 1,001 there, of 1,000 on envtest, which runs none).
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "list"}}
		if _, err := c.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		for i := range 1000 {
			if _, err := c.CoreV1().ConfigMaps("list").Create(context.Background(), configMap(fmt.Sprintf("cm-%04d", i)), metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		return func(b *testing.B) { listBoth(b, c, d) }
	})
}

func listBoth(b *testing.B, c kubernetes.Interface, d dynamic.Interface) {
	b.Run("typed", func(b *testing.B) {
		timeEach(b, func(int) error {
			l, err := c.CoreV1().ConfigMaps("list").List(context.Background(), metav1.ListOptions{})
			if err != nil {
				return err
			}
			return listed(len(l.Items))
		})
	})
	if _, fake := c.(*fake.Clientset); fake {
		return // the dynamic fake knows no ConfigMaps the typed one created
	}
	b.Run("unstructured", func(b *testing.B) {
		timeEach(b, func(int) error {
			l, err := d.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("list").
				List(context.Background(), metav1.ListOptions{})
			if err != nil {
				return err
			}
			return listed(len(l.Items))
		})
	})
}

func listed(n int) error {
	if n != 1000 && n != 1001 {
		return fmt.Errorf("listed %d, want 1,000 and maybe kube-root-ca.crt", n)
	}
	return nil
}

// timeEach runs op once per iteration (with its number) and reports the
// p50 and p99 of its durations.
func timeEach(b *testing.B, op func(i int) error) {
	var d []time.Duration
	i := 0
	for b.Loop() {
		i++
		start := time.Now()
		if err := op(i); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(start))
	}
	reportPercentiles(b, d)
}

// BenchmarkSideBySideStart is a new server's start until ready (its stop
// not timed): kubeembed's second and later servers of the process (one is
// started and stopped first), and envtest's.
func BenchmarkSideBySideStart(b *testing.B) {
	tb := &benchTB{B: b}
	apiservertest.Start(tb, apiservertest.WithNewServer())
	tb.stop()
	for _, p := range sideBySide() {
		if p.name == "kubeembed-network" || p.name == "client-go-fake" {
			continue // the same server as in-process; no server
		}
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				_, _, stop := p.start(b)
				b.StopTimer()
				stop()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkSideBySidePristine is what a test pays for a pristine server:
// with kubeembed, apiservertest.Start's default (a pooled server, reset
// at the test's end) for a test that creates one ConfigMap; with envtest,
// a start and a stop per test. "heap-MiB" is the live heap after the
// tests.
func BenchmarkSideBySidePristine(b *testing.B) {
	b.Run("kubeembed", func(b *testing.B) {
		for b.Loop() {
			tb := &benchTB{B: b}
			srv := apiservertest.Start(tb)
			c, err := srv.Clientset()
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.CoreV1().ConfigMaps("default").Create(context.Background(), configMap("one"), metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			tb.stop()
		}
		goruntime.GC()
		var m goruntime.MemStats
		goruntime.ReadMemStats(&m)
		b.ReportMetric(float64(m.HeapAlloc)/(1<<20), "heap-MiB")
	})
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return
	}
	b.Run("kube-apiserver+etcd", func(b *testing.B) {
		for b.Loop() {
			te := &crenvtest.Environment{}
			cfg, err := te.Start()
			if err != nil {
				b.Fatal(err)
			}
			c := clientFor(b, cfg)
			if _, err := c.CoreV1().ConfigMaps("default").Create(context.Background(), configMap("one"), metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			_ = te.Stop()
		}
	})
}
