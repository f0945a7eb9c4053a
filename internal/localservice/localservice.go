// Package localservice serves an http.Handler of this process over TLS as a
// Service of a kubeembed server, as a webhook server or an aggregated API
// server runs in a cluster: a listener on 127.0.0.1, a certificate for the
// Service's DNS names from a CA of its own, and an EndpointSlice that sends
// the Service to that listener through LocalEndpointIP.
//
// apiservertest.ServeService (for a test) and metricsapi.Serve (for the CLI
// and programs) are built on it, so both serve a Service one way.
package localservice

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	discoveryv1ac "k8s.io/client-go/applyconfigurations/discovery/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeembed/apiserver/internal/certs"
	"github.com/kubeembed/apiserver/internal/controlplane"
)

// FieldManager is the manager of what this package applies.
const FieldManager = "kubeembed"

// managedBy marks the EndpointSlices it writes; the endpointslice
// controller leaves slices another manager owns alone.
const managedBy = "local-service.kubeembed.io"

// Service is a handler served as a Service until Close.
type Service struct {
	// CABundle trusts the handler's certificate: the caBundle of a webhook
	// configuration or an APIService naming the Service.
	CABundle []byte

	namespace, name string
	client          kubernetes.Interface
	// createdService is whether Publish created the Service (else it was
	// there and is the owner's).
	createdService bool
	server         *http.Server
	listener       *onceCloser
	conns          *connStates
	// served is closed when the server's Serve loop has returned.
	served chan struct{}
}

// Serve serves handler over TLS on 127.0.0.1 and publishes it as the
// Service namespace/name with Publish. The listener asks clients for a
// certificate without verifying it: an aggregated API server checks the
// aggregator's (the front proxy's) in r.TLS.PeerCertificates. errorLog
// receives net/http's own errors (nil: the log package's, as net/http).
// On error nothing is left serving.
func Serve(ctx context.Context, c kubernetes.Interface, namespace, name string, handler http.Handler, errorLog *log.Logger) (*Service, error) {
	ca, err := certs.NewCA("kubeembed-service-ca")
	if err != nil {
		return nil, err
	}
	dns := name + "." + namespace + ".svc"
	leaf, err := ca.Serving(dns, dns+".cluster.local")
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := serve(ln, cert, handler, errorLog)
	s.CABundle, s.namespace, s.name, s.client = ca.CertPEM, namespace, name, c
	if s.createdService, err = Publish(ctx, c, namespace, name, int32(ln.Addr().(*net.TCPAddr).Port)); err != nil {
		// Not Close(ctx): ctx may be what ended Publish. No request can be
		// in flight: the EndpointSlice, written last, is what tells the port.
		_ = s.server.Close()
		<-s.served
		return nil, err
	}
	return s, nil
}

// serve serves handler over TLS with cert on ln until Close.
func serve(ln net.Listener, cert tls.Certificate, handler http.Handler, errorLog *log.Logger) *Service {
	// HTTP/1.1 only, as httptest serves TLS (what ServeService used before):
	// no HTTP/2 connection goroutines to wind down at Close.
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	s := &Service{served: make(chan struct{}), listener: &onceCloser{Listener: ln},
		conns: &connStates{m: map[net.Conn]http.ConnState{}}}
	s.server = &http.Server{Handler: handler, ErrorLog: s.conns.filtered(errorLog), Protocols: protocols, ReadHeaderTimeout: 10 * time.Second,
		ConnState: s.conns.set,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, ClientAuth: tls.RequestClientCert}}
	go func() {
		defer close(s.served)
		_ = s.server.ServeTLS(s.listener, "", "") // an error once Close closes the listener
	}()
	return s
}

// Close stops the handler as httptest.Server.Close does: no new
// connection, those without a request closed, those with one closed once
// answered (or when ctx ends); it returns once the server's goroutine
// has. The Service and its EndpointSlice stay (Unpublish removes them).
func (s *Service) Close(ctx context.Context) error {
	_ = s.listener.Close()
	// A connection that has not sent a request (a client's transport dials
	// one spare when requests race) would hold Shutdown for 5 s, net/http's
	// grace for a first request: one Close in two did, in metricsapi's tests.
	s.conns.closeNew()
	err := s.server.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, s.server.Close())
	}
	<-s.served
	return err
}

