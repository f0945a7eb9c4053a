package localservice

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubeembed/apiserver/internal/certs"
)

// lockedBuffer is a log's output, read while the server writes to it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Close ends a connection still in its TLS handshake without net/http
// logging the handshake error its closing causes ("use of closed network
// connection"): metricsapi's TestCloseLeavesNothing saw one when the
// aggregator's probe connected as the handler closed. Other errors are
// still logged.
func TestCloseLogsNoHandshakeItCut(t *testing.T) {
	t.Parallel()
	ca, err := certs.NewCA("test")
	require.NoError(t, err)
	leaf, err := ca.Serving("probe.default.svc")
	require.NoError(t, err)
	cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var logged lockedBuffer
	s := serve(ln, cert, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), log.New(&logged, "", 0))

	// A connection that sends nothing stays in its handshake; a request on
	// another, once answered, shows that the server accepted the first.
	stalled, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer stalled.Close()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "probe.default.svc"}}}
	resp, err := client.Get("https://" + ln.Addr().String() + "/")
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	client.CloseIdleConnections()

	// A handshake that fails on its own is still logged.
	bad, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	_, _ = bad.Write([]byte("not TLS\r\n\r\n"))
	_, _ = io.Copy(io.Discard, bad) // the server closes it after its error
	_ = bad.Close()

	require.NoError(t, s.Close(context.Background()))
	assert.NotContains(t, logged.String(), stalled.LocalAddr().String(), "the stalled handshake, which Close cut, was logged")
	assert.Contains(t, logged.String(), bad.LocalAddr().String(), "a failed handshake is logged")
}
