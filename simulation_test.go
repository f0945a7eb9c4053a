package apiserver_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// createWeb creates the Service "web" of default (port "http", 80, to the
// pods' port "http") and, selected by it, pods of those names whose
// container declares "http" at 8080.
func createWeb(t *testing.T, c kubernetes.Interface, pods ...string) {
	t.Helper()
	_, err := c.CoreV1().Services("default").Create(t.Context(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, name := range pods {
		_, err := c.CoreV1().Pods("default").Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1.27",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
}

// In the cluster profile pods run: bare pods are scheduled to the server's
// node, started by its simulated kubelet and Ready; a Service's
// EndpointSlice lists them, not ready ones as not ready, and drops those
// deleted. kubectl wait sees them Ready.
func TestPodsRunAndServicesGetEndpoints(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	ctx := t.Context()
	createWeb(t, c, "web-0", "web-1", "web-2")
	apiservertest.WaitIdle(t, srv)
	ips := map[string]string{}
	for _, name := range []string{"web-0", "web-1", "web-2"} {
		p, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, corev1.PodRunning, p.Status.Phase, name)
		assert.Equal(t, "node-0", p.Spec.NodeName)
		ips[p.Status.PodIP] = name
	}
	slice := serviceSlice(t, c, "web", func(s *discoveryv1.EndpointSlice) bool { return len(s.Endpoints) == 3 })
	assert.Equal(t, "endpointslice-controller.k8s.io", slice.Labels[discoveryv1.LabelManagedBy])
	assert.Equal(t, int32(8080), *slice.Ports[0].Port, "the target port, by name")
	for _, e := range slice.Endpoints {
		assert.Contains(t, ips, e.Addresses[0])
		assert.True(t, *e.Conditions.Ready, e.Addresses[0])
		assert.Equal(t, "node-0", *e.NodeName)
	}
	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		kc, err := srv.Kubeconfig()
		require.NoError(t, err)
		path := filepath.Join(t.TempDir(), "kubeconfig")
		require.NoError(t, os.WriteFile(path, kc, 0o600))
		cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", path, "wait", "--for=condition=Ready", "pod/web-0", "--timeout=20s")
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Contains(t, string(out), "pod/web-0 condition met")
	}

	require.NoError(t, srv.Kubelet().SetReady(ctx, "default", "web-0", "nginx", false))
	require.NoError(t, c.CoreV1().Pods("default").Delete(ctx, "web-1", metav1.DeleteOptions{}))
	slice = serviceSlice(t, c, "web", func(s *discoveryv1.EndpointSlice) bool {
		return len(s.Endpoints) == 2 && slices.ContainsFunc(s.Endpoints, func(e discoveryv1.Endpoint) bool { return !*e.Conditions.Ready })
	})
	for _, e := range slice.Endpoints {
		assert.Equal(t, ips[e.Addresses[0]] != "web-0", *e.Conditions.Ready, ips[e.Addresses[0]])
	}
}

// serviceSlice watches the Service's EndpointSlice until cond holds.
func serviceSlice(t *testing.T, c kubernetes.Interface, service string, cond func(*discoveryv1.EndpointSlice) bool) *discoveryv1.EndpointSlice {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	w, err := c.DiscoveryV1().EndpointSlices("default").Watch(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
	require.NoError(t, err)
	defer w.Stop()
	for {
		select {
		case ev := <-w.ResultChan():
			if s, ok := ev.Object.(*discoveryv1.EndpointSlice); ok && ev.Type != watch.Deleted && cond(s) {
				return s
			}
		case <-ctx.Done():
			t.Fatalf("EndpointSlice of %s: condition not met", service)
		}
	}
}

// Start returns with its nodes registered, Ready, leased and without the
// not-ready taint, as the node lifecycle controller and the scheduler see
// them: a pod created at once is scheduled on the first try, with no
// FailedScheduling event.
func TestStartReturnsWithSchedulableNodes(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Nodes: controllers.Nodes(3)}))
	c := clientset(t, srv)
	ctx := t.Context()
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, nodes.Items, 3)
	for _, n := range nodes.Items {
		assert.Empty(t, n.Spec.Taints, n.Name)
		_, err := c.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, n.Name, metav1.GetOptions{})
		assert.NoError(t, err, n.Name)
	}
	_, err = c.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "first"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	// The scheduler's events go through client-go's events broadcaster,
	// which writes them on goroutines of its own that WaitIdle does not
	// see: the Scheduled event is waited for (CI once listed the kubelet's
	// events without it).
	reasons := eventReasonsUntil(t, c, "first", "Scheduled")
	assert.NotContains(t, reasons, "FailedScheduling")
}

// eventReasonsUntil watches the events.k8s.io events about the pod named
// name in default until one has reason want, and returns the reasons seen.
func eventReasonsUntil(t *testing.T, c kubernetes.Interface, name, want string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	list, err := c.EventsV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + name})
	require.NoError(t, err)
	var reasons []string
	for _, e := range list.Items {
		reasons = append(reasons, e.Reason)
	}
	if slices.Contains(reasons, want) {
		return reasons
	}
	w, err := c.EventsV1().Events("default").Watch(ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + name, ResourceVersion: list.ResourceVersion})
	require.NoError(t, err)
	defer w.Stop()
	for ev := range w.ResultChan() {
		if e, ok := ev.Object.(*eventsv1.Event); ok {
			if reasons = append(reasons, e.Reason); e.Reason == want {
				return reasons
			}
		}
	}
	t.Fatalf("no %s event about %s; saw %v", want, name, reasons)
	return nil
}
