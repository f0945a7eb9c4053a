package core

// nodes/proxy and services/proxy, as kube-apiserver's node and service
// ProxyREST serve them (pkg/registry/core/node/rest/proxy.go,
// node.ResourceLocation; service/proxy.go, service/storage's
// ResourceLocation): the location from the name ("name", "name:port" or
// "scheme:name:port"), then the request proxied there with apimachinery's
// UpgradeAwareHandler over the cluster network (providers.Config
// ClusterDialer), as pods/proxy is.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/proxy"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	apiproxy "k8s.io/apiserver/pkg/util/proxy"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"
)

var (
	_ rest.Connecter = (*nodeProxyREST)(nil)
	_ rest.Connecter = (*serviceProxyREST)(nil)
)

// proxyMethods are what the proxy subresources forward (discovery lists
// them as create, delete, get, patch and update).
var proxyMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}

// proxyTo proxies the request to loc with the subpath after .../proxy
// appended, rewriting the links of HTML answers, as kube-apiserver does.
func proxyTo(ctx context.Context, loc *url.URL, transport http.RoundTripper, responder rest.Responder) http.Handler {
	loc.Path = utilnet.JoinPreservingTrailingSlash(loc.Path, subpath(ctx))
	return proxy.NewUpgradeAwareHandler(loc, transport, true, false, proxy.NewErrorResponder(responder))
}

// nodeProxyREST is nodes/proxy and nodes/proxy/{path}: the node's kubelet,
// or another port of the node. The simulated kubelet serves what
// kube-apiserver's own subresources call (containerLogs, exec, attach,
// portForward: controllers/kubelet's server), healthz and pods; any other
// path (stats, metrics, configz) answers what its server answers for a
// path it does not know, 404.
type nodeProxyREST struct {
	nodes     *registry.Store
	transport http.RoundTripper
}

// addNodeProxy adds nodes/proxy to s.
func addNodeProxy(cfg providers.Config, store *registry.Store, s map[string]rest.Storage) error {
	s["nodes/proxy"] = &nodeProxyREST{nodes: store, transport: clusterTransport(cfg.ClusterDialer)}
	return nil
}

func (*nodeProxyREST) New() runtime.Object                               { return &corev1.NodeProxyOptions{} }
func (*nodeProxyREST) Destroy()                                          {}
func (*nodeProxyREST) NewConnectOptions() (runtime.Object, bool, string) { return nil, true, "path" }
func (*nodeProxyREST) ConnectMethods() []string                          { return proxyMethods }

// Connect implements rest.Connecter.
func (r *nodeProxyREST) Connect(ctx context.Context, id string, _ runtime.Object, responder rest.Responder) (http.Handler, error) {
	loc, err := r.resourceLocation(ctx, id)
	if err != nil {
		return nil, err
	}
	return proxyTo(ctx, loc, r.transport, responder), nil
}

// resourceLocation is node.ResourceLocation: the kubelet's scheme and port
// when no port is asked for or the kubelet's is, else the port asked for
// at the node's address.
func (r *nodeProxyREST) resourceLocation(ctx context.Context, id string) (*url.URL, error) {
	scheme, name, port, valid := utilnet.SplitSchemeNamePort(id)
	if !valid {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid node request %q", id))
	}
	conn, err := connection(ctx, r.nodes, name)
	if err != nil {
		return nil, err
	}
	host, kubeletPort, err := net.SplitHostPort(conn.host)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if err := r.proxyable(ctx, name, host); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if port == "" || port == kubeletPort {
		return &url.URL{Scheme: conn.scheme, Host: conn.host}, nil
	}
	return &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, port)}, nil
}

