package envtest_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/timing"
)

// BenchmarkTiming measures what timing.Etcd models, side by side in one
// run: kubeembed on memory, the same with timing.Etcd(), and, as the
// reference, kube-apiserver + etcd as envtest runs them (KUBEBUILDER_ASSETS).
// Per server, with -v, the quantiles (p0, p10, ..., p90, p99) of:
//   - event-after-create: how long after a create returns its watch event
//     arrives (negative: before);
//   - delete-gap: the time between the MODIFIED (deletionTimestamp) and
//     DELETED events of an unscheduled pod's deletion, one request's two
//     writes.
//
// timing.Etcd's distributions are kube-apiserver's quantiles minus
// kubeembed's.
func BenchmarkTiming(b *testing.B) {
	servers := []backend{
		timedServer("memory", timing.Profile{}),
		timedServer("memory+timing.Etcd", timing.Etcd()),
	}
	if os.Getenv("KUBEBUILDER_ASSETS") != "" {
		servers = append(servers, backend{"kube-apiserver+etcd", func(b *testing.B) (*rest.Config, func()) {
			te := &crenvtest.Environment{}
			cfg, err := te.Start()
			if err != nil {
				b.Fatal(err)
			}
			return cfg, func() { _ = te.Stop() }
		}})
	}
	for _, s := range servers {
		cfg, stop := s.start(b)
		c := clientFor(b, cfg)
		b.Run(s.name, func(b *testing.B) {
			var after, gaps []time.Duration
			n := 0
			for b.Loop() {
				n++
				after = append(after, eventAfterCreate(b, c, n))
				gaps = append(gaps, deleteGap(b, c, n))
			}
			b.Logf("%s event-after-create %v", s.name, quantiles(after))
			b.Logf("%s delete-gap %v", s.name, quantiles(gaps))
			reportQuantile(b, after, 50, "after-p50-µs")
			reportQuantile(b, gaps, 50, "gap-p50-µs")
			reportQuantile(b, gaps, 90, "gap-p90-µs")
		})
		stop()
	}
}

func timedServer(name string, p timing.Profile) backend {
	return backend{name, func(b *testing.B) (*rest.Config, func()) {
		srv, err := apiserver.New(apiserver.Options{Profile: apiserver.ProfileEnvtest, Controllers: []controllers.Name{}, Timing: p})
		if err != nil {
			b.Fatal(err)
		}
		if err := srv.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		return srv.RESTConfig(), func() { _ = srv.Close() }
	}}
}

// stamped is a watch's events with when each arrived, stamped as they
// come, not when the benchmark gets round to reading them.
func stamped(b *testing.B, w watch.Interface) <-chan stampedEvent {
	out := make(chan stampedEvent, 16)
	go func() {
		defer close(out)
		for ev := range w.ResultChan() {
			out <- stampedEvent{ev, time.Now()}
		}
	}()
	return out
}

type stampedEvent struct {
	watch.Event
	at time.Time
}

// eventAfterCreate creates a ConfigMap under a watch and returns how long
// after the create returned its event arrived.
func eventAfterCreate(b *testing.B, c kubernetes.Interface, n int) time.Duration {
	ctx := context.Background()
	name := "t-" + strconv.Itoa(n)
	w, err := c.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	events := stamped(b, w)
	if _, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	returned := time.Now()
	ev := next(b, events)
	return ev.at.Sub(returned)
}

// deleteGap deletes an unscheduled pod under a watch and returns the time
// between its MODIFIED and DELETED events.
func deleteGap(b *testing.B, c kubernetes.Interface, n int) time.Duration {
	ctx := context.Background()
	if _, err := c.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	name := "p-" + strconv.Itoa(n)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
		AutomountServiceAccountToken: new(false), Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	if _, err := c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	w, err := c.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	events := stamped(b, w)
	if err := c.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		b.Fatal(err)
	}
	var modified time.Time
	for {
		ev := next(b, events)
		switch ev.Type {
		case watch.Modified:
			if ev.Object.(*corev1.Pod).DeletionTimestamp != nil {
				modified = ev.at
			}
		case watch.Deleted:
			if modified.IsZero() {
				b.Fatalf("pod %s: DELETED without a MODIFIED with deletionTimestamp before it", name)
			}
			return ev.at.Sub(modified)
		}
	}
}

func next(b *testing.B, events <-chan stampedEvent) stampedEvent {
	select {
	case ev, ok := <-events:
		if !ok {
			b.Fatal("watch ended")
		}
		return ev
	case <-time.After(30 * time.Second):
		b.Fatal("no event in 30 s")
	}
	panic("unreachable")
}

// quantiles are p0, p10, ..., p90 and p99 of d, in µs.
func quantiles(d []time.Duration) string {
	slices.Sort(d)
	var out []string
	for _, q := range []int{0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 99} {
		out = append(out, strconv.FormatInt(d[min(len(d)-1, len(d)*q/100)].Microseconds(), 10))
	}
	return fmt.Sprint(out) + " µs"
}

func reportQuantile(b *testing.B, d []time.Duration, q int, unit string) {
	slices.Sort(d)
	b.ReportMetric(float64(d[min(len(d)-1, len(d)*q/100)].Nanoseconds())/1e3, unit)
}
