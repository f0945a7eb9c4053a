package endpointslice_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	endpointsliceutil "k8s.io/endpointslice/util"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/controllers/endpointslice"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// webService selects app=web and serves port 80 from the pods' port named
// web.
func webService(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web", "tier": "front"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("web")}}},
	}
}

func createService(t *testing.T, c kubernetes.Interface, svc *corev1.Service) *corev1.Service {
	t.Helper()
	out, err := c.CoreV1().Services("default").Create(t.Context(), svc, metav1.CreateOptions{})
	require.NoError(t, err)
	return out
}

// terminate deletes a pod gracefully: bound to a node, it stays, with a
// deletionTimestamp, until its kubelet (none here) confirms.
func terminate(t *testing.T, c kubernetes.Interface, name string) *corev1.Pod {
	t.Helper()
	require.NoError(t, c.CoreV1().Pods("default").Delete(t.Context(), name, metav1.DeleteOptions{}))
	p, err := c.CoreV1().Pods("default").Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, p.DeletionTimestamp)
	return p
}

// A Service's slice: its labels, owner and generated name, the port
// resolved by name, and the endpoints of ready, not ready and terminating
// pods with upstream's ready/serving/terminating conditions, node and zone,
// written by kube-controller-manager.
func TestSliceOfReadyNotReadyAndTerminatingPods(t *testing.T) {
	t.Parallel()
	srv, c := start(t, controllers.EndpointSlice)
	createNode(t, c, "node-a", "zone-a")
	svc := createService(t, c, webService("web"))
	web := map[string]string{"app": "web"}
	ready := run(t, c, pod{name: "ready", node: "node-a", ip: "10.0.0.1", labels: web, ready: true})
	notReady := run(t, c, pod{name: "not-ready", node: "node-a", ip: "10.0.0.2", labels: web})
	run(t, c, pod{name: "terminating", node: "node-a", ip: "10.0.0.3", labels: web, ready: true})
	terminating := terminate(t, c, "terminating")
	run(t, c, pod{name: "other", node: "node-a", ip: "10.0.0.4", labels: map[string]string{"app": "other"}, ready: true})
	apiservertest.WaitIdle(t, srv)

	got := slicesOf(t, c, "web")
	require.Len(t, got, 1)
	slice := got[0]
	assert.Equal(t, "web-", slice.GenerateName)
	assert.True(t, strings.HasPrefix(slice.Name, "web-"), slice.Name)
	assert.Equal(t, map[string]string{"app": "web", "tier": "front",
		discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: endpointslice.ControllerName}, slice.Labels)
	assert.Equal(t, []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "web", UID: svc.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}, slice.OwnerReferences)
	assert.Equal(t, discoveryv1.AddressTypeIPv4, slice.AddressType)
	assert.Equal(t, []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}}, slice.Ports)
	want := []discoveryv1.Endpoint{
		endpoint(notReady, "zone-a", false, false, false),
		endpoint(ready, "zone-a", true, true, false),
		endpoint(terminating, "zone-a", false, true, true),
	}
	assert.Empty(t, cmp.Diff(want, slice.Endpoints), "endpoints (-want +got)")
	require.NotEmpty(t, slice.ManagedFields)
	assert.Equal(t, "kube-controller-manager", slice.ManagedFields[0].Manager)
	assert.Equal(t, metav1.ManagedFieldsOperationUpdate, slice.ManagedFields[0].Operation)
}

// publishNotReadyAddresses makes every endpoint ready, that of a pod on a
// node nobody knows included.
func TestPublishNotReadyAddresses(t *testing.T) {
	t.Parallel()
	srv, c := start(t, controllers.EndpointSlice)
	createNode(t, c, "node-a", "")
	svc := webService("web")
	svc.Spec.PublishNotReadyAddresses = true
	createService(t, c, svc)
	web := map[string]string{"app": "web"}
	notReady := run(t, c, pod{name: "not-ready", node: "node-a", ip: "10.0.0.2", labels: web})
	run(t, c, pod{name: "terminating", node: "node-a", ip: "10.0.0.3", labels: web})
	terminating := terminate(t, c, "terminating")
	lost := run(t, c, pod{name: "lost", node: "gone", ip: "10.0.0.5", labels: web, ready: true})
	apiservertest.WaitIdle(t, srv)

	got := slicesOf(t, c, "web")
	require.Len(t, got, 1)
	want := []discoveryv1.Endpoint{
		endpoint(lost, "", true, true, false),
		endpoint(notReady, "", true, false, false),
		endpoint(terminating, "", true, false, true),
	}
	assert.Empty(t, cmp.Diff(want, got[0].Endpoints), "endpoints (-want +got)")
}

