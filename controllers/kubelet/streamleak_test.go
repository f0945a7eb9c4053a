package kubelet_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/remotecommand"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/controllers/kubelet"
	"github.com/kubeembed/apiserver/internal/leaktest"
)

// TestNoStreamLeftAfterClose checks that clients that give up in the
// middle of streams (an exec over SPDY and over WebSocket, a followed log,
// a port-forward with a connection open) leave no goroutine behind once
// the server is closed. A first server runs the same streams, so that
// what lives as long as the process has started before the check.
//
// Serial on purpose: goleak looks at every goroutine of the process; the
// package's parallel tests wait until the serial ones have ended.
func TestNoStreamLeftAfterClose(t *testing.T) {
	giveUpMidStream(t)
	before := leaktest.IgnoreCurrent(t)
	giveUpMidStream(t)
	leaktest.VerifyNone(t, before,
		// client-go keeps idle HTTP/2 connections of its cached
		// transports until they time out; they are the clients'.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
		// client-go's WebSocket executor pings until a ping fails, at its
		// next tick after the connection is gone: the client's too.
		goleak.IgnoreTopFunction("k8s.io/client-go/tools/remotecommand.(*heartbeat).start"),
	)
}

// giveUpMidStream starts a server, opens streams, abandons them and closes
// the server.
func giveUpMidStream(t *testing.T) {
	t.Helper()
	srv, err := apiserver.New(apiserver.Options{Controllers: []controllers.Name{controllers.ServiceAccount, controllers.Kubelet},
		Nodes: controllers.Nodes(1), Clock: clocktesting.NewFakeClock(time.Now())})
	require.NoError(t, err)
	require.NoError(t, srv.Start(t.Context()))
	defer func() { require.NoError(t, srv.Close()) }()
	client, err := srv.Clientset()
	require.NoError(t, err)
	e := env{srv: srv, client: client, k: srv.Kubelet()}
	e.runningPod(t, simplePod("p"))
	e.k.HandleExec("default", "p", "app", func(ctx context.Context, x kubelet.Exec) int {
		_, _ = io.Copy(x.Stdout, x.Stdin)
		<-ctx.Done() // a process that runs until the client goes
		return 0
	})
	e.k.HandlePort("default", "p", 8080, echo)

	ctx, cancel := context.WithCancel(t.Context())
	for _, protocol := range []string{"spdy", "websocket"} {
		abandonExec(ctx, t, e, protocol)
	}
	e.k.SetLogs("default", "p", "app", "a line\n")
	logs, err := client.CoreV1().Pods("default").GetLogs("p", &corev1.PodLogOptions{Follow: true}).Stream(ctx)
	require.NoError(t, err)
	_, err = bufio.NewReader(logs).ReadString('\n')
	require.NoError(t, err)
	local, forwarding := e.forward(ctx, t, e.dialer(t, "p", true), 8080)
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(local)))
	require.NoError(t, err)
	_, err = io.WriteString(c, "ping\n")
	require.NoError(t, err)
	_, err = bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err)
	cancel()
	_ = c.Close()
	_ = logs.Close()
	<-forwarding
}

// abandonExec starts an exec that runs until ctx ends, and returns once
// its first output arrived.
func abandonExec(ctx context.Context, t *testing.T, e env, protocol string) {
	t.Helper()
	opts := &corev1.PodExecOptions{Command: []string{"cat"}, Stdin: true, Stdout: true}
	req := e.client.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name("p").SubResource("exec").
		VersionedParams(opts, parameterCodec)
	exec, err := executors[protocol](e, req.URL())
	require.NoError(t, err)
	out, stdout := io.Pipe()
	go func() {
		// The input ends with ctx, as a terminal closed.
		in := &ctxReader{ctx: ctx, r: strings.NewReader("hello\n")}
		_ = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: in, Stdout: stdout})
		_ = stdout.Close()
	}()
	_, err = bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	go func() { _, _ = io.Copy(io.Discard, out) }()
}

// ctxReader reads r, then blocks until ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if n, err := c.r.Read(p); err != io.EOF {
		return n, err
	}
	<-c.ctx.Done()
	return 0, io.EOF
}
