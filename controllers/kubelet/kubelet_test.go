package kubelet_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/yaml"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/controllers/kubelet"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// env is a server whose controllers are the kubelet (and the service
// account controller, which pods need), with a fake clock a test may step.
type env struct {
	srv    *apiserver.Server
	client kubernetes.Interface
	k      *kubelet.Kubelet
	clock  *clocktesting.FakeClock
}

func start(t *testing.T, nodes ...controllers.Node) env {
	t.Helper()
	if nodes == nil {
		nodes = controllers.Nodes(1)
	}
	clock := clocktesting.NewFakeClock(time.Now())
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{
		Controllers: []controllers.Name{controllers.ServiceAccount, controllers.Kubelet}, Nodes: nodes, Clock: clock}))
	client, err := srv.Clientset()
	require.NoError(t, err)
	require.NotNil(t, srv.Kubelet())
	return env{srv: srv, client: client, k: srv.Kubelet(), clock: clock}
}

// createPod creates pod in default, on node-0 unless it names a node.
func (e env) createPod(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	if pod.Spec.NodeName == "" {
		pod.Spec.NodeName = "node-0"
	}
	created, err := e.client.CoreV1().Pods(pod.Namespace).Create(t.Context(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	return created
}

func simplePod(name string, containers ...string) *corev1.Pod {
	if len(containers) == 0 {
		containers = []string{"app"}
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "nginx:1.27"})
	}
	return p
}

// waitPod watches the pod from the version from (every change after it)
// until cond holds and returns it; it fails the test, printing the last
// version seen, after a deadline.
func (e env) waitPod(t *testing.T, from *corev1.Pod, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	last := from
	if cond(from) {
		return from
	}
	e.watch(t, "pods", from.Name, from.ResourceVersion, func(ev watch.Event) bool {
		if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Deleted {
			last = p
			return cond(p)
		}
		return false
	}, func() string { out, _ := yaml.Marshal(last); return string(out) })
	return last
}

// waitGone waits until the pod is deleted.
func (e env) waitGone(t *testing.T, from *corev1.Pod) {
	t.Helper()
	e.watch(t, "pods", from.Name, from.ResourceVersion, func(ev watch.Event) bool { return ev.Type == watch.Deleted }, func() string { return "not deleted" })
}

// watch watches the named object of resource (pods, nodes: default
// namespace for pods) from resourceVersion rv until done.
func (e env) watch(t *testing.T, resource, name, rv string, done func(watch.Event) bool, last func() string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: rv}
	var w watch.Interface
	var err error
	switch resource {
	case "pods":
		w, err = e.client.CoreV1().Pods(metav1.NamespaceDefault).Watch(ctx, opts)
	case "nodes":
		w, err = e.client.CoreV1().Nodes().Watch(ctx, opts)
	case "leases":
		w, err = e.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Watch(ctx, opts)
	}
	require.NoError(t, err)
	defer w.Stop()
	for {
		select {
		case ev, ok := <-w.ResultChan():
			require.True(t, ok, "watch of %s %s ended", resource, name)
			if done(ev) {
				return
			}
		case <-ctx.Done():
			t.Fatalf("%s %s: condition not met in time; last:\n%s", resource, name, last())
		}
	}
}

// events waits until the events about name (in namespace ns) include
// every reason of want, and returns them.
func (e env) events(t *testing.T, ns, name string, want ...string) []corev1.Event {
	t.Helper()
	return e.eventsOf(t, ns, name, "", want...)
}

// eventsOf is events of the field of name (a container:
// spec.containers{app}), or of any field if field is "".
func (e env) eventsOf(t *testing.T, ns, name, field string, want ...string) []corev1.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var got []corev1.Event
	for {
		list, err := e.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String()})
		require.NoError(t, err)
		got = slices.DeleteFunc(list.Items, func(ev corev1.Event) bool { return field != "" && ev.InvolvedObject.FieldPath != field })
		if containsAll(reasons(got), want) {
			return got
		}
		w, err := e.client.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion,
			FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String()})
		require.NoError(t, err)
		select {
		case <-w.ResultChan():
		case <-ctx.Done():
			w.Stop()
			t.Fatalf("events of %s/%s: want reasons %v, have %v", ns, name, want, reasons(got))
		}
		w.Stop()
	}
}

func reasons(events []corev1.Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.Reason)
	}
	return out
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

func condition(p *corev1.Pod, t corev1.PodConditionType) corev1.PodCondition {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return corev1.PodCondition{}
}

func running(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }

func ready(p *corev1.Pod) bool { return condition(p, corev1.PodReady).Status == corev1.ConditionTrue }

func status(p *corev1.Pod, container string) corev1.ContainerStatus {
	all := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, s := range append(all, p.Status.EphemeralContainerStatuses...) {
		if s.Name == container {
			return s
		}
	}
	return corev1.ContainerStatus{Name: "(no status of " + container + ")"}
}
