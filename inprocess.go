package apiserver

// In-process clients: the server's handler chain without TCP or TLS.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/util/httpstream"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport/websocket"
)

// InProcess returns a copy of cfg, a client configuration of this server,
// whose requests the server serves in this process: the client calls the
// server's handler chain directly, with no TCP connection, TLS handshake or
// HTTP/2 framing, and each request goes through the same chain as over the
// network (authentication, authorization, admission, API Priority and
// Fairness, audit, Faults and Recorder) with the same answers, watches and
// streaming lists included, only sooner (BENCHMARKS.md, side by side: a
// ConfigMap get p50 0.06 ms against 0.21 ms, an update 0.24 against
// 0.58 ms).
//
// cfg may be RESTConfig, RESTConfigFor or RESTConfigForServiceAccount, or a
// configuration made from them: what cfg sets besides how to reach the
// server (impersonation, user agent, content type, QPS, timeout,
// WrapTransport) is kept, and so are Host and the TLS fields: the copy goes
// in process through a WrapTransport of its own (wrapping cfg's), and
// reaches the server over the network only where client-go dials it
// itself: the connection upgrades of exec, attach and port-forward (SPDY
// and WebSocket), which therefore work with it as with RESTConfig.
// Credentials still authenticate the client: a bearer token goes as the
// Authorization header, and a client certificate is presented to the server
// as over TLS (the request's peer certificates), so the server verifies it
// against its client CA, refusing another CA's as over the network. As the
// TLS handshake would, InProcess checks what needs no request: cfg must be
// for this server (its Host the server's URL) and trust the server's CA
// (or skip verification), and a client certificate must match its key.
//
// What a client can observe is the same, except:
//   - the remote address the server sees (its audit events' source IP is
//     127.0.0.1 both ways, but the port is 0);
//   - requests that take the connection over (exec, attach, port-forward
//     through SPDY or WebSocket) are not served in process but over the
//     network, as said above;
//   - a client certificate is read when a client is made from the
//     configuration, not at each connection (a certificate file rotated
//     later is not seen by that client).
//
// After Close, requests fail at once (inproc: transport closed), as network
// ones fail to connect; Close ends watches in flight as it closes the
// network clients' connections (the watch just ends, as on a closed
// connection).
func (s *Server) InProcess(cfg *rest.Config) (*rest.Config, error) {
	if cfg == nil {
		return nil, errors.New("InProcess: no configuration")
	}
	if s.clients.Load().Owns(cfg.Transport) {
		return rest.CopyConfig(cfg), nil
	}
	if cfg.Transport != nil {
		return nil, errors.New("InProcess: the configuration has its own Transport")
	}
	if err := s.reaches(cfg); err != nil {
		return nil, fmt.Errorf("InProcess: %w", err)
	}
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("InProcess: %w", err)
	}
	if err := s.trusted(tlsCfg); err != nil {
		return nil, fmt.Errorf("InProcess: %w", err)
	}
	if _, err := connectionState(tlsCfg); err != nil {
		return nil, fmt.Errorf("InProcess: client certificate: %w", err)
	}
	return s.inProcess(cfg), nil
}

// InProcessRESTConfig returns a new configuration for the admin user whose
// requests are served in process: InProcess(RESTConfig()), which cannot
// fail. Hand it to what runs in the test process (a controller-runtime
// manager, an informer factory); RESTConfig is for other processes
// (kubectl). Exec, attach and port-forward work with either (see
// InProcess).
func (s *Server) InProcessRESTConfig() *rest.Config {
	return s.inProcess(s.config)
}

// inProcess is cfg served in process.
//
// The copy keeps cfg's fields, TLS included, and goes in process through
// WrapTransport: client-go builds the transport it would for the network
// from the configuration as the client has it (a test may have changed
// its Host or certificate since) and the wrapper serves in process what
// that transport would send to this server, as from its TLS connection.
// (A Transport, the other way in, cannot sit beside TLS fields: client-go
// refuses both.)
func (s *Server) inProcess(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	wrap := cfg.WrapTransport
	out.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if in := s.inProcessFor(rt); in != nil {
			rt = in
		}
		if wrap != nil {
			rt = wrap(rt)
		}
		return rt
	}
	return out
}

