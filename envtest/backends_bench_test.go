package envtest_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/storage"
	"github.com/kubeembed/apiserver/storage/etcd"
	"github.com/kubeembed/apiserver/storage/etcd/embedded"
)

// The storage backends side by side in one run: kubeembed on memory, on an
// embedded etcd, on an external etcd (KUBEEMBED_TEST_ETCD, a real etcd
// process: hack/with-etcd.sh), and, as the reference, kube-apiserver + etcd
// as envtest runs them (KUBEBUILDER_ASSETS). Every server runs envtest's
// profile (no controllers) so that only the API and its storage are timed;
// the etcd servers skip fsync, as envtest's etcd does.

// backend starts one server and returns its config and how to stop it.
type backend struct {
	name  string
	start func(b *testing.B) (*rest.Config, func())
}

func backends(b *testing.B) []backend {
	kubeembed := func(name string, store func(b *testing.B) storage.Backend) backend {
		return backend{name, func(b *testing.B) (*rest.Config, func()) {
			var s storage.Backend
			if store != nil {
				s = store(b)
			}
			srv, err := apiserver.New(apiserver.Options{Storage: s, Controllers: []controllers.Name{}})
			if err != nil {
				b.Fatal(err)
			}
			if err := srv.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			return srv.RESTConfig(), func() {
				_ = srv.Close()
				if s != nil {
					_ = s.Close()
				}
			}
		}}
	}
	embeddedEtcd := func(opts etcd.Options) func(b *testing.B) storage.Backend {
		return func(b *testing.B) storage.Backend {
			s, err := embedded.NewBackend(context.Background(), embedded.Options{UnsafeNoFsync: true}, opts)
			if err != nil {
				b.Fatal(err)
			}
			return s
		}
	}
	out := []backend{
		kubeembed("memory", nil),
		kubeembed("embedded-etcd", embeddedEtcd(etcd.Options{})),
		kubeembed("embedded-etcd+watch-cache", embeddedEtcd(etcd.Options{WatchCache: true})),
	}
	if servers := os.Getenv("KUBEEMBED_TEST_ETCD"); servers != "" {
		n := 0
		out = append(out, kubeembed("external-etcd", func(b *testing.B) storage.Backend {
			n++
			s, err := etcd.New(context.Background(), etcd.Options{Servers: strings.Split(servers, ","),
				Prefix: fmt.Sprintf("/bench-%d-%d", time.Now().UnixNano(), n)})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}))
	}
	if os.Getenv("KUBEBUILDER_ASSETS") != "" {
		out = append(out, backend{"kube-apiserver+etcd", func(b *testing.B) (*rest.Config, func()) {
			te := &crenvtest.Environment{}
			cfg, err := te.Start()
			if err != nil {
				b.Fatal(err)
			}
			return cfg, func() { _ = te.Stop() }
		}})
	}
	return out
}

