package core

// How kube-apiserver reaches a node's kubelet (pkg/kubelet/client's
// NodeConnectionInfoGetter) and the cluster network: the node's preferred
// address and kubelet port, the features it declares, and one transport
// whose dials go through providers.Config.ClusterDialer.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/kubeembed/apiserver/providers/registry"
)

// preferredAddressTypes are kube-apiserver's default
// --kubelet-preferred-address-types.
var preferredAddressTypes = []corev1.NodeAddressType{corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeInternalIP,
	corev1.NodeExternalDNS, corev1.NodeExternalIP}

// extendWebSocketsToKubelet is the feature a node declares when its
// kubelet translates WebSocket streams itself (a v1.37 kubelet does).
const extendWebSocketsToKubelet = "ExtendWebSocketsToKubelet"

// defaultKubeletPort is where a kubelet serves when its node does not say.
const defaultKubeletPort = 10250

// kubeletConn is how to reach a node's kubelet.
type kubeletConn struct {
	// scheme and host (address:port) of the kubelet's URLs. The scheme is
	// http: the simulated kubelet serves plain HTTP over in-process
	// connections, where a cluster's serves HTTPS.
	scheme, host string
	// websockets: the kubelet translates WebSocket streams itself.
	websockets bool
}

// connection is GetConnectionInfo: the node must exist and report an
// address.
func connection(ctx context.Context, nodes *registry.Store, name string) (kubeletConn, error) {
	obj, err := nodes.Get(genericapirequest.WithNamespace(ctx, ""), name, &metav1.GetOptions{})
	if err != nil {
		return kubeletConn{}, err
	}
	node := obj.(*corev1.Node)
	host, err := preferredAddress(node)
	if err != nil {
		return kubeletConn{}, err
	}
	port := int(node.Status.DaemonEndpoints.KubeletEndpoint.Port)
	if port <= 0 {
		port = defaultKubeletPort
	}
	return kubeletConn{scheme: "http", host: net.JoinHostPort(host, strconv.Itoa(port)),
		websockets: slices.Contains(node.Status.DeclaredFeatures, extendWebSocketsToKubelet)}, nil
}

// preferredAddress is GetPreferredNodeAddress.
func preferredAddress(node *corev1.Node) (string, error) {
	for _, t := range preferredAddressTypes {
		for _, a := range node.Status.Addresses {
			if a.Type == t {
				return a.Address, nil
			}
		}
	}
	return "", fmt.Errorf("no preferred addresses found; known addresses: %v", node.Status.Addresses)
}

// clusterTransport is the transport of every request to a kubelet or a
// pod: dials go through dial, the cluster network (nothing answers when it
// is nil), never through a proxy of the environment. Connections are not
// kept: each request or stream has its own, which ends with it.
func clusterTransport(dial func(ctx context.Context, network, address string) (net.Conn, error)) *http.Transport {
	if dial == nil {
		dial = unreachable
	}
	return &http.Transport{DialContext: dial, DisableKeepAlives: true}
}

// unreachable fails as a dial into a network where nothing runs: a name
// does not resolve, an address refuses the connection.
func unreachable(_ context.Context, network, address string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	if net.ParseIP(host) == nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}}
	}
	addr, _ := net.ResolveTCPAddr("tcp", address)
	return nil, &net.OpError{Op: "dial", Net: network, Addr: addr, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}