// Ports are resolved per pod (a named targetPort by the container port of
// that name and protocol); pods whose ports resolve alike share a slice,
// whose ports are in upstream's hash order.
func TestPortsResolvedPerPod(t *testing.T) {
	t.Parallel()
	srv, c := start(t, controllers.EndpointSlice)
	createNode(t, c, "node-a", "")
	svc := webService("web")
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "metrics", Port: 9090, TargetPort: intstr.FromInt32(9100)})
	createService(t, c, svc)
	web := map[string]string{"app": "web"}
	run(t, c, pod{name: "a", node: "node-a", ip: "10.0.0.1", labels: web, ready: true})
	run(t, c, pod{name: "b", node: "node-a", ip: "10.0.0.2", labels: web, ready: true,
		ports: []corev1.ContainerPort{{Name: "web", ContainerPort: 8081}}})
	run(t, c, pod{name: "c", node: "node-a", ip: "10.0.0.3", labels: web, ready: true,
		ports: []corev1.ContainerPort{{Name: "web", ContainerPort: 8082, Protocol: corev1.ProtocolUDP}}})
	apiservertest.WaitIdle(t, srv)

	ports := func(http int32) []discoveryv1.EndpointPort {
		var out []discoveryv1.EndpointPort
		if http != 0 {
			out = append(out, discoveryv1.EndpointPort{Name: ptr.To("http"), Port: &http, Protocol: ptr.To(corev1.ProtocolTCP)})
		}
		out = append(out, discoveryv1.EndpointPort{Name: ptr.To("metrics"), Port: ptr.To[int32](9100), Protocol: ptr.To(corev1.ProtocolTCP)})
		endpointsliceutil.NewPortMapKey(out) // sorts them as upstream
		return out
	}
	got := slicesOf(t, c, "web")
	require.Len(t, got, 3)
	for i, want := range [][]discoveryv1.EndpointPort{ports(8080), ports(8081), ports(0)} {
		require.Len(t, got[i].Endpoints, 1)
		assert.Empty(t, cmp.Diff(want, got[i].Ports), "ports of %s (-want +got)", got[i].Endpoints[0].TargetRef.Name)
	}
}

// A headless Service's slices carry the headless label; with no ports, they
// have none; a pod whose subdomain is the Service's name has its hostname.
func TestHeadlessService(t *testing.T) {
	t.Parallel()
	srv, c := start(t, controllers.EndpointSlice)
	createNode(t, c, "node-a", "")
	for _, name := range []string{"db", "db-other"} {
		createService(t, c, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "db"}}})
	}
	run(t, c, pod{name: "db-0", node: "node-a", ip: "10.0.0.1", labels: map[string]string{"app": "db"}, ready: true,
		hostname: "db-0", subdomain: "db"})
	apiservertest.WaitIdle(t, srv)

	for name, hostname := range map[string]*string{"db": ptr.To("db-0"), "db-other": nil} {
		got := slicesOf(t, c, name)
		require.Len(t, got, 1, name)
		assert.Equal(t, map[string]string{corev1.IsHeadlessService: "", discoveryv1.LabelServiceName: name,
			discoveryv1.LabelManagedBy: endpointslice.ControllerName}, got[0].Labels, name)
		assert.Empty(t, got[0].Ports, name)
		require.Len(t, got[0].Endpoints, 1, name)
		assert.Equal(t, hostname, got[0].Endpoints[0].Hostname, name)
	}
}