// inProcessFor returns a round tripper that serves in process the requests
// rt, a transport client-go made for the network, would send to this
// server, with the client certificate rt would present. It returns nil,
// leaving rt to the network, for round trippers that take the connection
// over (SPDY and WebSocket, for exec, attach and port-forward: client-go
// dials the server with them itself, whatever the configuration's
// Transport), for a transport that is not client-go's, and for a TLS
// configuration the server's handshake would not get through (a CA that
// does not trust the server): the network gives those their answer.
func (s *Server) inProcessFor(rt http.RoundTripper) http.RoundTripper {
	if takesConnectionOver(rt) {
		return nil
	}
	t := httpTransportOf(rt)
	if t == nil || s.trusted(t.TLSClientConfig) != nil {
		return nil
	}
	state, err := connectionState(t.TLSClientConfig)
	if err != nil {
		return nil
	}
	scheme, host, _ := strings.Cut(s.url, "://")
	return byHost{scheme, host, s.clients.Load().WithTLS(state), rt}
}

// httpTransportOf returns the *http.Transport rt is or wraps, or nil.
func httpTransportOf(rt http.RoundTripper) *http.Transport {
	for {
		switch t := rt.(type) {
		case *http.Transport:
			return t
		case utilnet.RoundTripperWrapper:
			rt = t.WrappedRoundTripper()
		default:
			return nil
		}
	}
}

// byHost serves the server's requests in process and sends others (a copy
// of the configuration whose Host a test changed) where client-go would.
type byHost struct {
	scheme, host    string
	inProc, network http.RoundTripper
}

func (b byHost) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host == b.host && req.URL.Scheme == b.scheme {
		return b.inProc.RoundTrip(req)
	}
	return b.network.RoundTrip(req)
}

// WrappedRoundTripper is the in-process round tripper, for what looks
// through client-go's wrappers.
func (b byHost) WrappedRoundTripper() http.RoundTripper { return b.inProc }

// CloseIdleConnections closes the network transport's idle connections
// (the in-process one has none), for utilnet.CloseIdleConnectionsFor.
func (b byHost) CloseIdleConnections() { utilnet.CloseIdleConnectionsFor(b.network) }

// takesConnectionOver reports whether rt is one of client-go's round
// trippers that upgrade the connection (SPDY, WebSocket).
func takesConnectionOver(rt http.RoundTripper) bool {
	switch rt.(type) {
	case httpstream.UpgradeRoundTripper, websocket.ConnectionHolder:
		return true
	}
	return false
}

// reaches reports whether cfg is for this server: its Host names the
// server's scheme, host and port (any path prefix is the request's own,
// answered alike in process).
func (s *Server) reaches(cfg *rest.Config) error {
	u, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return err
	}
	if u.Scheme+"://"+u.Host != s.url {
		return fmt.Errorf("host %q is not this server (%s)", cfg.Host, s.url)
	}
	return nil
}

// trusted reports whether a client with tlsCfg would accept the server's
// certificate, which the server's CA signs.
func (s *Server) trusted(tlsCfg *tls.Config) error {
	if tlsCfg != nil && tlsCfg.InsecureSkipVerify {
		return nil
	}
	var roots *x509.CertPool // nil: the system's, as client-go's
	if tlsCfg != nil {
		roots = tlsCfg.RootCAs
	}
	if _, err := s.keys.CA.Cert().Verify(x509.VerifyOptions{Roots: roots}); err != nil {
		return fmt.Errorf("the configuration does not trust the server's CA: %w", err)
	}
	return nil
}

// noCertificate is the TLS state of a client without a certificate.
func noCertificate() *tls.ConnectionState {
	return &tls.ConnectionState{Version: tls.VersionTLS13, HandshakeComplete: true, NegotiatedProtocol: "h2"}
}

// connectionState is the TLS state the server sees for a client with
// tlsCfg: client-go's handshake (HTTP/2 over TLS 1.3, the server asks for
// a certificate but does not require one) with the client's certificate
// chain, which client-go loaded (CertData, CertFile or an exec plugin's)
// and matched to its key.
func connectionState(tlsCfg *tls.Config) (*tls.ConnectionState, error) {
	if tlsCfg == nil || tlsCfg.GetClientCertificate == nil {
		return noCertificate(), nil
	}
	cert, err := tlsCfg.GetClientCertificate(&tls.CertificateRequestInfo{Version: tls.VersionTLS13})
	if err != nil {
		return nil, err
	}
	if cert == nil || len(cert.Certificate) == 0 {
		return noCertificate(), nil
	}
	state := noCertificate()
	for _, der := range cert.Certificate {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, err
		}
		state.PeerCertificates = append(state.PeerCertificates, c)
	}
	return state, nil
}
