package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"

	"github.com/kubeembed/apiserver/controllers/kubelet"
	"k8s.io/client-go/tools/cache"
)

// LocalEndpointIP is the address by which Endpoints and EndpointSlices name
// this machine's loopback interface (apiserver.LocalEndpointIP says why):
// an endpoint LocalEndpointIP:port is where the server calls
// 127.0.0.1:port.
const LocalEndpointIP = "192.0.2.1"

var localEndpoint = netip.MustParseAddr(LocalEndpointIP)

// simulated are the simulated pods' and nodes' addresses, which no one
// listens at: dialing one would send a packet off this machine.
var simulated = []netip.Prefix{netip.MustParsePrefix(kubelet.PodAddresses), netip.MustParsePrefix(kubelet.NodeAddresses)}

// dialLocal dials as net.Dialer does, but LocalEndpointIP on the loopback
// interface, and refuses the simulated pods' and nodes' addresses.
func dialLocal(ctx context.Context, network, address string) (net.Conn, error) {
	if ap, err := netip.ParseAddrPort(address); err == nil {
		if ap.Addr().Unmap() == localEndpoint {
			address = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), ap.Port()).String()
		}
		for _, p := range simulated {
			if p.Contains(ap.Addr().Unmap()) {
				return nil, fmt.Errorf("dial %s: %s is a simulated pod or node address, where nothing listens; "+
					"serve the Service from the test instead (apiservertest.ServeService)", address, ap.Addr())
			}
		}
	}
	d := net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return d.DialContext(ctx, network, address)
}

// serviceResolver finds where a Service is served, as kube-apiserver does
// with --enable-aggregator-routing: a ready endpoint of the Service's port
// in its EndpointSlices (an address on this machine is LocalEndpointIP,
// which dialLocal reaches); default/kubernetes:443 is the server itself.
// It reads the server's informers, as kube-apiserver does, and when they
// cannot resolve the Service reads the server itself, so that a Service
// or EndpointSlice created just before a webhook call is always found (an
// informer is a few milliseconds behind); the errors are kube-apiserver's
// ("no endpoints available for service ...", `service "x" not found`).
type serviceResolver struct {
	client   kubernetes.Interface
	services corev1listers.ServiceLister
	slices   proxy.EndpointSliceGetter
	self     *url.URL
}

// newServiceResolver returns the resolver of the server at self, and the
// informers it reads.
func newServiceResolver(inf *informerSet, self *url.URL) (serviceResolver, []cache.InformerSynced, error) {
	slices, err := proxy.NewEndpointSliceListerGetter(inf.kube.Discovery().V1().EndpointSlices().Lister())
	if err != nil {
		return serviceResolver{}, nil, err
	}
	synced := []cache.InformerSynced{inf.kube.Core().V1().Services().Informer().HasSynced, inf.kube.Discovery().V1().EndpointSlices().Informer().HasSynced}
	return serviceResolver{client: inf.client, services: inf.kube.Core().V1().Services().Lister(), slices: slices, self: self}, synced, nil
}

func (r serviceResolver) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	if namespace == metav1.NamespaceDefault && name == "kubernetes" && port == 443 {
		return r.self, nil
	}
	if u, err := proxy.ResolveEndpoint(r.services, r.slices, namespace, name, port); err == nil {
		return u, nil
	}
	return proxy.ResolveEndpoint(liveServices{r.client}, liveSlices{r.client}, namespace, name, port)
}

// lookupTimeout bounds a resolver's read of the server.
const lookupTimeout = 10 * time.Second

// liveServices is a ServiceLister reading the server; only Get is used by
// the resolver.
type liveServices struct{ client kubernetes.Interface }

func (l liveServices) List(labels.Selector) ([]*corev1.Service, error) {
	return nil, errors.New("liveServices: List is not supported")
}

func (l liveServices) Services(namespace string) corev1listers.ServiceNamespaceLister {
	return liveNamespaceServices{l.client, namespace}
}

type liveNamespaceServices struct {
	client    kubernetes.Interface
	namespace string
}

func (l liveNamespaceServices) List(labels.Selector) ([]*corev1.Service, error) {
	return nil, errors.New("liveServices: List is not supported")
}

// Get answers as a lister does: NotFound names the resource "service".
func (l liveNamespaceServices) Get(name string) (*corev1.Service, error) {
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	svc, err := l.client.CoreV1().Services(l.namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, apierrors.NewNotFound(corev1.Resource("service"), name)
	}
	return svc, err
}

// liveSlices lists a Service's EndpointSlices from the server.
type liveSlices struct{ client kubernetes.Interface }

func (l liveSlices) GetEndpointSlices(namespace, service string) ([]*discoveryv1.EndpointSlice, error) {
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	list, err := l.client.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{discoveryv1.LabelServiceName: service}.String()})
	if err != nil {
		return nil, err
	}
	out := make([]*discoveryv1.EndpointSlice, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// serviceTransport is the transport of the server's calls to Services
// (webhooks, conversion webhooks, aggregated API servers): dialLocal.
func serviceTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil // a Service is never reached through an HTTP proxy
	t.DialContext = dialLocal
	return t
}
