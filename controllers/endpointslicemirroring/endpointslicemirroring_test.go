package endpointslicemirroring_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	endpointsliceutil "k8s.io/endpointslice/util"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/controllers/endpointslicemirroring"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// start starts a server running only the named controllers, with no
// simulated node, and returns it with a client.
func start(t *testing.T, names ...controllers.Name) (*apiserver.Server, kubernetes.Interface) {
	t.Helper()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Controllers: names, Nodes: []controllers.Node{}}))
	c, err := srv.Clientset()
	require.NoError(t, err)
	return srv, c
}

// service creates a Service without a selector (or with one, if given).
func service(t *testing.T, c kubernetes.Interface, name string, selector map[string]string) {
	t.Helper()
	_, err := c.CoreV1().Services("default").Create(t.Context(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Selector: selector, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func createEndpoints(t *testing.T, c kubernetes.Interface, ep *corev1.Endpoints) *corev1.Endpoints {
	t.Helper()
	out, err := c.CoreV1().Endpoints("default").Create(t.Context(), ep, metav1.CreateOptions{})
	require.NoError(t, err)
	return out
}

// mirrored lists the slices mirrored from Endpoints name, by address type,
// their endpoints by address.
func mirrored(t *testing.T, c kubernetes.Interface, name string) []discoveryv1.EndpointSlice {
	t.Helper()
	list, err := c.DiscoveryV1().EndpointSlices("default").List(t.Context(), metav1.ListOptions{LabelSelector: fmt.Sprintf("%s=%s,%s=%s",
		discoveryv1.LabelServiceName, name, discoveryv1.LabelManagedBy, endpointslicemirroring.ControllerName)})
	require.NoError(t, err)
	for _, s := range list.Items {
		slices.SortFunc(s.Endpoints, func(a, b discoveryv1.Endpoint) int { return strings.Compare(a.Addresses[0], b.Addresses[0]) })
	}
	slices.SortFunc(list.Items, func(a, b discoveryv1.EndpointSlice) int {
		return strings.Compare(string(a.AddressType), string(b.AddressType))
	})
	return list.Items
}

// The Endpoints of a Service without a selector are mirrored: one slice per
// address family, labelled and annotated as the Endpoints (but the trigger
// time and kubectl's last applied configuration), owned by them, ports in
// upstream's hash order, endpoints ready or not with hostname, node and
// target as written, written by kube-controller-manager.
func TestEndpointsAreMirrored(t *testing.T) {
	t.Parallel()
	srv, c := start(t, controllers.EndpointSliceMirroring)
	service(t, c, "ext", nil)
	target := &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p", UID: "uid-p"}
	ep := createEndpoints(t, c, &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "ext", Labels: map[string]string{"team": "a"}, Annotations: map[string]string{
			"note": "x", corev1.EndpointsLastChangeTriggerTime: "2026-01-01T00:00:00Z", corev1.LastAppliedConfigAnnotation: "{}"}},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: "10.1.0.2", Hostname: "h", NodeName: ptr.To("n"), TargetRef: target},
				{IP: "10.1.0.1"}, {IP: "fd00::1"}},
			NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.1.0.3"}},
			Ports: []corev1.EndpointPort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP},
				{Name: "metrics", Port: 9100, Protocol: corev1.ProtocolTCP, AppProtocol: ptr.To("http")}},
		}},
	})
	apiservertest.WaitIdle(t, srv)

	got := mirrored(t, c, "ext")
	require.Len(t, got, 2)
	ports := []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)},
		{Name: ptr.To("metrics"), Port: ptr.To[int32](9100), Protocol: ptr.To(corev1.ProtocolTCP), AppProtocol: ptr.To("http")}}
	endpointsliceutil.NewPortMapKey(ports) // sorts them as upstream
	for _, s := range got {
		assert.Equal(t, "ext-", s.GenerateName)
		assert.Equal(t, map[string]string{"team": "a", discoveryv1.LabelServiceName: "ext",
			discoveryv1.LabelManagedBy: endpointslicemirroring.ControllerName}, s.Labels)
		assert.Equal(t, map[string]string{"note": "x"}, s.Annotations)
		assert.Equal(t, []metav1.OwnerReference{{APIVersion: "v1", Kind: "Endpoints", Name: "ext", UID: ep.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}, s.OwnerReferences)
		assert.Empty(t, cmp.Diff(ports, s.Ports), "ports (-want +got)")
		require.NotEmpty(t, s.ManagedFields)
		assert.Equal(t, "kube-controller-manager", s.ManagedFields[0].Manager)
	}
	ready := func(ip string, r bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &r}}
	}
	withTarget := ready("10.1.0.2", true)
	withTarget.Hostname, withTarget.NodeName, withTarget.TargetRef = ptr.To("h"), ptr.To("n"), target
	assert.Equal(t, discoveryv1.AddressTypeIPv4, got[0].AddressType)
	assert.Empty(t, cmp.Diff([]discoveryv1.Endpoint{ready("10.1.0.1", true), withTarget, ready("10.1.0.3", false)}, got[0].Endpoints))
	assert.Equal(t, discoveryv1.AddressTypeIPv6, got[1].AddressType)
	assert.Empty(t, cmp.Diff([]discoveryv1.Endpoint{ready("fd00::1", true)}, got[1].Endpoints))
}

