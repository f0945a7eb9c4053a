package apiserver_test

// Security defaults, each compared with kube-apiserver v1.37.2's (issue
// 27). Where kube-apiserver's answer comes from k8s.io/apiserver, the
// comment names the code that gives it; kubeembed runs the same code.

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// tlsGet sends GET path with the bearer token, if any, over HTTP/1.1,
// and returns the status code and body.
func tlsGet(t *testing.T, srv *apiserver.Server, path, token string, header http.Header) (int, string) {
	t.Helper()
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(srv.CACert()))
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL()+path, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// Anonymous requests get what kube-apiserver's bootstrap RBAC gives
// system:unauthenticated: system:public-info-viewer (/healthz, /livez,
// /readyz, /version), nothing of system:discovery (bound to
// system:authenticated only since v1.14), so /api and /apis are 403 with
// kube-apiserver's message (responsewriters.ForbiddenStatusError, an
// empty reason when RBAC has no rule), and so are resources and the
// checks' sub-paths.
func TestSecurityAnonymousAsKubeAPIServer(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	for _, p := range []string{"/version", "/version/", "/healthz", "/readyz", "/livez"} {
		code, body := tlsGet(t, srv, p, "", nil)
		assert.Equal(t, http.StatusOK, code, "%s: %s", p, body)
	}
	forbidden := map[string]string{
		"/api":        `forbidden: User "system:anonymous" cannot get path "/api"`,
		"/apis":       `forbidden: User "system:anonymous" cannot get path "/apis"`,
		"/openapi/v2": `forbidden: User "system:anonymous" cannot get path "/openapi/v2"`,
		"/metrics":    `forbidden: User "system:anonymous" cannot get path "/metrics"`,
		// The role names the paths, not their sub-paths (no "/readyz/*").
		"/readyz/ping":                       `forbidden: User "system:anonymous" cannot get path "/readyz/ping"`,
		"/api/v1/namespaces/default/pods":    `pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" in the namespace "default"`,
		"/api/v1/namespaces/default/secrets": `secrets is forbidden: User "system:anonymous" cannot list resource "secrets" in API group "" in the namespace "default"`,
	}
	for p, msg := range forbidden {
		code, body := tlsGet(t, srv, p, "", nil)
		assert.Equal(t, http.StatusForbidden, code, p)
		var st metav1.Status
		require.NoError(t, json.Unmarshal([]byte(body), &st), "%s: %s", p, body)
		assert.Equal(t, msg, st.Message, p)
		assert.Equal(t, metav1.StatusReasonForbidden, st.Reason, p)
	}
}

// A bearer token the server does not know is 401 with kube-apiserver's
// body (genericapifilters.Unauthorized: a Status, message
// "Unauthorized"), never served as anonymous; so is a known token on a
// public path.
func TestSecurityInvalidTokenIs401AsKubeAPIServer(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	for _, p := range []string{"/api/v1/namespaces", "/version", "/healthz"} {
		code, body := tlsGet(t, srv, p, "not-a-token", nil)
		assert.Equal(t, http.StatusUnauthorized, code, p)
		assert.JSONEq(t, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",`+
			`"message":"Unauthorized","reason":"Unauthorized","code":401}`, body, p)
	}
}

// TLS as kube-apiserver's defaults: k8s.io/apiserver's
// SecureServingInfo.tlsConfig sets MinVersion TLS 1.2 when MinTLSVersion
// is unset (kube-apiserver's --tls-min-version default), and Go's
// default cipher suites when CipherSuites is nil (--tls-cipher-suites
// default). A TLS 1.0 or 1.1 client is refused, and so is a TLS 1.2
// client offering only suites Go calls insecure.
func TestSecurityTLSAsKubeAPIServer(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(srv.CACert()))
	host := strings.TrimPrefix(srv.URL(), "https://")
	dial := func(cfg *tls.Config) (*tls.ConnectionState, error) {
		cfg.RootCAs = pool
		conn, err := tls.Dial("tcp", host, cfg)
		if err != nil {
			return nil, err
		}
		defer func() { _ = conn.Close() }()
		st := conn.ConnectionState()
		return &st, nil
	}
	for _, v := range []uint16{tls.VersionTLS10, tls.VersionTLS11} {
		_, err := dial(&tls.Config{MinVersion: v, MaxVersion: v}) //nolint:gosec // the point: an old client
		assert.Error(t, err, "TLS %x is refused", v)
	}
	st, err := dial(&tls.Config{MaxVersion: tls.VersionTLS12})
	require.NoError(t, err)
	assert.Equal(t, uint16(tls.VersionTLS12), st.Version)
	secure := map[uint16]bool{}
	for _, s := range tls.CipherSuites() {
		secure[s.ID] = true
	}
	assert.True(t, secure[st.CipherSuite], "TLS 1.2 negotiates a suite Go deems secure: %s", tls.CipherSuiteName(st.CipherSuite))
	var insecure []uint16
	for _, s := range tls.InsecureCipherSuites() {
		insecure = append(insecure, s.ID)
	}
	_, err = dial(&tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: insecure}) //nolint:gosec // the point
	assert.Error(t, err, "only insecure suites offered: refused")
	st, err = dial(&tls.Config{})
	require.NoError(t, err)
	assert.Equal(t, uint16(tls.VersionTLS13), st.Version)
}

