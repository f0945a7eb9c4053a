package controlplane

import (
	"net"
	"net/url"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/util/proxy"
	corev1listers "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// An endpoint at LocalEndpointIP is this machine's loopback interface: the
// dial reaches a listener on 127.0.0.1 and never leaves the machine.
func TestDialLocalReachesLoopback(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	conn, err := dialLocal(t.Context(), "tcp", net.JoinHostPort(LocalEndpointIP, strconv.Itoa(port)))
	require.NoError(t, err)
	defer conn.Close()
	server := <-accepted
	require.NotNil(t, server)
	defer server.Close()
	assert.Equal(t, "127.0.0.1", server.LocalAddr().(*net.TCPAddr).IP.String())
}

// The simulated pods' and nodes' addresses are never dialed: nothing
// listens there, and a packet would leave the machine.
func TestDialLocalRefusesSimulatedAddresses(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"10.244.0.5:443", "172.18.0.2:10250"} {
		_, err := dialLocal(t.Context(), "tcp", addr)
		assert.ErrorContains(t, err, "simulated pod or node address", addr)
		assert.ErrorContains(t, err, "apiservertest.ServeService")
	}
}

// The resolver names the server itself for default/kubernetes:443, and an
// endpoint of a Service's port from the informers' EndpointSlices (a ready
// one: the not-ready endpoint is never chosen).
func TestServiceResolverFromInformers(t *testing.T) {
	t.Parallel()
	services := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	slices := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, services.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: "ns"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}}))
	require.NoError(t, slices.Add(&discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "hook-abc", Namespace: "ns", Labels: map[string]string{discoveryv1.LabelServiceName: "hook"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
			{Addresses: []string{LocalEndpointIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
		},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](9443)}},
	}))
	getter, err := proxy.NewEndpointSliceListerGetter(discoverylisters.NewEndpointSliceLister(slices))
	require.NoError(t, err)
	self := &url.URL{Scheme: "https", Host: "127.0.0.1:6443"}
	r := serviceResolver{services: corev1listers.NewServiceLister(services), slices: getter, self: self}

	u, err := r.ResolveEndpoint("default", "kubernetes", 443)
	require.NoError(t, err)
	assert.Same(t, self, u)
	for range 10 {
		u, err = r.ResolveEndpoint("ns", "hook", 443)
		require.NoError(t, err)
		assert.Equal(t, "https://"+LocalEndpointIP+":9443", u.String())
	}
}
