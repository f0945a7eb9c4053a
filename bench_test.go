package apiserver_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	authuser "k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
)

// startServer starts a server for a benchmark.
func startServer(b *testing.B, opts apiserver.Options) *apiserver.Server {
	b.Helper()
	srv, err := apiserver.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	return srv
}

// BenchmarkStart is New plus Start until /readyz is ok; it also reports the
// median Close (close-µs), which is too fast to time on its own next to a
// start. Run alone with -benchtime 1x in a fresh process to measure the first
// server of a process.
func BenchmarkStart(b *testing.B) {
	benchmarkStart(b, apiserver.Options{})
}

// BenchmarkStartWithoutPriorityAndFairness is BenchmarkStart with API
// Priority and Fairness off: what it costs at start.
func BenchmarkStartWithoutPriorityAndFairness(b *testing.B) {
	benchmarkStart(b, apiserver.Options{DisablePriorityAndFairness: true})
}

// BenchmarkStartWithoutControllers is BenchmarkStart with no controllers
// (envtest's profile): what starting them costs Start.
func BenchmarkStartWithoutControllers(b *testing.B) {
	benchmarkStart(b, apiserver.Options{Controllers: []controllers.Name{}})
}

// BenchmarkStartUntilIdle is Start then WaitIdle: until the controllers
// have listed every resource and published kube-root-ca.crt, work they do
// after Start returns, beside the test.
func BenchmarkStartUntilIdle(b *testing.B) {
	for b.Loop() {
		srv := startServer(b, apiserver.Options{})
		if err := srv.WaitIdle(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = srv.Close()
		b.StartTimer()
	}
}

func benchmarkStart(b *testing.B, opts apiserver.Options) {
	var closes []time.Duration
	for b.Loop() {
		srv := startServer(b, opts)
		b.StopTimer()
		c, err := srv.Clientset()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{}); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := srv.Close(); err != nil {
			b.Fatal(err)
		}
		closes = append(closes, time.Since(start))
		b.StartTimer()
	}
	slices.Sort(closes)
	b.ReportMetric(float64(closes[len(closes)/2].Nanoseconds())/1e3, "close-µs")
}

// BenchmarkStartWithCRD starts a server with a CRD from Options and creates
// the first custom resource: the cost of a CRD to a test, compared with
// BenchmarkStart.
func BenchmarkStartWithCRD(b *testing.B) {
	for b.Loop() {
		srv := startServer(b, apiserver.Options{CRDPaths: []string{"testdata/crds/widgets.yaml"}})
		dyn, err := srv.DynamicClient()
		if err != nil {
			b.Fatal(err)
		}
		w := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.kubeembed.dev/v1", "kind": "Widget",
			"metadata": map[string]any{"name": "w"}, "spec": map[string]any{"size": int64(1)}}}
		if _, err := dyn.Resource(widgetGVR).Namespace("default").Create(context.Background(), w, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = srv.Close()
		b.StartTimer()
	}
}

// clients returns the clients compared side by side: a real server, one
// without API Priority and Fairness, and client-go's fake clientset.
func clients(b *testing.B) map[string]kubernetes.Interface {
	client := func(opts apiserver.Options) kubernetes.Interface {
		srv := startServer(b, opts)
		b.Cleanup(func() { _ = srv.Close() })
		c, err := srv.Clientset()
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	return map[string]kubernetes.Interface{"kubeembed": client(apiserver.Options{}),
		"kubeembed-no-apf": client(apiserver.Options{DisablePriorityAndFairness: true}), "client-go-fake": fake.NewClientset()}
}

// reportP50 reports the median of durations as p50-µs.
func reportP50(b *testing.B, d []time.Duration) {
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds())/1e3, "p50-µs")
}

func BenchmarkCreateConfigMap(b *testing.B) {
	for _, name := range []string{"kubeembed", "kubeembed-no-apf", "client-go-fake"} {
		c := clients(b)[name]
		i := 0 // -count runs the sub-benchmark again with the same client
		b.Run(name, func(b *testing.B) {
			var d []time.Duration
			for b.Loop() {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"k": "v"}}
				i++
				start := time.Now()
				if _, err := c.CoreV1().ConfigMaps("default").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
				d = append(d, time.Since(start))
			}
			reportP50(b, d)
		})
	}
}

