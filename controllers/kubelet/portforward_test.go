package kubelet_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// echo answers each line it reads with "echo: " and the line, until the
// client has sent all it had.
func echo(c net.Conn) {
	lines := bufio.NewScanner(c)
	for lines.Scan() {
		fmt.Fprintf(c, "echo: %s\n", lines.Text())
	}
}

// dialer is how client-go connects a port-forward: SPDY, or SPDY
// tunneled in WebSocket with the fallback to SPDY kubectl uses.
func (e env) dialer(t *testing.T, pod string, websocket bool) httpstream.Dialer {
	return e.dialerOf(t, e.srv.RESTConfig(), pod, websocket)
}

// dialerOf is dialer with the client configuration cfg.
func (e env) dialerOf(t *testing.T, cfg *rest.Config, pod string, websocket bool) httpstream.Dialer {
	t.Helper()
	u := e.client.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name(pod).SubResource("portforward").URL()
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	require.NoError(t, err)
	d := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	if !websocket {
		return d
	}
	tunnel, err := portforward.NewSPDYOverWebsocketDialer(u, cfg)
	require.NoError(t, err)
	return portforward.NewFallbackDialer(tunnel, d, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

// forward forwards a local port to the pod's port until ctx ends, and
// returns the local port and what ForwardPorts returns.
func (e env) forward(ctx context.Context, t *testing.T, d httpstream.Dialer, port int) (int, <-chan error) {
	t.Helper()
	ready := make(chan struct{})
	pf, err := portforward.NewOnAddressesWithContext(ctx, d, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(port)}, ready, io.Discard, io.Discard)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("port-forward: %v", err)
	}
	ports, err := pf.GetPorts()
	require.NoError(t, err)
	return int(ports[0].Local), done
}

func TestPortForward(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.runningPod(t, simplePod("p"))
	e.k.HandlePort("default", "p", 8080, echo)
	inProcess := e.srv.InProcessRESTConfig() // its upgrades go over the network
	for name, d := range map[string]httpstream.Dialer{
		"spdy":                         e.dialer(t, "p", false),
		"websocket":                    e.dialer(t, "p", true),
		"spdy, in-process config":      e.dialerOf(t, inProcess, "p", false),
		"websocket, in-process config": e.dialerOf(t, inProcess, "p", true),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			local, _ := e.forward(t.Context(), t, d, 8080)
			for range 2 { // connections one after the other over one forward
				c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(local)))
				require.NoError(t, err)
				fmt.Fprint(c, "ping\npong\n")
				require.NoError(t, c.(*net.TCPConn).CloseWrite())
				got, err := io.ReadAll(c)
				require.NoError(t, err)
				assert.Equal(t, "echo: ping\necho: pong\n", string(got))
				require.NoError(t, c.Close())
			}
		})
	}
}

func TestPortForwardToAClosedPort(t *testing.T) {
	t.Parallel()
	e := start(t)
	pod := e.runningPod(t, simplePod("p"))

	// What kubectl port-forward sees: the kubelet's error on the error
	// stream, then the forward ends.
	local, done := e.forward(t.Context(), t, e.dialer(t, "p", false), 9999)
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(local)))
	require.NoError(t, err)
	_, _ = io.ReadAll(c)
	require.NoError(t, c.Close())
	assert.ErrorIs(t, <-done, portforward.ErrLostConnectionToPod)

	// The error, read as client-go does.
	conn, _, err := e.dialer(t, "p", false).Dial(portforward.PortForwardProtocolV1Name)
	require.NoError(t, err)
	defer conn.Close()
	headers := http.Header{}
	headers.Set(corev1.StreamType, corev1.StreamTypeError)
	headers.Set(corev1.PortHeader, "9999")
	headers.Set(corev1.PortForwardRequestIDHeader, "0")
	errorStream, err := conn.CreateStream(headers)
	require.NoError(t, err)
	require.NoError(t, errorStream.Close())
	headers.Set(corev1.StreamType, corev1.StreamTypeData)
	_, err = conn.CreateStream(headers)
	require.NoError(t, err)
	msg, err := io.ReadAll(errorStream)
	require.NoError(t, err)
	sandbox := `[0-9a-f]{64}`
	assert.Regexp(t, regexp.MustCompile(`^error forwarding port 9999 to pod `+sandbox+`, uid : failed to execute portforward in network namespace `+
		`"/var/run/netns/cni-[0-9a-f-]{36}": failed to connect to localhost:9999 inside namespace "`+sandbox+`", `+
		`IPv4: dial tcp4 127.0.0.1:9999: connect: connection refused IPv6 dial tcp6 \[::1\]:9999: connect: connection refused $`), string(msg))
	_ = pod
}

func TestPodProxy(t *testing.T) {
	t.Parallel()
	e := start(t)
	pod := simplePod("p")
	pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080}}
	pod = e.runningPod(t, pod)
	e.k.HandleProxy("default", "p", 8080, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s?%s from %s", r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("X-Forwarded-Uri"))
	}))
	pods := e.client.CoreV1().Pods("default")

	got, err := pods.ProxyGet("http", "p", "8080", "hello/world", map[string]string{"q": "1"}).DoRaw(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "GET /hello/world?q=1 from /api/v1/namespaces/default/pods/http:p:8080/proxy/hello/world", string(got))
	// Without a port: the first one the pod's containers declare.
	got, err = pods.ProxyGet("", "p", "", "/", nil).DoRaw(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "GET /? from /api/v1/namespaces/default/pods/p/proxy/", string(got))

	// A port nothing listens on.
	_, err = pods.ProxyGet("", "p", "8081", "/", nil).Stream(t.Context())
	assertStatus(t, err, http.StatusServiceUnavailable,
		fmt.Sprintf("error trying to reach service: dial tcp %s:8081: connect: connection refused", pod.Status.PodIP))
}
