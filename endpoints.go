package apiserver

import "github.com/kubeembed/apiserver/internal/controlplane"

// LocalEndpointIP is the address by which Endpoints and EndpointSlices name
// this machine's loopback interface. kube-apiserver refuses loopback
// addresses in endpoints (they mean a different host to every reader), and
// so does kubeembed; a server in the test process listens on 127.0.0.1. So
// an endpoint LocalEndpointIP:port is where the server calls 127.0.0.1:port,
// when it reaches a Service (a webhook, a conversion webhook, an aggregated
// API server), and the default/kubernetes Service's endpoint is the server
// at LocalEndpointIP. It is in TEST-NET-1 (RFC 5737), which no network
// routes: a request to it never leaves the machine.
const LocalEndpointIP = controlplane.LocalEndpointIP
