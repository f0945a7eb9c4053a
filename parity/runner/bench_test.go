package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kubeembed/apiserver/controllers"
)

// BenchmarkPods1000SideBySide is the root module's BenchmarkPods1000Running
// on both sides of parity in one run: 1,000 bare pods created one after
// the other by one client, until the last is Ready, on 10 simulated
// nodes. kubeembed runs in this process with its cluster's controllers,
// scheduler and kubelet; the reference is etcd, kube-apiserver,
// kube-controller-manager with the same controllers and kube-scheduler,
// v1.37.2, as processes, with kubeembed's simulated kubelet as their
// client (StartReference's WithCluster). The client is the network one on
// both sides. The binaries are those parity/run.sh builds; without them
// the benchmark is skipped.
//
//	cd parity && go test -run '^$' -bench Pods1000SideBySide -benchtime 3x ./runner
func BenchmarkPods1000SideBySide(b *testing.B) {
	bins := benchBinaries(b)
	for _, side := range []string{"kubeembed", "kube-apiserver"} {
		b.Run(side, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				t, stop := startSide(b, side, bins)
				c, rv := prepareSide(b, t)
				ready := watchReady(c, rv, "p-", 1000)
				b.StartTimer()
				for i := range 1000 {
					if _, err := c.CoreV1().Pods("default").Create(context.Background(), benchPod(fmt.Sprintf("p-%d", i)), metav1.CreateOptions{}); err != nil {
						b.Fatal(err)
					}
				}
				if <-ready == "" {
					b.Fatal("1,000 pods not Ready after 5 minutes")
				}
				b.StopTimer()
				stop()
				b.StartTimer()
			}
		})
	}
}

// benchBinaries are the reference's programs in parity/run.sh's cache.
func benchBinaries(b *testing.B) Binaries {
	cache := os.Getenv("KUBEEMBED_PARITY_CACHE")
	if cache == "" {
		home, err := os.UserCacheDir()
		if err != nil {
			b.Skip(err)
		}
		cache = filepath.Join(home, "kubeembed-parity")
	}
	bins := Binaries{
		Etcd:              filepath.Join(cache, "etcd-v3.7.3"),
		APIServer:         filepath.Join(cache, "kube-apiserver-v1.37.2-release"),
		ControllerManager: filepath.Join(cache, "kube-controller-manager-v1.37.2", "kube-controller-manager"),
		Scheduler:         filepath.Join(cache, "kube-scheduler-v1.37.2", "kube-scheduler"),
	}
	for _, p := range []string{bins.Etcd, bins.APIServer, bins.ControllerManager, bins.Scheduler} {
		if _, err := os.Stat(p); err != nil {
			b.Skipf("%s is not built (parity/run.sh builds it)", p)
		}
	}
	return bins
}

// startSide starts one side of parity in cluster mode, and its stop.
func startSide(b *testing.B, side string, bins Binaries) (*Target, func()) {
	b.Helper()
	ctx := context.Background()
	const token = "bench-admin-token"
	if side == "kubeembed" {
		c, err := StartCandidate(ctx, token, WithCluster, "")
		if err != nil {
			b.Fatal(err)
		}
		return &c.Target, func() { _ = c.Stop() }
	}
	r, err := StartReference(ctx, bins, WithCluster, b.TempDir(), token)
	if err != nil {
		b.Fatal(err)
	}
	return &r.Target, r.Stop
}

// prepareSide adds 10 simulated nodes to t and waits until a first pod
// runs on them (the scheduler has seen a node without the not-ready
// taint; the reference's "default" ServiceAccount exists); it returns the
// benchmark's client and the resourceVersion of the pods it saw.
func prepareSide(b *testing.B, t *Target) (kubernetes.Interface, string) {
	b.Helper()
	ctx := context.Background()
	for _, n := range controllers.Nodes(10) {
		if _, err := t.Kubelet.AddNode(ctx, n); err != nil {
			b.Fatal(err)
		}
	}
	c, err := kubernetes.NewForConfig(&rest.Config{Host: t.URL, BearerToken: t.Token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: -1})
	if err != nil {
		b.Fatal(err)
	}
	list, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ready := watchReady(c, list.ResourceVersion, "first", 1)
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().Pods("default").Create(ctx, benchPod("first"), metav1.CreateOptions{})
		return err == nil, ignoreForbidden(err) // forbidden until the ServiceAccount is there
	})
	if err != nil {
		b.Fatal(err)
	}
	rv := <-ready
	if rv == "" {
		b.Fatal("no pod ran on the nodes")
	}
	return c, rv
}

func ignoreForbidden(err error) error {
	if apierrors.IsForbidden(err) {
		return nil
	}
	return err
}

func benchPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "bench"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}}}
}

// watchReady watches the pods of "default" from resourceVersion rv until
// n pods named with prefix have been seen Ready, or five minutes passed,
// then sends the resourceVersion of the last event it read ("" after five
// minutes). It reads as an informer does: all the time, watching again
// where a watch ended (kube-apiserver ends the watch of a client that
// falls behind).
func watchReady(c kubernetes.Interface, rv, prefix string, n int) <-chan string {
	out := make(chan string, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	w, err := watchtools.NewRetryWatcherWithContext(ctx, rv, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.CoreV1().Pods("default").Watch(ctx, o)
		}})
	if err != nil {
		cancel()
		out <- ""
		return out
	}
	go func() {
		defer cancel()
		defer w.Stop()
		ready := map[string]bool{}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if ok && strings.HasPrefix(p.Name, prefix) && podReady(p) {
				ready[p.Name] = true
			}
			if len(ready) == n {
				out <- p.ResourceVersion
				return
			}
		}
		out <- ""
	}()
	return out
}
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