// proxyable is isProxyableHostname: every address host resolves to must be
// a global unicast one. kube-apiserver asks the machine's resolver; here a
// node's name resolves in the cluster network, to the node's IP addresses
// (as the simulated kubelet's network resolves it), so that the check does
// not depend on this machine's DNS.
func (r *nodeProxyREST) proxyable(ctx context.Context, name, host string) error {
	ips := []net.IP{net.ParseIP(host)}
	if ips[0] == nil {
		obj, err := r.nodes.Get(genericapirequest.WithNamespace(ctx, ""), name, &metav1.GetOptions{})
		if err != nil {
			return err
		}
		ips = nil
		for _, a := range obj.(*corev1.Node).Status.Addresses {
			if ip := net.ParseIP(a.Address); ip != nil && (a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP) {
				ips = append(ips, ip)
			}
		}
	}
	if len(ips) == 0 {
		return &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	for _, ip := range ips {
		if !ip.IsGlobalUnicast() {
			return errors.New("address not allowed")
		}
	}
	return nil
}

// serviceProxyREST is services/proxy and services/proxy/{path}: a ready
// endpoint of the Service, at the pod that is its target.
type serviceProxyREST struct {
	services, pods rest.Getter
	// slices are the server's EndpointSlices by Service, from its informer
	// as kube-apiserver reads them: a slice written a moment ago may not
	// be there yet.
	slices    apiproxy.EndpointSliceGetter
	transport http.RoundTripper
}

// newServiceProxy is services/proxy over the services and pods storage.
func newServiceProxy(cfg providers.Config, services, pods rest.Getter) (*serviceProxyREST, error) {
	slices, err := apiproxy.NewEndpointSliceIndexerGetter(cfg.Informers.Discovery().V1().EndpointSlices())
	if err != nil {
		return nil, err
	}
	return &serviceProxyREST{services: services, pods: pods, slices: slices, transport: clusterTransport(cfg.ClusterDialer)}, nil
}

func (*serviceProxyREST) New() runtime.Object                               { return &corev1.ServiceProxyOptions{} }
func (*serviceProxyREST) Destroy()                                          {}
func (*serviceProxyREST) NewConnectOptions() (runtime.Object, bool, string) { return nil, true, "path" }
func (*serviceProxyREST) ConnectMethods() []string                          { return proxyMethods }

// Connect implements rest.Connecter.
func (r *serviceProxyREST) Connect(ctx context.Context, id string, _ runtime.Object, responder rest.Responder) (http.Handler, error) {
	loc, err := r.resourceLocation(ctx, id)
	if err != nil {
		return nil, err
	}
	return proxyTo(ctx, loc, r.transport, responder), nil
}

// resourceLocation is the Service's ResourceLocation: a port asked for by
// number is the Service's port of that number (the Service is read only
// then: a Service that does not exist has no endpoints, 503, unless a port
// number is asked for, 404), then a random ready endpoint serving that
// port whose target is a pod of the namespace with the endpoint's IP.
func (r *serviceProxyREST) resourceLocation(ctx context.Context, id string) (*url.URL, error) {
	scheme, name, port, valid := utilnet.SplitSchemeNamePort(id)
	if !valid {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid service request %q", id))
	}
	if number, err := strconv.ParseInt(port, 10, 64); err == nil {
		if port, err = r.portName(ctx, name, number); err != nil {
			return nil, err
		}
	}
	namespace := genericapirequest.NamespaceValue(ctx)
	if namespace == "" {
		return nil, apierrors.NewBadRequest("missing required namespace")
	}
	slices, err := r.slices.GetEndpointSlices(namespace, name)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if len(slices) == 0 {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no endpoints available for service %q", name))
	}
	// The cluster's services are IPv4 (defaultService): its slices first.
	hostPort, err := apiproxy.RandomEndpoint(name, slices, port, corev1.IPv4Protocol, func(ep *discoveryv1.Endpoint) bool {
		return r.podEndpoint(ctx, namespace, ep)
	})
	if err != nil {
		return nil, err
	}
	return &url.URL{Scheme: scheme, Host: hostPort}, nil
}

// portName is the name of the Service's port numbered number.
func (r *serviceProxyREST) portName(ctx context.Context, name string, number int64) (string, error) {
	obj, err := r.services.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	for _, p := range obj.(*corev1.Service).Spec.Ports {
		if int64(p.Port) == number {
			return p.Name, nil
		}
	}
	return "", apierrors.NewServiceUnavailable(fmt.Sprintf("no service port %d found for service %q", number, name))
}

// podEndpoint is isValidAddress: only endpoints that are pods of the
// namespace, at the pod's IP, are proxied to.
func (r *serviceProxyREST) podEndpoint(ctx context.Context, namespace string, ep *discoveryv1.Endpoint) bool {
	if ep.TargetRef == nil || ep.TargetRef.Namespace != namespace {
		return false
	}
	obj, err := r.pods.Get(ctx, ep.TargetRef.Name, &metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, ip := range obj.(*corev1.Pod).Status.PodIPs {
		if ip.IP == ep.Addresses[0] {
			return true
		}
	}
	return false
}
