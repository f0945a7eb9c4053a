package endpoint_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/controllers/endpoint"
	"github.com/kubeembed/apiserver/internal/endpoints"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

func createService(t *testing.T, c kubernetes.Interface, svc *corev1.Service) {
	t.Helper()
	_, err := c.CoreV1().Services("default").Create(t.Context(), svc, metav1.CreateOptions{})
	require.NoError(t, err)
}

func getEndpoints(t *testing.T, c kubernetes.Interface, name string) *corev1.Endpoints {
	t.Helper()
	ep, err := c.CoreV1().Endpoints("default").Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return ep
}

// address is the address upstream writes for pod p.
func address(p *corev1.Pod) corev1.EndpointAddress {
	return corev1.EndpointAddress{IP: p.Status.PodIP, NodeName: &p.Spec.NodeName,
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID}}
}

// A Service's Endpoints: its labels plus managed-by, ready pods in
// addresses and not-ready ones in notReadyAddresses, terminating ones left
// out, one subset per set of addresses offering the same ports (targetPort
// names resolved per pod), packed as endpoints.RepackSubsets packs them,
// written by kube-controller-manager.
func TestEndpointsOfReadyAndNotReadyPods(t *testing.T) {
	t.Parallel()
	srv, c := start(t, controllers.Endpoint)
	createNode(t, c, "node-a", "")
	createService(t, c, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web", "tier": "front"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromString("web")},
			{Name: "metrics", Port: 9090, TargetPort: intstr.FromInt32(9100)}}},
	})
	web := map[string]string{"app": "web"}
	a := run(t, c, pod{name: "a", node: "node-a", ip: "10.0.0.2", labels: web, ready: true})
	b := run(t, c, pod{name: "b", node: "node-a", ip: "10.0.0.1", labels: web, ready: true})
	notReady := run(t, c, pod{name: "c", node: "node-a", ip: "10.0.0.3", labels: web})
	noWeb := run(t, c, pod{name: "e", node: "node-a", ip: "10.0.0.4", labels: web, ready: true,
		ports: []corev1.ContainerPort{{Name: "other", ContainerPort: 7000}}})
	run(t, c, pod{name: "terminating", node: "node-a", ip: "10.0.0.5", labels: web, ready: true})
	require.NoError(t, c.CoreV1().Pods("default").Delete(t.Context(), "terminating", metav1.DeleteOptions{}))
	run(t, c, pod{name: "other", node: "node-a", ip: "10.0.0.6", labels: map[string]string{"app": "other"}, ready: true})
	apiservertest.WaitIdle(t, srv)

	ep := getEndpoints(t, c, "web")
	assert.Equal(t, map[string]string{"app": "web", "tier": "front", endpoint.LabelManagedBy: endpoint.ControllerName}, ep.Labels)
	want := []corev1.EndpointSubset{{
		Addresses:         []corev1.EndpointAddress{address(b), address(a)},
		NotReadyAddresses: []corev1.EndpointAddress{address(notReady)},
		Ports:             []corev1.EndpointPort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}},
	}, {
		Addresses:         []corev1.EndpointAddress{address(b), address(a), address(noWeb)},
		NotReadyAddresses: []corev1.EndpointAddress{address(notReady)},
		Ports:             []corev1.EndpointPort{{Name: "metrics", Port: 9100, Protocol: corev1.ProtocolTCP}},
	}}
	// The subsets' order is that of their hashes, which the pods' UIDs
	// change: internal/endpoints' TestRepackSubsetsAsUpstream holds the
	// order.
	bySubsetPort := cmpopts.SortSlices(func(x, y corev1.EndpointSubset) bool { return x.Ports[0].Name < y.Ports[0].Name })
	assert.Empty(t, cmp.Diff(want, ep.Subsets, bySubsetPort), "subsets (-want +got)")
	assert.Empty(t, cmp.Diff(endpoints.RepackSubsets(ep.Subsets), ep.Subsets), "subsets are packed")
	require.NotEmpty(t, ep.ManagedFields)
	assert.Equal(t, "kube-controller-manager", ep.ManagedFields[0].Manager)
}

// A headless Service without ports publishing not-ready addresses: every
// pod (terminating ones too) is an address, with its hostname when its
// subdomain is the Service's; the Endpoints carry the headless label.
func TestEndpointsOfHeadlessServicePublishingNotReady(t *testing.T) {
	t.Parallel()
	srv, c := start(t, controllers.Endpoint)
	createNode(t, c, "node-a", "")
	createService(t, c, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: corev1.ServiceSpec{
		ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true, Selector: map[string]string{"app": "db"}}})
	db := map[string]string{"app": "db"}
	ready := run(t, c, pod{name: "db-0", node: "node-a", ip: "10.0.0.1", labels: db, ready: true, hostname: "db-0", subdomain: "db"})
	notReady := run(t, c, pod{name: "db-1", node: "node-a", ip: "10.0.0.2", labels: db})
	terminating := run(t, c, pod{name: "db-2", node: "node-a", ip: "10.0.0.3", labels: db, ready: true})
	require.NoError(t, c.CoreV1().Pods("default").Delete(t.Context(), "db-2", metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv)

	ep := getEndpoints(t, c, "db")
	assert.Equal(t, map[string]string{corev1.IsHeadlessService: "", endpoint.LabelManagedBy: endpoint.ControllerName}, ep.Labels)
	withHostname := address(ready)
	withHostname.Hostname = "db-0"
	want := []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{withHostname, address(notReady), address(terminating)}}}
	assert.Empty(t, cmp.Diff(want, ep.Subsets), "subsets (-want +got)")
}

