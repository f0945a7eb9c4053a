package apiservertest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/internal/certs"
)

// ServeService serves handler over TLS as the Service namespace/name of
// srv, as a webhook server or an aggregated API server runs in a cluster,
// until the test ends, and returns the CA bundle that trusts it: the
// caBundle of a webhook configuration, a CRD's conversion webhook or an
// APIService that names the Service, which can be applied unchanged.
//
// The handler listens on 127.0.0.1, asks clients for a certificate (the
// aggregator presents the front proxy's) without verifying it, and has a
// certificate for
// <name>.<namespace>.svc (the name the server checks) and
// <name>.<namespace>.svc.cluster.local. The namespace is created if
// missing; the Service too (type ClusterIP, port 443 named "https"), or
// the one there is kept (as applied from config/webhook/service.yaml); an
// EndpointSlice gives each of its ports the handler's port at
// apiserver.LocalEndpointIP, which the server reaches on the loopback
// interface.
func ServeService(t TB, srv *apiserver.Server, namespace, name string, handler http.Handler) (caBundle []byte) {
	t.Helper()
	ca, err := certs.NewCA("apiservertest-service-ca")
	if err != nil {
		t.Fatalf("ServeService %s/%s: %v", namespace, name, err)
	}
	dns := name + "." + namespace + ".svc"
	leaf, err := ca.Serving(dns, dns+".cluster.local")
	if err != nil {
		t.Fatalf("ServeService %s/%s: %v", namespace, name, err)
	}
	cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		t.Fatalf("ServeService %s/%s: %v", namespace, name, err)
	}
	hs := httptest.NewUnstartedServer(handler)
	// Client certificates are asked for, not verified: an aggregated API
	// server checks the aggregator's (front proxy) in r.TLS.PeerCertificates.
	hs.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, ClientAuth: tls.RequestClientCert}
	hs.StartTLS()
	t.Cleanup(hs.Close)
	c, err := srv.Clientset()
	if err != nil {
		t.Fatalf("ServeService %s/%s: %v", namespace, name, err)
	}
	port := int32(hs.Listener.Addr().(*net.TCPAddr).Port)
	if err := publishService(t.Context(), c, namespace, name, port); err != nil {
		t.Fatalf("ServeService %s/%s: %v", namespace, name, err)
	}
	return ca.CertPEM
}

// RouteService makes the Service namespace/name of srv lead to a server of
// the test that already listens on 127.0.0.1:port (an aggregated API
// server serving its own TLS, say), as ServeService does for a handler: the
// namespace and Service are created if missing, and an EndpointSlice gives
// each of its ports port at apiserver.LocalEndpointIP.
func RouteService(t TB, srv *apiserver.Server, namespace, name string, port int) {
	t.Helper()
	c, err := srv.Clientset()
	if err == nil {
		err = publishService(t.Context(), c, namespace, name, int32(port))
	}
	if err != nil {
		t.Fatalf("RouteService %s/%s: %v", namespace, name, err)
	}
}

// publishService makes sure the namespace and the Service exist and points
// every port of the Service at port on apiserver.LocalEndpointIP.
func publishService(ctx context.Context, c kubernetes.Interface, namespace, name string, port int32) error {
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace: %w", err)
	}
	svc, err := c.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		svc, err = c.CoreV1().Services(namespace).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(port)}}},
		}, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("service: %w", err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-apiservertest", Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "apiservertest.kubeembed"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{apiserver.LocalEndpointIP},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
	for _, p := range svc.Spec.Ports {
		slice.Ports = append(slice.Ports, discoveryv1.EndpointPort{Name: ptr.To(p.Name), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)})
	}
	if _, err := c.DiscoveryV1().EndpointSlices(namespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("endpoint slice: %w", err)
	}
	return nil
}