// Endpoints of a Service with a selector (the endpoints controller's), of
// no Service, or labelled skip-mirror (the API server's own kubernetes
// Endpoints) are not mirrored.
func TestEndpointsNotMirrored(t *testing.T) {
	t.Parallel()
	srv, c := start(t, controllers.EndpointSliceMirroring)
	service(t, c, "selected", map[string]string{"app": "web"})
	service(t, c, "skipped", nil)
	subsets := []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.1.0.1"}}, Ports: []corev1.EndpointPort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}
	createEndpoints(t, c, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "selected"}, Subsets: subsets})
	createEndpoints(t, c, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "orphan"}, Subsets: subsets})
	createEndpoints(t, c, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "skipped",
		Labels: map[string]string{discoveryv1.LabelSkipMirror: "true"}}, Subsets: subsets})
	apiservertest.WaitIdle(t, srv)

	for _, name := range []string{"selected", "orphan", "skipped", "kubernetes"} {
		assert.Empty(t, mirrored(t, c, name), name)
	}
}

// Mirrored slices follow their Endpoints: an address gone is gone from the
// same slice; a skip-mirror label, a selector given to the Service and
// the Endpoints' deletion remove them.
func TestMirroredSlicesFollowEndpoints(t *testing.T) {
	t.Parallel()
	srv, c := start(t, controllers.EndpointSliceMirroring)
	service(t, c, "ext", nil)
	endpoints := c.CoreV1().Endpoints("default")
	ep := createEndpoints(t, c, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "ext"}, Subsets: []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: "10.1.0.1"}, {IP: "10.1.0.2"}}, Ports: []corev1.EndpointPort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}})
	apiservertest.WaitIdle(t, srv)
	first := mirrored(t, c, "ext")
	require.Len(t, first, 1)
	require.Len(t, first[0].Endpoints, 2)

	ep.Subsets[0].Addresses = ep.Subsets[0].Addresses[:1]
	ep, err := endpoints.Update(t.Context(), ep, metav1.UpdateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	got := mirrored(t, c, "ext")
	require.Len(t, got, 1)
	assert.Equal(t, first[0].Name, got[0].Name)
	assert.Len(t, got[0].Endpoints, 1)

	ep.Labels = map[string]string{discoveryv1.LabelSkipMirror: "true"}
	ep, err = endpoints.Update(t.Context(), ep, metav1.UpdateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	assert.Empty(t, mirrored(t, c, "ext"), "skip-mirror")

	ep.Labels = nil
	_, err = endpoints.Update(t.Context(), ep, metav1.UpdateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	require.Len(t, mirrored(t, c, "ext"), 1, "mirrored again")

	svc, err := c.CoreV1().Services("default").Get(t.Context(), "ext", metav1.GetOptions{})
	require.NoError(t, err)
	svc.Spec.Selector = map[string]string{"app": "ext"}
	svc, err = c.CoreV1().Services("default").Update(t.Context(), svc, metav1.UpdateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	assert.Empty(t, mirrored(t, c, "ext"), "selector")

	svc.Spec.Selector = nil
	_, err = c.CoreV1().Services("default").Update(t.Context(), svc, metav1.UpdateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	require.Len(t, mirrored(t, c, "ext"), 1, "mirrored again")
	require.NoError(t, endpoints.Delete(t.Context(), "ext", metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv)
	assert.Empty(t, mirrored(t, c, "ext"), "deleted")
}

// A mirrored slice someone deletes is put back.
func TestMirroredSlicePutBack(t *testing.T) {
	t.Parallel()
	srv, c := start(t, controllers.EndpointSliceMirroring)
	service(t, c, "ext", nil)
	createEndpoints(t, c, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "ext"}, Subsets: []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: "10.1.0.1"}}, Ports: []corev1.EndpointPort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}})
	apiservertest.WaitIdle(t, srv)
	first := mirrored(t, c, "ext")
	require.Len(t, first, 1)

	require.NoError(t, c.DiscoveryV1().EndpointSlices("default").Delete(t.Context(), first[0].Name, metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv)
	again := mirrored(t, c, "ext")
	require.Len(t, again, 1)
	assert.NotEqual(t, first[0].Name, again[0].Name)
	assert.Equal(t, first[0].Endpoints, again[0].Endpoints)
}

// At most 1000 addresses of a subset are mirrored, ready ones first; the
// rest are reported by a TooManyAddressesToMirror event.
func TestTooManyAddressesToMirror(t *testing.T) {
	t.Parallel()
	srv, c := start(t, controllers.EndpointSliceMirroring)
	service(t, c, "big", nil)
	var ready, notReady []corev1.EndpointAddress
	for i := range 1000 {
		ready = append(ready, corev1.EndpointAddress{IP: fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)})
	}
	for i := range 5 {
		notReady = append(notReady, corev1.EndpointAddress{IP: fmt.Sprintf("10.2.0.%d", i+1)})
	}
	createEndpoints(t, c, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "big"}, Subsets: []corev1.EndpointSubset{{
		Addresses: ready, NotReadyAddresses: notReady, Ports: []corev1.EndpointPort{{Port: 80, Protocol: corev1.ProtocolTCP}}}}})
	apiservertest.WaitIdle(t, srv)

	got := mirrored(t, c, "big")
	require.Len(t, got, 1)
	assert.Len(t, got[0].Endpoints, 1000)
	for _, e := range got[0].Endpoints {
		require.True(t, *e.Conditions.Ready, "only ready addresses fit: %v", e.Addresses)
	}
	ev := waitEvent(t, c, "TooManyAddressesToMirror")
	assert.Equal(t, "endpoint-slice-mirroring-controller", ev.Source.Component)
	assert.Equal(t, "A max of 1000 addresses can be mirrored to EndpointSlices per Endpoints subset. 5 addresses were skipped", ev.Message)
	assert.Equal(t, "Endpoints", ev.InvolvedObject.Kind)
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