func clientFor(b *testing.B, cfg *rest.Config) kubernetes.Interface {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkBackendStart is a server's start until ready, stop not timed.
func BenchmarkBackendStart(b *testing.B) {
	for _, be := range backends(b) {
		b.Run(be.name, func(b *testing.B) {
			for b.Loop() {
				_, stop := be.start(b)
				b.StopTimer()
				stop()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkBackendCreate creates ConfigMaps one after another: p50 and
// p99.
func BenchmarkBackendCreate(b *testing.B) {
	for _, be := range backends(b) {
		cfg, stop := be.start(b)
		c := clientFor(b, cfg)
		i := 0
		b.Run(be.name, func(b *testing.B) {
			timeCreates(b, c, &i, func(name string) *corev1.ConfigMap {
				return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-" + name}, Data: map[string]string{"k": "v"}}
			}, nil)
		})
		stop()
	}
}

// BenchmarkBackendList1000 lists 1,000 ConfigMaps.
func BenchmarkBackendList1000(b *testing.B) {
	for _, be := range backends(b) {
		cfg, stop := be.start(b)
		c := clientFor(b, cfg)
		for i := range 1000 {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%04d", i)}, Data: map[string]string{"k": "v"}}
			if _, err := c.CoreV1().ConfigMaps("default").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(be.name, func(b *testing.B) {
			for b.Loop() {
				list, err := c.CoreV1().ConfigMaps("default").List(context.Background(), metav1.ListOptions{})
				if err != nil || len(list.Items) != 1000 {
					b.Fatal(err)
				}
			}
		})
		stop()
	}
}

// BenchmarkBackendWatchLatency is the time from a create's call to its
// event on a watch opened before (the create included: compare with
// BenchmarkBackendCreate): p50 and p99.
func BenchmarkBackendWatchLatency(b *testing.B) {
	for _, be := range backends(b) {
		cfg, stop := be.start(b)
		c := clientFor(b, cfg)
		w, err := c.CoreV1().ConfigMaps("default").Watch(context.Background(), metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		i := 0
		b.Run(be.name, func(b *testing.B) {
			timeCreates(b, c, &i, func(name string) *corev1.ConfigMap {
				return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-" + name}}
			}, func(cm *corev1.ConfigMap) { waitAdded(b, w, cm.Name) })
		})
		w.Stop()
		stop()
	}
}

// timeCreates creates one ConfigMap per iteration, the one newCM makes for
// the next number of *n (which goes on across b.Run's calls: names stay unique),
// and reports p50 and p99 of the time from each create's call until it
// returned and then, if not nil, until then returned.
func timeCreates(b *testing.B, c kubernetes.Interface, n *int, newCM func(name string) *corev1.ConfigMap, then func(*corev1.ConfigMap)) {
	var d []time.Duration
	for b.Loop() {
		*n++
		cm := newCM(strconv.Itoa(*n))
		start := time.Now()
		if _, err := c.CoreV1().ConfigMaps("default").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		if then != nil {
			then(cm)
		}
		d = append(d, time.Since(start))
	}
	reportPercentiles(b, d)
}

func waitAdded(b *testing.B, w watch.Interface, name string) {
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-w.ResultChan():
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type == watch.Added && cm.Name == name {
				return
			}
		case <-timeout:
			b.Fatalf("no event for %s", name)
		}
	}
}

func reportPercentiles(b *testing.B, d []time.Duration) {
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(d[len(d)*99/100].Nanoseconds())/1e3, "p99-µs")
}

// BenchmarkBackendHeap is the live heap each extra running server holds
// (after a GC, 3 running), its embedded etcd included: in-process backends
// only (kube-apiserver's is another process's).
func BenchmarkBackendHeap(b *testing.B) {
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for _, be := range backends(b) {
		if be.name == "kube-apiserver+etcd" {
			continue
		}
		b.Run(be.name, func(b *testing.B) {
			const n = 3
			for b.Loop() {
				_, warm := be.start(b)
				before := heap()
				stops := make([]func(), n)
				for i := range stops {
					_, stops[i] = be.start(b)
				}
				b.ReportMetric(float64(heap()-before)/n/(1<<20), "MiB/server")
				for _, stop := range stops {
					stop()
				}
				warm()
			}
		})
	}
}

// BenchmarkBackendCreateThroughWebhooks creates ConfigMaps through a
// mutating and a validating webhook reached by URL (a TLS server of the
// test on 127.0.0.1), on kubeembed and on kube-apiserver: p50 and p99.
// (kubeembed reaches webhooks by Service too: BenchmarkCreateThroughWebhooksByService
// in the root package; kube-apiserver here cannot, its endpoints would be
// this machine's loopback.)
func BenchmarkBackendCreateThroughWebhooks(b *testing.B) {
	hooks := httptest.NewTLSServer(admitAll())
	defer hooks.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hooks.Certificate().Raw})
	for _, be := range backends(b) {
		if be.name != "memory" && be.name != "kube-apiserver+etcd" {
			continue
		}
		cfg, stop := be.start(b)
		c := clientFor(b, cfg)
		installWebhooks(b, c, hooks.URL, ca)
		i := 0
		b.Run(be.name, func(b *testing.B) {
			timeCreates(b, c, &i, func(name string) *corev1.ConfigMap {
				return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hooked-" + name}}
			}, nil)
		})
		stop()
	}
}

// admitAll labels on /mutate and allows on /validate.
func admitAll() http.Handler {
	patch := []byte(`[{"op":"add","path":"/metadata/labels","value":{"mutated":"yes"}}]`)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		if r.URL.Path == "/mutate" {
			pt := admissionv1.PatchTypeJSONPatch
			resp.Patch, resp.PatchType = patch, &pt
		}
		review.Request, review.Response = nil, resp
		_ = json.NewEncoder(w).Encode(&review)
	})
}

// installWebhooks registers both webhooks on ConfigMap creates and waits
// until a create is mutated.
func installWebhooks(b *testing.B, c kubernetes.Interface, url string, ca []byte) {
	ctx := context.Background()
	none := admissionregistrationv1.SideEffectClassNone
	cc := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{URL: new(url + path), CABundle: ca}
	}
	rules := []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}
	if _, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "m"}, Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "m.example.com",
			AdmissionReviewVersions: []string{"v1"}, SideEffects: &none, ClientConfig: cc("/mutate"), Rules: rules}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "v"}, Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "v.example.com",
			AdmissionReviewVersions: []string{"v1"}, SideEffects: &none, ClientConfig: cc("/validate"), Rules: rules}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cm, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && cm.Labels["mutated"] == "yes", nil
	})
	if err != nil {
		b.Fatal("webhooks not called:", err)
	}
}
