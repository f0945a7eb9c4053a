package apiserver_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
)

// The network and in-process clients side by side, in one run, on one
// server without controllers (envtest's profile, as the backends'
// benchmarks in envtest/): ConfigMap create, get and update, create to
// watch event, and a list of 1,000, each a sub-benchmark per client.

// clientPath is a client of the server, by the path its requests take.
type clientPath struct {
	name string
	c    kubernetes.Interface
}

// clientPaths starts a server and returns its clients: the admin over the
// network, in process, and in process by client certificate (as envtest's
// clients authenticate), then a service account bound to cluster-admin, in
// process by its token (as a test's controller running as one).
func clientPaths(b *testing.B) []clientPath {
	srv := startServer(b, apiserver.Options{Controllers: []controllers.Name{}})
	b.Cleanup(func() { _ = srv.Close() })
	byCert, err := srv.RESTConfigFor(&user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}})
	if err != nil {
		b.Fatal(err)
	}
	if byCert, err = srv.InProcess(byCert); err != nil {
		b.Fatal(err)
	}
	byToken := benchServiceAccount(b, srv)
	var out []clientPath
	for i, cfg := range []*rest.Config{srv.RESTConfig(), srv.InProcessRESTConfig(), byCert, byToken} {
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, clientPath{[]string{"network", "in-process", "in-process-cert", "in-process-sa-token"}[i], c})
	}
	return out
}

// benchServiceAccount is the in-process configuration of default/bench, a
// service account bound to cluster-admin.
func benchServiceAccount(b *testing.B, srv *apiserver.Server) *rest.Config {
	ctx := context.Background()
	admin, err := srv.Clientset()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bench"}},
		metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bench"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "bench", Namespace: "default"}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	cfg, err := srv.RESTConfigForServiceAccount(ctx, "default", "bench")
	if err != nil {
		b.Fatal(err)
	}
	if cfg, err = srv.InProcess(cfg); err != nil {
		b.Fatal(err)
	}
	return cfg
}

// timed runs op once per iteration and reports the p50 and p99 of its
// durations; n goes on across b.Run's calls (-count), so names stay unique.
func timed(b *testing.B, n *int, op func(i int)) {
	var d []time.Duration
	for b.Loop() {
		*n++
		start := time.Now()
		op(*n)
		d = append(d, time.Since(start))
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(d[len(d)*99/100].Nanoseconds())/1e3, "p99-µs")
}

func newCM(prefix string, i int) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: prefix + strconv.Itoa(i)}, Data: map[string]string{"k": "v"}}
}

func BenchmarkClientCreate(b *testing.B) {
	for _, p := range clientPaths(b) {
		n := 0
		b.Run(p.name, func(b *testing.B) {
			timed(b, &n, func(i int) {
				if _, err := p.c.CoreV1().ConfigMaps("default").Create(context.Background(), newCM(p.name+"-", i), metav1.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

func BenchmarkClientGet(b *testing.B) {
	for _, p := range clientPaths(b) {
		if _, err := p.c.CoreV1().ConfigMaps("default").Create(context.Background(), newCM(p.name, 0), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		n := 0
		b.Run(p.name, func(b *testing.B) {
			timed(b, &n, func(int) {
				if _, err := p.c.CoreV1().ConfigMaps("default").Get(context.Background(), p.name+"0", metav1.GetOptions{}); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

func BenchmarkClientUpdate(b *testing.B) {
	for _, p := range clientPaths(b) {
		cm, err := p.c.CoreV1().ConfigMaps("default").Create(context.Background(), newCM(p.name, 0), metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		b.Run(p.name, func(b *testing.B) {
			timed(b, &n, func(i int) {
				cm.Data["k"] = strconv.Itoa(i)
				if cm, err = p.c.CoreV1().ConfigMaps("default").Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkClientWatchLatency is the time from a create's call to its
// event on a watch opened before (the create included).
func BenchmarkClientWatchLatency(b *testing.B) {
	for _, p := range clientPaths(b) {
		w, err := p.c.CoreV1().ConfigMaps("default").Watch(context.Background(), metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		b.Run(p.name, func(b *testing.B) {
			timed(b, &n, func(i int) {
				cm := newCM("w-"+p.name+"-", i)
				if _, err := p.c.CoreV1().ConfigMaps("default").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
				waitAddedEvent(b, w, cm.Name)
			})
		})
		w.Stop()
	}
}

// BenchmarkClientWatchAfterCreate splits BenchmarkClientWatchLatency's
// figure: the create's own time, and how long after it returns its event
// reaches the watch (0 when it was already there: the share reported as
// "before-return").
func BenchmarkClientWatchAfterCreate(b *testing.B) {
	p := clientPaths(b)[1] // in process
	w, err := p.c.CoreV1().ConfigMaps("default").Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	var create, after []time.Duration
	before := 0
	for i := 0; b.Loop(); i++ {
		cm := newCM("after-", i)
		start := time.Now()
		if _, err := p.c.CoreV1().ConfigMaps("default").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		returned := time.Now()
		select {
		case ev := <-w.ResultChan():
			if isAdded(ev, cm.Name) {
				before++
			} else {
				waitAddedEvent(b, w, cm.Name)
			}
		default:
			waitAddedEvent(b, w, cm.Name)
		}
		create, after = append(create, returned.Sub(start)), append(after, time.Since(returned))
	}
	b.ReportMetric(p50(create), "create-p50-µs")
	b.ReportMetric(p50(after), "event-after-return-p50-µs")
	b.ReportMetric(float64(before)/float64(len(create)), "before-return")
}

func p50(ds []time.Duration) float64 {
	slices.Sort(ds)
	return float64(ds[len(ds)/2].Nanoseconds()) / 1e3
}

func isAdded(ev watch.Event, name string) bool {
	cm, ok := ev.Object.(*corev1.ConfigMap)
	return ok && ev.Type == watch.Added && cm.Name == name
}

// BenchmarkClientWatchFanOut is the time from a create to its event at
// each of eight watches of the resource, as the informers of several
// controllers of a test watch the same resource: kube-apiserver's watch
// cache decodes and encodes an event once for all of them.
func BenchmarkClientWatchFanOut(b *testing.B) {
	p := clientPaths(b)[1] // in process
	var ws []watch.Interface
	for range 8 {
		w, err := p.c.CoreV1().ConfigMaps("default").Watch(context.Background(), metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer w.Stop()
		ws = append(ws, w)
	}
	n := 0
	b.Run(p.name, func(b *testing.B) {
		timed(b, &n, func(i int) {
			cm := newCM("fan-", i)
			if _, err := p.c.CoreV1().ConfigMaps("default").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			for _, w := range ws {
				waitAddedEvent(b, w, cm.Name)
			}
		})
	})
}

func waitAddedEvent(b *testing.B, w watch.Interface, name string) {
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-w.ResultChan():
			if isAdded(ev, name) {
				return
			}
		case <-timeout:
			b.Fatalf("no event for %s", name)
		}
	}
}

func BenchmarkClientList1000(b *testing.B) {
	paths := clientPaths(b)
	for i := range 1000 {
		if _, err := paths[0].c.CoreV1().ConfigMaps("default").Create(context.Background(), newCM(fmt.Sprintf("cm-%04d", i), 0), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for _, p := range paths {
		n := 0
		b.Run(p.name, func(b *testing.B) {
			timed(b, &n, func(int) {
				list, err := p.c.CoreV1().ConfigMaps("default").List(context.Background(), metav1.ListOptions{})
				if err != nil || len(list.Items) != 1000 {
					b.Fatal(err)
				}
			})
		})
	}
}
