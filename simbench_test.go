package apiserver_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/controllers/kubelet"
)

// BenchmarkPods1000Running creates 1,000 bare pods on a server of 10
// simulated nodes and times until every one is Running and Ready
// (scheduled, admitted, started: two status writes each).
func BenchmarkPods1000Running(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		srv := startServer(b, apiserver.Options{Nodes: controllers.Nodes(10)})
		c, err := srv.Clientset()
		if err != nil {
			b.Fatal(err)
		}
		w := watchReadyPods(b, c)
		b.StartTimer()
		for i := range 1000 {
			if _, err := c.CoreV1().Pods("default").Create(context.Background(), benchPod(fmt.Sprintf("p-%d", i), "bench"), metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		waitReady(b, w, 1000)
		b.StopTimer()
		w.Stop()
		_ = srv.Close()
		b.StartTimer()
	}
}

// BenchmarkServiceSlices100 times, for a Service over 100 pods, from the
// last pod Ready to its EndpointSlice listing the 100 as ready.
func BenchmarkServiceSlices100(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		srv := startServer(b, apiserver.Options{})
		c, err := srv.Clientset()
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		if _, err := c.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "svc"}, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		slices, err := c.DiscoveryV1().EndpointSlices("default").Watch(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=svc"})
		if err != nil {
			b.Fatal(err)
		}
		w := watchReadyPods(b, c)
		for i := range 100 {
			if _, err := c.CoreV1().Pods("default").Create(ctx, benchPod(fmt.Sprintf("p-%d", i), "svc"), metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		waitReady(b, w, 100)
		b.StartTimer()
		for ev := range slices.ResultChan() {
			if s, ok := ev.Object.(*discoveryv1.EndpointSlice); ok && readyEndpoints(s) == 100 {
				break
			}
		}
		b.StopTimer()
		slices.Stop()
		w.Stop()
		_ = srv.Close()
		b.StartTimer()
	}
}

func readyEndpoints(s *discoveryv1.EndpointSlice) int {
	n := 0
	for _, e := range s.Endpoints {
		if e.Conditions.Ready != nil && *e.Conditions.Ready {
			n++
		}
	}
	return n
}

// BenchmarkStartNodes is BenchmarkStart with 0 and 3 simulated nodes: what
// nodes add to a start.
func BenchmarkStartNodes(b *testing.B) {
	for _, n := range []int{0, 3} {
		b.Run(fmt.Sprintf("nodes-%d", n), func(b *testing.B) { benchmarkStart(b, apiserver.Options{Nodes: controllers.Nodes(n)}) })
	}
}

// BenchmarkHeapPerServerNodes is BenchmarkHeapPerServer with 0 and 3
// simulated nodes.
func BenchmarkHeapPerServerNodes(b *testing.B) {
	for _, n := range []int{0, 3} {
		b.Run(fmt.Sprintf("nodes-%d", n), func(b *testing.B) { benchmarkHeap(b, apiserver.Options{Nodes: controllers.Nodes(n)}) })
	}
}

func benchPod(name, app string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}}}
}

func watchReadyPods(b *testing.B, c kubernetes.Interface) watch.Interface {
	b.Helper()
	w, err := c.CoreV1().Pods("default").Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return w
}

// waitReady waits until n pods have been seen Ready.
func waitReady(b *testing.B, w watch.Interface, n int) {
	b.Helper()
	ready := map[string]bool{}
	deadline := time.After(time.Minute)
	for len(ready) < n {
		select {
		case ev := <-w.ResultChan():
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					ready[p.Name] = true
				}
			}
		case <-deadline:
			b.Fatalf("%d of %d pods Ready after a minute", len(ready), n)
		}
	}
}

