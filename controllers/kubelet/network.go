package kubelet

// The simulated cluster network, as kube-apiserver reaches it: a node's
// kubelet at the node's address and port 10250, a pod's ports at its IP.
// Connections are in-process pipes; nothing listens on a socket.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// DialContext connects to address ("host:port") on the simulated cluster
// network, as kube-apiserver dials nodes and pods (providers.Config
// ClusterDialer):
//   - a simulated node's name or InternalIP, port 10250: the node's
//     kubelet server (containerLogs, exec, attach, portForward);
//   - a pod's IP (a host-network pod's is its node's) at a port a test
//     serves (HandlePort, HandleProxy): that handler, as the process
//     listening there.
//
// Anything else fails as a network does: the connection is refused (a
// stopped or removed node's kubelet too), and a name no node has does not
// resolve.
func (k *Kubelet) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("invalid port %q", portText)}
	}
	if err := ctx.Err(); err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	t := k.resolve(host, int32(port))
	switch {
	case t.unknownName:
		return nil, &net.OpError{Op: "dial", Net: network, Err: &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}}
	case t.node != "":
		return k.dialNode(t.node), nil
	case t.pod != "":
		if c := k.streams.dialPort(t.pod, int32(port)); c != nil {
			return c, nil
		}
	}
	return nil, refused(network, net.JoinHostPort(t.ip, portText))
}

// refused is the error of a dial to address that nothing listens at, as
// the host's network stack reports it ("dial tcp 10.244.0.5:8080:
// connect: connection refused").
func refused(network, address string) error {
	var addr net.Addr
	if a, err := net.ResolveTCPAddr("tcp", address); err == nil {
		addr = a
	}
	return &net.OpError{Op: "dial", Net: network, Addr: addr, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}

// target is what an address of the cluster network reaches.
type target struct {
	// ip is the host resolved (the host itself when it is not a name).
	ip string
	// node: the kubelet of that node; pod: that pod's port (namespace/name).
	node, pod   string
	unknownName bool
}

// resolve finds what host:port reaches: a node's running kubelet, a port
// a test serves in a pod whose sandbox runs, or nothing.
func (k *Kubelet) resolve(host string, port int32) target {
	k.mu.Lock()
	defer k.mu.Unlock()
	t := target{ip: host}
	var at *node
	for _, n := range k.simulated {
		if n.spec.Name == host || n.internalIP() == host {
			at, t.ip = n, n.internalIP()
		}
	}
	switch {
	case at == nil && net.ParseIP(host) == nil:
		t.unknownName = true
		return t
	case at != nil && (at.uid == "" || at.stopped):
		return t // not registered yet, or its kubelet stopped
	case at != nil && port == kubeletPort:
		t.node = at.spec.Name
		return t
	}
	// A pod's own IP, or a host-network pod's (its node's).
	for key, uid := range k.keys {
		r := k.running[uid]
		if r != nil && r.ip == t.ip && r.sandbox && !r.deleted && !r.stopped() && k.streams.serves(key, port) {
			t.pod = key
			return t
		}
	}
	return t
}

// pipeListener hands a server one connection, then reports that it is
// closed, so that http.Server.Serve returns at once and only the
// connection's own goroutine stays, for as long as the connection lives.
type pipeListener struct {
	mu   sync.Mutex
	conn net.Conn
}

func (l *pipeListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return nil, net.ErrClosed
	}
	c := l.conn
	l.conn = nil
	return c, nil
}

func (l *pipeListener) Close() error   { return nil }
func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// serveHTTP serves srv on the server end of a new pipe (tracked, so that
// its requests' context ends with it, and names the node dialled) and
// returns the client end.
func serveHTTP(srv *http.Server, node string) net.Conn {
	client, server := halfPipe()
	tc := &trackedConn{Conn: server, node: node, cancel: func() {}}
	go func() { _ = srv.Serve(&pipeListener{conn: tc}) }()
	return client
}

// trackConn is http.Server.ConnContext: the context of a tracked
// connection's requests ends with the connection.
func trackConn(ctx context.Context, c net.Conn) context.Context {
	tc, ok := c.(*trackedConn)
	if !ok {
		return ctx
	}
	ctx, tc.cancel = context.WithCancel(ctx)
	if tc.node != "" {
		ctx = context.WithValue(ctx, nodeKey{}, tc.node)
	}
	return ctx
}

// nodeKey is the context key of the node whose kubelet serves a request.
type nodeKey struct{}

// nodeOf is the node whose kubelet serves the request of ctx.
func nodeOf(ctx context.Context) string {
	n, _ := ctx.Value(nodeKey{}).(string)
	return n
}

// halfPipe is net.Pipe with TCP's half-close: the client end's CloseWrite
// makes the server end's reads return EOF while it may still write, as a
// forwarded connection whose client has sent all it had.
func halfPipe() (*pipeEnd, *halfConn) {
	c, s := net.Pipe()
	hs := &halfConn{pipeConn: &pipeConn{Conn: s}}
	return &pipeEnd{pipeConn: &pipeConn{Conn: c}, peer: hs}, hs
}

// pipeConn is an end of a pipe that fails as a socket does: "use of
// closed network connection" once closed (which the proxies expect and
// stay quiet about), "broken pipe" once its peer is.
type pipeConn struct {
	net.Conn
	closed atomic.Bool
}

func (c *pipeConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	return n, c.socketError("read", err)
}

func (c *pipeConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	return n, c.socketError("write", err)
}

func (c *pipeConn) Close() error {
	c.closed.Store(true)
	return c.Conn.Close()
}

func (c *pipeConn) socketError(op string, err error) error {
	switch {
	case !errors.Is(err, io.ErrClosedPipe):
		return err
	case c.closed.Load():
		return &net.OpError{Op: op, Net: "tcp", Err: net.ErrClosed}
	}
	return &net.OpError{Op: op, Net: "tcp", Err: os.NewSyscallError(op, syscall.EPIPE)}
}

// pipeEnd is the client end of a halfPipe.
type pipeEnd struct {
	*pipeConn
	peer *halfConn
}

// CloseWrite ends what the server end reads.
func (p *pipeEnd) CloseWrite() error {
	p.peer.closeRead()
	return nil
}

// halfConn is the server end of a halfPipe.
type halfConn struct {
	*pipeConn
	eof atomic.Bool
}

func (c *halfConn) Read(b []byte) (int, error) {
	if c.eof.Load() {
		return 0, io.EOF
	}
	n, err := c.pipeConn.Read(b)
	if err != nil && c.eof.Load() {
		return n, io.EOF
	}
	return n, err
}

// closeRead makes reads return EOF, the one pending too (a pipe's write
// completes only once read, so nothing written is lost).
func (c *halfConn) closeRead() {
	c.eof.Store(true)
	_ = c.Conn.SetReadDeadline(time.Unix(1, 0))
}

// trackedConn is the server end of a connection whose context ends once
// the connection does: when it is closed or its peer goes (a read fails).
// A request's context otherwise outlives a hijacked connection, and
// what streams on it (an exec's command, resize events) would not stop.
type trackedConn struct {
	net.Conn
	node   string
	cancel context.CancelFunc
}

func (c *trackedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		c.cancel()
	}
	return n, err
}

func (c *trackedConn) Close() error {
	c.cancel()
	return c.Conn.Close()
}
