package endpoint_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// start starts a server running only the named controllers (and
// serviceaccount, which gives namespace default the ServiceAccount pods
// need), with no simulated node (the tests play the kubelet), and returns
// it with a client.
func start(t *testing.T, names ...controllers.Name) (*apiserver.Server, kubernetes.Interface) {
	t.Helper()
	names = append(names, controllers.ServiceAccount)
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Controllers: names, Nodes: []controllers.Node{}}))
	c, err := srv.Clientset()
	require.NoError(t, err)
	return srv, c
}

// createNode creates a Node in zone (none if empty).
func createNode(t *testing.T, c kubernetes.Interface, name, zone string) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if zone != "" {
		node.Labels = map[string]string{corev1.LabelTopologyZone: zone}
	}
	_, err := c.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{})
	require.NoError(t, err)
}

// pod is a pod a test runs: what its kubelet would report.
type pod struct {
	name, node, ip string
	labels         map[string]string
	ready          bool
	// ports are its container's ports, name=number pairs; default web=8080.
	ports []corev1.ContainerPort
	// hostname and subdomain are its spec's.
	hostname, subdomain string
}

// run creates p in namespace default, binds it to its node and reports its
// status as a kubelet would: Running, its IP, and Ready and
// ContainersReady as p.ready says.
func run(t *testing.T, c kubernetes.Interface, p pod) *corev1.Pod {
	t.Helper()
	ctx, pods := t.Context(), c.CoreV1().Pods("default")
	ports := p.ports
	if ports == nil {
		ports = []corev1.ContainerPort{{Name: "web", ContainerPort: 8080}}
	}
	_, err := pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.name, Labels: p.labels},
		Spec: corev1.PodSpec{Hostname: p.hostname, Subdomain: p.subdomain,
			Containers: []corev1.Container{{Name: "app", Image: "app", Ports: ports}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	err = pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.name},
		Target: corev1.ObjectReference{Kind: "Node", Name: p.node}}, metav1.CreateOptions{})
	require.NoError(t, err)
	got, err := pods.Get(ctx, p.name, metav1.GetOptions{})
	require.NoError(t, err)
	status := corev1.ConditionFalse
	if p.ready {
		status = corev1.ConditionTrue
	}
	got.Status.Phase, got.Status.PodIP, got.Status.PodIPs = corev1.PodRunning, p.ip, []corev1.PodIP{{IP: p.ip}}
	got.Status.Conditions = append(got.Status.Conditions,
		corev1.PodCondition{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()},
		corev1.PodCondition{Type: corev1.ContainersReady, Status: status, LastTransitionTime: metav1.Now()})
	got, err = pods.UpdateStatus(ctx, got, metav1.UpdateOptions{})
	require.NoError(t, err)
	return got
}