// HTTP/2: the server announces at most 100 concurrent streams per
// connection, as kube-apiserver with its default
// --http2-max-streams-per-connection 0 (SecureServingInfo.Serve then sets
// 100, "match http2.initialMaxConcurrentStreams used by clients").
func TestSecurityHTTP2MaxStreamsAsKubeAPIServer(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(srv.CACert()))
	conn, err := tls.Dial("tcp", strings.TrimPrefix(srv.URL(), "https://"), &tls.Config{RootCAs: pool, NextProtos: []string{"h2"}})
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	require.Equal(t, "h2", conn.ConnectionState().NegotiatedProtocol)
	// The client preface and an empty SETTINGS frame; the server's first
	// frame is its SETTINGS (RFC 9113 3.4).
	_, err = conn.Write(append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 4, 0, 0, 0, 0, 0))
	require.NoError(t, err)
	r := bufio.NewReader(conn)
	head := make([]byte, 9)
	_, err = io.ReadFull(r, head)
	require.NoError(t, err)
	require.Equal(t, byte(4), head[3], "a SETTINGS frame")
	payload := make([]byte, int(head[0])<<16|int(head[1])<<8|int(head[2]))
	_, err = io.ReadFull(r, payload)
	require.NoError(t, err)
	settings := map[uint16]uint32{}
	for i := 0; i+6 <= len(payload); i += 6 {
		settings[binary.BigEndian.Uint16(payload[i:])] = binary.BigEndian.Uint32(payload[i+2:])
	}
	const maxConcurrentStreams, maxHeaderListSize = 0x3, 0x6
	assert.Equal(t, uint32(100), settings[maxConcurrentStreams], "SETTINGS_MAX_CONCURRENT_STREAMS")
	assert.NotZero(t, settings[maxHeaderListSize], "SETTINGS_MAX_HEADER_LIST_SIZE is announced")
}

// A request body over 3 MiB is 413 with kube-apiserver's Status
// (genericapiserver.NewConfig's MaxRequestBodyBytes 3 MiB, which
// kube-apiserver keeps; handlers.limitedReadBody: "limit is 3145728").
func TestSecurityRequestBodyLimitAsKubeAPIServer(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	big := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "big"}, Data: map[string]string{"k": strings.Repeat("x", 3<<20)}}
	_, err := clientset(t, srv).CoreV1().ConfigMaps("default").Create(t.Context(), big, metav1.CreateOptions{})
	require.True(t, apierrors.IsRequestEntityTooLargeError(err), "%v", err)
	assert.Equal(t, "Request entity too large: limit is 3145728", statusOf(t, err).Message)
}

// Request headers over 1 MiB are refused with 431 before any handler
// runs: SecureServingInfo.Serve sets http.Server.MaxHeaderBytes to 1 MiB
// for kube-apiserver (and HTTP/2 announces the same limit as
// SETTINGS_MAX_HEADER_LIST_SIZE, which client-go's transport enforces
// before sending).
func TestSecurityHeaderLimitAsKubeAPIServer(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	code, _ := tlsGet(t, srv, "/version", "", http.Header{"X-Big": {strings.Repeat("x", 1<<20+8192)}})
	assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, code)
	code, _ = tlsGet(t, srv, "/version", "", http.Header{"X-Big": {strings.Repeat("x", 512<<10)}})
	assert.Equal(t, http.StatusOK, code, "under the limit")
}

// /debug/pprof is not served: kube-apiserver's default is --profiling=true
// (k8s.io/apiserver's FeatureOptions), for system:masters only, but the
// profiles Go's net/http/pprof serves are the whole process's: in a test
// binary, every server's and the tests' own. kubeembed sets
// EnableProfiling false, as kube-apiserver with --profiling=false: 404
// for an admin, 403 for anonymous (authorization runs first).
func TestSecurityProfilingOffAsKubeAPIServerWithProfilingFalse(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	token := srv.RESTConfig().BearerToken
	require.NotEmpty(t, token)
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1"} {
		code, _ := tlsGet(t, srv, p, token, nil)
		assert.Equal(t, http.StatusNotFound, code, "admin: %s", p)
		code, _ = tlsGet(t, srv, p, "", nil)
		assert.Equal(t, http.StatusForbidden, code, "anonymous: %s", p)
	}
}