// onceCloser is a listener closed once: Close closes it before Shutdown,
// which closes it again.
type onceCloser struct {
	net.Listener
	once sync.Once
	err  error
}

func (l *onceCloser) Close() error {
	l.once.Do(func() { l.err = l.Listener.Close() })
	return l.err
}

// connStates is the state of each open connection (http.Server.ConnState).
type connStates struct {
	mu sync.Mutex
	m  map[net.Conn]http.ConnState
	// closed are the handshake errors' prefixes of the connections
	// closeNew closed, which may be in their TLS handshake.
	closed []string
}

// filtered is errorLog (nil: the log package's, as net/http's) without
// the TLS handshake errors of the connections closeNew closed: Close ends
// them on purpose, and net/http would log each one ("use of closed
// network connection").
func (c *connStates) filtered(errorLog *log.Logger) *log.Logger {
	if errorLog == nil {
		errorLog = log.Default()
	}
	return log.New(writerFunc(func(p []byte) (int, error) {
		c.mu.Lock()
		ours := slices.ContainsFunc(c.closed, func(prefix string) bool { return bytes.HasPrefix(p, []byte(prefix)) })
		c.mu.Unlock()
		if !ours {
			_ = errorLog.Output(2, strings.TrimSuffix(string(p), "\n"))
		}
		return len(p), nil
	}), "", 0)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func (c *connStates) set(conn net.Conn, state http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if state == http.StateClosed || state == http.StateHijacked {
		delete(c.m, conn)
		return
	}
	c.m[conn] = state
}

// closeNew closes the connections that have not started a request.
func (c *connStates) closeNew() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for conn, state := range c.m {
		if state == http.StateNew {
			c.closed = append(c.closed, "http: TLS handshake error from "+conn.RemoteAddr().String()+":")
			_ = conn.Close()
		}
	}
}

// Unpublish deletes the EndpointSlice Serve applied and the Service if
// Serve created it, so that a cluster kept on disk (the CLI's --data-dir)
// keeps no Service leading to a port nothing serves any more.
func (s *Service) Unpublish(ctx context.Context) error {
	err := s.client.DiscoveryV1().EndpointSlices(s.namespace).Delete(ctx, sliceName(s.name), metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		err = nil
	}
	if s.createdService {
		if e := s.client.CoreV1().Services(s.namespace).Delete(ctx, s.name, metav1.DeleteOptions{}); e != nil && !apierrors.IsNotFound(e) {
			err = errors.Join(err, e)
		}
	}
	return err
}

func sliceName(service string) string { return service + "-kubeembed" }

// Publish makes sure the namespace and the Service namespace/name exist (a
// Service there is kept, as one applied from config/webhook/service.yaml;
// a new one is type ClusterIP with port 443 named "https") and applies an
// EndpointSlice that sends each port of the Service to port at
// LocalEndpointIP, which the server reaches on the loopback interface.
// Applied, not created: a slice left by a process that did not stop
// cleanly (a cluster on disk) is taken over. created is whether it
// created the Service.
func Publish(ctx context.Context, c kubernetes.Interface, namespace, name string, port int32) (created bool, err error) {
	_, err = c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("namespace: %w", err)
	}
	svc, err := c.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		created = true
		svc, err = c.CoreV1().Services(namespace).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(port)}}},
		}, metav1.CreateOptions{})
	}
	if err != nil {
		return false, fmt.Errorf("service: %w", err)
	}
	slice := discoveryv1ac.EndpointSlice(sliceName(name), namespace).
		WithLabels(map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: managedBy}).
		WithAddressType(discoveryv1.AddressTypeIPv4).
		WithEndpoints(discoveryv1ac.Endpoint().WithAddresses(controlplane.LocalEndpointIP).
			WithConditions(discoveryv1ac.EndpointConditions().WithReady(true)))
	for _, p := range svc.Spec.Ports {
		slice.WithPorts(discoveryv1ac.EndpointPort().WithName(p.Name).WithPort(port).WithProtocol(corev1.ProtocolTCP))
	}
	if _, err := c.DiscoveryV1().EndpointSlices(namespace).Apply(ctx, slice, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
		return created, fmt.Errorf("endpoint slice: %w", err)
	}
	return created, nil
}