// A Service without a selector (its slices are its owner's) and an
// ExternalName Service get no slices.
func TestNoSlicesWithoutSelectorOrForExternalName(t *testing.T) {
	t.Parallel()
	srv, c := start(t, controllers.EndpointSlice)
	createNode(t, c, "node-a", "")
	none := webService("none")
	none.Spec.Selector = nil
	createService(t, c, none)
	external := webService("external")
	external.Spec.Type, external.Spec.ExternalName = corev1.ServiceTypeExternalName, "example.com"
	createService(t, c, external)
	run(t, c, pod{name: "a", node: "node-a", ip: "10.0.0.1", labels: map[string]string{"app": "web"}, ready: true})
	apiservertest.WaitIdle(t, srv)

	assert.Empty(t, slicesOf(t, c, "none"))
	assert.Empty(t, slicesOf(t, c, "external"))
}

// A Service with no pods gets an empty placeholder slice, stamped with the
// Service's creation as its last change; the slice is reused for the pods
// that come and becomes the placeholder again when they go.
func TestPlaceholderSliceIsRecycled(t *testing.T) {
	t.Parallel()
	srv, c := start(t, controllers.EndpointSlice)
	createNode(t, c, "node-a", "")
	svc := createService(t, c, webService("web"))
	apiservertest.WaitIdle(t, srv)
	got := slicesOf(t, c, "web")
	require.Len(t, got, 1)
	name := got[0].Name
	assert.Equal(t, svc.CreationTimestamp.UTC().Format(time.RFC3339Nano), got[0].Annotations[corev1.EndpointsLastChangeTriggerTime])
	assert.Empty(t, got[0].Endpoints)
	assert.Empty(t, got[0].Ports)

	p := run(t, c, pod{name: "a", node: "node-a", ip: "10.0.0.1", labels: map[string]string{"app": "web"}, ready: true})
	apiservertest.WaitIdle(t, srv)
	got = slicesOf(t, c, "web")
	require.Len(t, got, 1)
	assert.Equal(t, name, got[0].Name, "the placeholder is reused")
	assert.Empty(t, cmp.Diff([]discoveryv1.Endpoint{endpoint(p, "", true, true, false)}, got[0].Endpoints))

	require.NoError(t, c.CoreV1().Pods("default").Delete(t.Context(), "a", *metav1.NewDeleteOptions(0)))
	apiservertest.WaitIdle(t, srv)
	got = slicesOf(t, c, "web")
	require.Len(t, got, 1)
	assert.Equal(t, name, got[0].Name, "the slice becomes the placeholder")
	assert.Empty(t, got[0].Endpoints)
	assert.Empty(t, got[0].Ports)
}

// More than 100 endpoints are split over slices of at most 100.
func TestSlicesHoldAtMost100Endpoints(t *testing.T) {
	t.Parallel()
	srv, c := start(t, controllers.EndpointSlice)
	createNode(t, c, "node-a", "")
	createService(t, c, webService("web"))
	for i := range 105 {
		run(t, c, pod{name: fmt.Sprint("p-", i), node: "node-a", ip: fmt.Sprintf("10.0.%d.%d", i/200, i%200+1),
			labels: map[string]string{"app": "web"}, ready: true})
	}
	apiservertest.WaitIdle(t, srv)

	// How they split depends on how the pods arrived (the reconciler fills
	// slices in place, as upstream's): 100+5 when it sees them at once.
	got := slicesOf(t, c, "web")
	require.Len(t, got, 2)
	for _, s := range got {
		assert.LessOrEqual(t, len(s.Endpoints), 100)
	}
	assert.Equal(t, 105, len(got[0].Endpoints)+len(got[1].Endpoints))
}