func BenchmarkList1000ConfigMaps(b *testing.B) {
	for _, name := range []string{"kubeembed", "client-go-fake"} {
		c := clients(b)[name]
		for i := range 1000 {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%04d", i)}, Data: map[string]string{"k": "v"}}
			if _, err := c.CoreV1().ConfigMaps("default").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				list, err := c.CoreV1().ConfigMaps("default").List(context.Background(), metav1.ListOptions{})
				if err != nil || len(list.Items) != 1000 {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHeapPerServer reports the live heap each extra running server
// holds, after a GC, with 5 servers running, their controllers idle.
func BenchmarkHeapPerServer(b *testing.B) { benchmarkHeap(b, apiserver.Options{}) }

// BenchmarkHeapPerServerWithoutControllers is BenchmarkHeapPerServer with
// no controllers: what they hold.
func BenchmarkHeapPerServerWithoutControllers(b *testing.B) {
	benchmarkHeap(b, apiserver.Options{Controllers: []controllers.Name{}})
}

func benchmarkHeap(b *testing.B, opts apiserver.Options) {
	const n = 5
	for b.Loop() {
		warm := startServer(b, opts)
		heap := func() uint64 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return m.HeapAlloc
		}
		before := heap()
		servers := make([]*apiserver.Server, n)
		for i := range servers {
			servers[i] = startServer(b, opts)
			if err := servers[i].WaitIdle(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		after := heap()
		b.ReportMetric(float64(after-before)/n/(1<<20), "MiB/server")
		for _, s := range servers {
			_ = s.Close()
		}
		_ = warm.Close()
	}
}

// BenchmarkRestore1000 restores a server of 1,000 ConfigMaps after one was
// changed, one deleted and one created since the snapshot: a Ginkgo suite's
// reset between specs.
func BenchmarkRestore1000(b *testing.B) {
	srv := startServer(b, apiserver.Options{})
	b.Cleanup(func() { _ = srv.Close() })
	c, err := srv.Clientset()
	if err != nil {
		b.Fatal(err)
	}
	cms := c.CoreV1().ConfigMaps("default")
	ctx := context.Background()
	for i := range 1000 {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	snap, err := srv.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		b.StopTimer()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-0"}, Data: map[string]string{"k": "v"}}
		_, err1 := cms.Update(ctx, cm, metav1.UpdateOptions{})
		err2 := cms.Delete(ctx, "cm-1", metav1.DeleteOptions{})
		_, err3 := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "extra"}}, metav1.CreateOptions{})
		if err := errors.Join(err1, err2, err3); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := srv.Restore(ctx, snap); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNamespaceDeletion1000 deletes a namespace holding 1,000 objects
// across 10 kinds and waits until it is gone (WaitIdle, then a GET that
// must find nothing).
func BenchmarkNamespaceDeletion1000(b *testing.B) {
	srv := startServer(b, apiserver.Options{})
	b.Cleanup(func() { _ = srv.Close() })
	c, err := srv.Clientset()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		ns := fmt.Sprint("bench-", i)
		fillNamespace(b, c, ns, 100)
		b.StartTimer()
		if err := c.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
		if err := srv.WaitIdle(ctx); err != nil {
			b.Fatal(err)
		}
		if _, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			b.Fatalf("namespace %s: %v", ns, err)
		}
	}
}

// fillNamespace creates namespace ns with per objects of each of 10 kinds.
func fillNamespace(b *testing.B, c kubernetes.Interface, ns string, per int) {
	ctx := context.Background()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	meta := func(i int) metav1.ObjectMeta { return metav1.ObjectMeta{Name: fmt.Sprint("o-", i)} }
	create := []func(int) error{
		func(i int) error {
			_, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta(i)}, metav1.CreateOptions{})
			return err
		},
		func(i int) error {
			_, err := c.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: meta(i)}, metav1.CreateOptions{})
			return err
		},
		func(i int) error {
			_, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta(i)}, metav1.CreateOptions{})
			return err
		},
		func(i int) error {
			_, err := c.CoreV1().Endpoints(ns).Create(ctx, &corev1.Endpoints{ObjectMeta: meta(i)}, metav1.CreateOptions{})
			return err
		},
		func(i int) error {
			_, err := c.CoreV1().PodTemplates(ns).Create(ctx, &corev1.PodTemplate{ObjectMeta: meta(i), Template: benchPodTemplate()}, metav1.CreateOptions{})
			return err
		},
		func(i int) error {
			_, err := c.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: meta(i)}, metav1.CreateOptions{})
			return err
		},
		func(i int) error {
			_, err := c.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: meta(i)}, metav1.CreateOptions{})
			return err
		},
		func(i int) error {
			_, err := c.CoreV1().LimitRanges(ns).Create(ctx, &corev1.LimitRange{ObjectMeta: meta(i)}, metav1.CreateOptions{})
			return err
		},
		func(i int) error {
			_, err := c.CoreV1().Events(ns).Create(ctx, &corev1.Event{ObjectMeta: meta(i), InvolvedObject: corev1.ObjectReference{Namespace: ns}}, metav1.CreateOptions{})
			return err
		},
		func(i int) error {
			_, err := c.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{ObjectMeta: meta(i)}, metav1.CreateOptions{})
			return err
		},
	}
	for _, f := range create {
		for i := range per {
			if err := f(i); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func benchPodTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
}

// BenchmarkForegroundCascade1000 deletes an owner in the foreground with
// 1,000 blocking dependents and waits until the owner is gone.
func BenchmarkForegroundCascade1000(b *testing.B) {
	srv := startServer(b, apiserver.Options{})
	b.Cleanup(func() { _ = srv.Close() })
	c, err := srv.Clientset()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	cms := c.CoreV1().ConfigMaps("default")
	for b.Loop() {
		b.StopTimer()
		owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		ref := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: owner.UID, BlockOwnerDeletion: new(true)}
		for i := range 1000 {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("dep-", i), OwnerReferences: []metav1.OwnerReference{ref}}}
			if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		if err := srv.WaitIdle(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := cms.Delete(ctx, "owner", metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationForeground)}); err != nil {
			b.Fatal(err)
		}
		if err := srv.WaitIdle(ctx); err != nil {
			b.Fatal(err)
		}
		if _, err := cms.Get(ctx, "owner", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			b.Fatalf("owner: %v", err)
		}
	}
}