// A Service selecting no pod has Endpoints without subsets, stamped with
// the Service's creation as their last change; a Service without a selector
// gets none from the controller, and the Endpoints its owner writes are
// left alone.
func TestEndpointsWithoutPodsOrSelector(t *testing.T) {
	t.Parallel()
	srv, c := start(t, controllers.Endpoint)
	empty := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "empty"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "none"}, Ports: []corev1.ServicePort{{Port: 80}}}}
	empty, err := c.CoreV1().Services("default").Create(t.Context(), empty, metav1.CreateOptions{})
	require.NoError(t, err)
	createService(t, c, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "manual"}, Spec: corev1.ServiceSpec{
		Ports: []corev1.ServicePort{{Port: 80}}}})
	apiservertest.WaitIdle(t, srv)

	ep := getEndpoints(t, c, "empty")
	assert.Empty(t, ep.Subsets)
	assert.Equal(t, map[string]string{endpoint.LabelManagedBy: endpoint.ControllerName}, ep.Labels)
	assert.Equal(t, empty.CreationTimestamp.UTC().Format(time.RFC3339Nano), ep.Annotations[corev1.EndpointsLastChangeTriggerTime])
	_, err = c.CoreV1().Endpoints("default").Get(t.Context(), "manual", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "manual: %v", err)

	mine := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "manual"}, Subsets: []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: "10.1.0.1"}}, Ports: []corev1.EndpointPort{{Port: 8080, Protocol: corev1.ProtocolTCP}}}}}
	_, err = c.CoreV1().Endpoints("default").Create(t.Context(), mine, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	assert.Equal(t, mine.Subsets, getEndpoints(t, c, "manual").Subsets)
	assert.Empty(t, getEndpoints(t, c, "manual").Labels)
}

// Endpoints someone deletes are put back; those of a deleted Service are
// deleted (they have no owner reference).
func TestEndpointsPutBackAndDeletedWithService(t *testing.T) {
	t.Parallel()
	srv, c := start(t, controllers.Endpoint)
	createNode(t, c, "node-a", "")
	createService(t, c, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("web")}}}})
	p := run(t, c, pod{name: "a", node: "node-a", ip: "10.0.0.1", labels: map[string]string{"app": "web"}, ready: true})
	apiservertest.WaitIdle(t, srv)
	first := getEndpoints(t, c, "web")

	require.NoError(t, c.CoreV1().Endpoints("default").Delete(t.Context(), "web", metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv)
	again := getEndpoints(t, c, "web")
	assert.NotEqual(t, first.UID, again.UID)
	want := []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{address(p)},
		Ports: []corev1.EndpointPort{{Port: 8080, Protocol: corev1.ProtocolTCP}}}}
	assert.Empty(t, cmp.Diff(want, again.Subsets), "subsets (-want +got)")

	require.NoError(t, c.CoreV1().Services("default").Delete(t.Context(), "web", metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv)
	_, err := c.CoreV1().Endpoints("default").Get(t.Context(), "web", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
}

// A pod that stops being ready moves to notReadyAddresses; one whose
// labels stop matching leaves.
func TestEndpointsFollowPods(t *testing.T) {
	t.Parallel()
	srv, c := start(t, controllers.Endpoint)
	createNode(t, c, "node-a", "")
	createService(t, c, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}})
	web := map[string]string{"app": "web"}
	a := run(t, c, pod{name: "a", node: "node-a", ip: "10.0.0.1", labels: web, ready: true})
	run(t, c, pod{name: "b", node: "node-a", ip: "10.0.0.2", labels: web, ready: true})
	apiservertest.WaitIdle(t, srv)
	require.Len(t, getEndpoints(t, c, "web").Subsets, 1)
	require.Len(t, getEndpoints(t, c, "web").Subsets[0].Addresses, 2)

	pods := c.CoreV1().Pods("default")
	for i := range a.Status.Conditions {
		if a.Status.Conditions[i].Type == corev1.PodReady || a.Status.Conditions[i].Type == corev1.ContainersReady {
			a.Status.Conditions[i].Status = corev1.ConditionFalse
		}
	}
	a, err := pods.UpdateStatus(t.Context(), a, metav1.UpdateOptions{})
	require.NoError(t, err)
	b, err := pods.Get(t.Context(), "b", metav1.GetOptions{})
	require.NoError(t, err)
	b.Labels = map[string]string{"app": "moved"}
	_, err = pods.Update(t.Context(), b, metav1.UpdateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)

	want := []corev1.EndpointSubset{{NotReadyAddresses: []corev1.EndpointAddress{address(a)},
		Ports: []corev1.EndpointPort{{Port: 8080, Protocol: corev1.ProtocolTCP}}}}
	assert.Empty(t, cmp.Diff(want, getEndpoints(t, c, "web").Subsets), "subsets (-want +got)")
}