// BenchmarkDeploymentAvailable times a Deployment of 3 replicas on a server
// of 3 simulated nodes from its create until its status says all 3
// available (the Deployment and ReplicaSet controllers, the scheduler and
// the kubelets at work).
func BenchmarkDeploymentAvailable(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		srv := startServer(b, apiserver.Options{Nodes: controllers.Nodes(3)})
		c, err := srv.Clientset()
		if err != nil {
			b.Fatal(err)
		}
		w, err := c.AppsV1().Deployments("default").Watch(context.Background(), metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := c.AppsV1().Deployments("default").Create(context.Background(), benchDeployment(3), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		waitDeployment(b, w, func(d *appsv1.Deployment) bool { return d.Status.AvailableReplicas == 3 })
		b.StopTimer()
		w.Stop()
		_ = srv.Close()
		b.StartTimer()
	}
}

// BenchmarkRollingUpdate100 times a rolling update of a Deployment of 100
// replicas (default 25% surge and unavailability) on 10 nodes, from the
// template change until every replica is updated and available.
func BenchmarkRollingUpdate100(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		srv := startServer(b, apiserver.Options{Nodes: controllers.Nodes(10)})
		c, err := srv.Clientset()
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		if _, err := c.AppsV1().Deployments("default").Create(ctx, benchDeployment(100), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		if err := srv.WaitIdle(ctx); err != nil {
			b.Fatal(err)
		}
		w, err := c.AppsV1().Deployments("default").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		patch := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"c","image":"nginx:1.28"}]}}}}`)
		b.StartTimer()
		patched, err := c.AppsV1().Deployments("default").Patch(ctx, "bench", types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			b.Fatal(err)
		}
		waitDeployment(b, w, func(d *appsv1.Deployment) bool {
			return d.Status.ObservedGeneration >= patched.Generation && d.Status.UpdatedReplicas == 100 && d.Status.AvailableReplicas == 100 &&
				d.Status.Replicas == 100
		})
		b.StopTimer()
		w.Stop()
		_ = srv.Close()
		b.StartTimer()
	}
}

func benchDeployment(replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": "bench"}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "bench"}, Spec: appsv1.DeploymentSpec{Replicas: &replicas,
		Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}}}}}
}

func waitDeployment(b *testing.B, w watch.Interface, done func(*appsv1.Deployment) bool) {
	b.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case ev := <-w.ResultChan():
			if d, ok := ev.Object.(*appsv1.Deployment); ok && done(d) {
				return
			}
		case <-deadline:
			b.Fatal("the Deployment did not get there in a minute")
		}
	}
}

// withoutWorkloads are the default controllers less the workload ones
// (issue 25's: deployment, replicaset, replicationcontroller, statefulset,
// daemonset, job, cronjob, ttl-after-finished, horizontalpodautoscaling,
// disruption).
var withoutWorkloads = []controllers.Name{"*", "-" + controllers.Deployment, "-" + controllers.ReplicaSet,
	"-" + controllers.ReplicationController, "-" + controllers.StatefulSet, "-" + controllers.DaemonSet,
	"-" + controllers.Job, "-" + controllers.CronJob, "-" + controllers.TTLAfterFinished,
	"-" + controllers.HorizontalPodAutoscaling, "-" + controllers.Disruption}

// BenchmarkJob100 times a Job of 100 completions (parallelism 100) on 10
// nodes whose pods succeed as they start (a kubelet rule), from its create
// until its Complete condition.
func BenchmarkJob100(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		srv := startServer(b, apiserver.Options{Nodes: controllers.Nodes(10)})
		srv.Kubelet().AddRule(kubelet.Rule{OwnerKind: "Job", Exit: &kubelet.Exit{Code: 0}})
		c, err := srv.Clientset()
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		w, err := c.BatchV1().Jobs("default").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "bench"}, Spec: batchv1.JobSpec{
			Completions: new(int32(100)), Parallelism: new(int32(100)),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
		b.StartTimer()
		if _, err := c.BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		waitJobComplete(b, w)
		b.StopTimer()
		w.Stop()
		_ = srv.Close()
		b.StartTimer()
	}
}

func waitJobComplete(b *testing.B, w watch.Interface) {
	b.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case ev := <-w.ResultChan():
			if j, ok := ev.Object.(*batchv1.Job); ok && slices.ContainsFunc(j.Status.Conditions, func(c batchv1.JobCondition) bool {
				return c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue
			}) {
				return
			}
		case <-deadline:
			b.Fatal("the Job did not complete in a minute")
		}
	}
}

// BenchmarkStartWorkloads is BenchmarkStart without and with the workload
// controllers: what they add to a start.
func BenchmarkStartWorkloads(b *testing.B) {
	b.Run("without", func(b *testing.B) { benchmarkStart(b, apiserver.Options{Controllers: withoutWorkloads}) })
	b.Run("with", func(b *testing.B) { benchmarkStart(b, apiserver.Options{}) })
}

// BenchmarkHeapPerServerWorkloads is BenchmarkHeapPerServer without and
// with the workload controllers.
func BenchmarkHeapPerServerWorkloads(b *testing.B) {
	b.Run("without", func(b *testing.B) { benchmarkHeap(b, apiserver.Options{Controllers: withoutWorkloads}) })
	b.Run("with", func(b *testing.B) { benchmarkHeap(b, apiserver.Options{}) })
}