// A slice of the controller's that someone deletes or changes is put back;
// a slice someone else manages for the Service is left alone.
func TestSlicesArePutBack(t *testing.T) {
	t.Parallel()
	srv, c := start(t, controllers.EndpointSlice)
	createNode(t, c, "node-a", "")
	createService(t, c, webService("web"))
	p := run(t, c, pod{name: "a", node: "node-a", ip: "10.0.0.1", labels: map[string]string{"app": "web"}, ready: true})
	theirs := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "web-theirs", Labels: map[string]string{
			discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "someone"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1"}}},
	}
	slices := c.DiscoveryV1().EndpointSlices("default")
	_, err := slices.Create(t.Context(), theirs, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	want := []discoveryv1.Endpoint{endpoint(p, "", true, true, false)}

	ours := managedSlices(t, c, "web")
	require.Len(t, ours, 1)
	ours[0].Endpoints = nil
	_, err = slices.Update(t.Context(), &ours[0], metav1.UpdateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	ours = managedSlices(t, c, "web")
	require.Len(t, ours, 1)
	assert.Empty(t, cmp.Diff(want, ours[0].Endpoints), "changed slice (-want +got)")

	require.NoError(t, slices.Delete(t.Context(), ours[0].Name, metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv)
	again := managedSlices(t, c, "web")
	require.Len(t, again, 1)
	assert.NotEqual(t, ours[0].Name, again[0].Name)
	assert.Empty(t, cmp.Diff(want, again[0].Endpoints), "deleted slice (-want +got)")

	kept, err := slices.Get(t.Context(), "web-theirs", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, theirs.Endpoints, kept.Endpoints)
}

// managedSlices are the slices of Service name this controller manages.
func managedSlices(t *testing.T, c kubernetes.Interface, name string) []discoveryv1.EndpointSlice {
	t.Helper()
	var out []discoveryv1.EndpointSlice
	for _, s := range slicesOf(t, c, name) {
		if s.Labels[discoveryv1.LabelManagedBy] == endpointslice.ControllerName {
			out = append(out, s)
		}
	}
	return out
}

// The slices of a deleted Service go with it (garbage collector: they are
// its dependents).
func TestSlicesGoWithTheirService(t *testing.T) {
	t.Parallel()
	srv, c := start(t, controllers.EndpointSlice, controllers.GarbageCollector)
	createNode(t, c, "node-a", "")
	createService(t, c, webService("web"))
	run(t, c, pod{name: "a", node: "node-a", ip: "10.0.0.1", labels: map[string]string{"app": "web"}, ready: true})
	apiservertest.WaitIdle(t, srv)
	require.Len(t, slicesOf(t, c, "web"), 1)

	require.NoError(t, c.CoreV1().Services("default").Delete(t.Context(), "web", metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv)
	assert.Empty(t, slicesOf(t, c, "web"))
}

// A pod on a node nobody knows is left out (with a FailedToUpdateEndpointSlices
// event) and put in once the node appears, by the time WaitIdle returns
// (the node wakes the Service: kube-controller-manager finds it at its next
// retry, a second or more later); WaitIdle does not wait for the node
// meanwhile.
func TestPodOnUnknownNode(t *testing.T) {
	t.Parallel()
	srv, c := start(t, controllers.EndpointSlice)
	createNode(t, c, "node-a", "")
	createService(t, c, webService("web"))
	web := map[string]string{"app": "web"}
	a := run(t, c, pod{name: "a", node: "node-a", ip: "10.0.0.1", labels: web, ready: true})
	lost := run(t, c, pod{name: "lost", node: "node-b", ip: "10.0.0.2", labels: web, ready: true})
	apiservertest.WaitIdle(t, srv)
	got := slicesOf(t, c, "web")
	require.Len(t, got, 1)
	assert.Empty(t, cmp.Diff([]discoveryv1.Endpoint{endpoint(a, "", true, true, false)}, got[0].Endpoints))

	ev := waitEvent(t, c, "FailedToUpdateEndpointSlices")
	assert.Equal(t, "endpoint-slice-controller", ev.Source.Component)
	assert.Equal(t, corev1.EventTypeWarning, ev.Type)
	assert.Equal(t, "Error updating Endpoint Slices for Service default/web: skipping Pod lost for Service default/web: Node node-b Not Found", ev.Message)

	createNode(t, c, "node-b", "")
	apiservertest.WaitIdle(t, srv)
	got = slicesOf(t, c, "web")
	require.Len(t, got, 1)
	want := []discoveryv1.Endpoint{endpoint(a, "", true, true, false), endpoint(lost, "", true, true, false)}
	assert.Empty(t, cmp.Diff(want, got[0].Endpoints))
}

// waitEvent waits for an event of reason in namespace default.
func waitEvent(t *testing.T, c kubernetes.Interface, reason string) *corev1.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	w, err := c.CoreV1().Events("default").Watch(ctx, metav1.ListOptions{FieldSelector: "reason=" + reason})
	require.NoError(t, err)
	defer w.Stop()
	for e := range w.ResultChan() {
		if ev, ok := e.Object.(*corev1.Event); ok && e.Type == watch.Added {
			return ev
		}
	}
	t.Fatalf("no %s event: %v", reason, ctx.Err())
	return nil
}