// With the endpoints and endpointslice controllers running too, a Service
// with a selector has only the endpointslice controller's slices (its
// Endpoints, the endpoints controller's, are not mirrored), and a Service
// without one only the mirrored slices of the Endpoints its owner writes.
func TestWithEndpointAndEndpointSliceControllers(t *testing.T) {
	t.Parallel()
	srv, c := start(t, controllers.Endpoint, controllers.EndpointSlice, controllers.EndpointSliceMirroring, controllers.ServiceAccount)
	_, err := c.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	service(t, c, "selected", map[string]string{"app": "web"})
	service(t, c, "manual", nil)
	pods := c.CoreV1().Pods("default")
	_, err = pods.Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "app", Image: "app"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	p, err := pods.Get(t.Context(), "a", metav1.GetOptions{})
	require.NoError(t, err)
	p.Status.Phase, p.Status.PodIP, p.Status.PodIPs = corev1.PodRunning, "10.0.0.1", []corev1.PodIP{{IP: "10.0.0.1"}}
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
	_, err = pods.UpdateStatus(t.Context(), p, metav1.UpdateOptions{})
	require.NoError(t, err)
	createEndpoints(t, c, &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "manual"}, Subsets: []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: "10.1.0.1"}}, Ports: []corev1.EndpointPort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}})
	apiservertest.WaitIdle(t, srv)

	managers := func(name string) []string {
		list, err := c.DiscoveryV1().EndpointSlices("default").List(t.Context(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
		require.NoError(t, err)
		var out []string
		for _, s := range list.Items {
			out = append(out, s.Labels[discoveryv1.LabelManagedBy])
		}
		return out
	}
	assert.Equal(t, []string{"endpointslice-controller.k8s.io"}, managers("selected"))
	assert.Equal(t, []string{endpointslicemirroring.ControllerName}, managers("manual"))
	ep, err := c.CoreV1().Endpoints("default").Get(t.Context(), "selected", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "endpoint-controller", ep.Labels["endpoints.kubernetes.io/managed-by"])
}
