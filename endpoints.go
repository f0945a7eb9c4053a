package apiserver

import (
	"context"
	"net"
	"net/netip"
	"time"
)

// LocalEndpointIP is the address by which Endpoints and EndpointSlices name
// this machine's loopback interface. kube-apiserver refuses loopback
// addresses in endpoints (they mean a different host to every reader), and
// so does kubeembed; a server in the test process listens on 127.0.0.1. So
// an endpoint LocalEndpointIP:port is where the server calls 127.0.0.1:port,
// when it reaches a Service (a webhook, a conversion webhook, an aggregated
// API server), and the default/kubernetes Service's endpoint is the server
// at LocalEndpointIP. It is in TEST-NET-1 (RFC 5737), which no network
// routes: a request to it never leaves the machine.
const LocalEndpointIP = "192.0.2.1"

var localEndpoint = netip.MustParseAddr(LocalEndpointIP)

// dialLocal dials as net.Dialer does, but LocalEndpointIP on the loopback
// interface.
func dialLocal(ctx context.Context, network, address string) (net.Conn, error) {
	if ap, err := netip.ParseAddrPort(address); err == nil && ap.Addr().Unmap() == localEndpoint {
		address = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), ap.Port()).String()
	}
	d := net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return d.DialContext(ctx, network, address)
}