// BenchmarkAuthorization200Bindings gets a ConfigMap as a user in
// system:masters (allowed before RBAC) and as a user whose binding is one
// of 200 RoleBindings and 200 ClusterRoleBindings (RBAC walks them), both
// by client certificate, on one server: the difference is what RBAC costs
// a request.
func BenchmarkAuthorization200Bindings(b *testing.B) {
	srv := startServer(b, apiserver.Options{Controllers: []controllers.Name{}})
	b.Cleanup(func() { _ = srv.Close() })
	admin, err := srv.Clientset()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "reader"}
	for i := range 200 {
		user := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: fmt.Sprintf("user-%d", i)}}
		if _, err := admin.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("rb-", i)}, RoleRef: ref, Subjects: user}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("crb-", i)}, RoleRef: ref, Subjects: user}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	// Both authenticate by client certificate, so only authorization differs.
	master, err := srv.ClientsetFor(&authuser.DefaultInfo{Name: "root", Groups: []string{authuser.SystemPrivilegedGroup}})
	if err != nil {
		b.Fatal(err)
	}
	user, err := srv.ClientsetFor(&authuser.DefaultInfo{Name: "user-199"})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		client kubernetes.Interface
	}{{"system-masters", master}, {"rbac-user", user}} {
		b.Run(c.name, func(b *testing.B) {
			var d []time.Duration
			for b.Loop() {
				start := time.Now()
				if _, err := c.client.CoreV1().ConfigMaps("default").Get(ctx, "cm", metav1.GetOptions{}); err != nil {
					b.Fatal(err)
				}
				d = append(d, time.Since(start))
			}
			reportP50(b, d)
		})
	}
}
