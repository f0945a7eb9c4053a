package controlplane

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certutil "k8s.io/client-go/util/cert"
)

// Keys kept in a directory come back the same from it: the CA (so client
// certificates it signed stay valid) and the service account signing key
// (so tokens do); the front proxy's files are private and removed.
func TestLoadKeysKeepsKeysInCertDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := LoadKeys(dir)
	require.NoError(t, err)
	t.Cleanup(first.Remove)
	second, err := LoadKeys(dir)
	require.NoError(t, err)
	t.Cleanup(second.Remove)
	assert.Equal(t, first.CA.CertPEM, second.CA.CertPEM)
	assert.Equal(t, first.FrontProxy.ca.CertPEM, second.FrontProxy.ca.CertPEM)
	assert.Equal(t, jwks(t, first), jwks(t, second), "the same signing key")
	fresh, err := LoadKeys("")
	require.NoError(t, err)
	t.Cleanup(fresh.Remove)
	assert.NotEqual(t, first.CA.CertPEM, fresh.CA.CertPEM, "no directory: new keys")

	for _, f := range []string{first.FrontProxy.certFile, first.FrontProxy.keyFile} {
		info, err := os.Stat(f)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), f)
	}
	first.Remove()
	_, err = os.Stat(first.FrontProxy.dir)
	assert.True(t, os.IsNotExist(err), "Remove removes the front proxy's files")
	Keys{}.Remove() // safe on zero keys
}

// The front proxy's authenticator takes the user from the request headers
// only from a client certificate of the front-proxy CA named
// front-proxy-client, as kube-apiserver's --requestheader-* do.
func TestFrontProxyAuthenticatesByHeadersFromItsCertificate(t *testing.T) {
	t.Parallel()
	keys, err := LoadKeys("")
	require.NoError(t, err)
	t.Cleanup(keys.Remove)
	proxyCert, err := keys.FrontProxy.ca.Client(frontProxyClient, "", nil)
	require.NoError(t, err)
	other, err := keys.CA.Client(frontProxyClient, "", nil) // the right name, the wrong CA
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		cert []byte
		want string
	}{
		{"front proxy", proxyCert.CertPEM, "alice"},
		{"another CA's certificate", other.CertPEM, ""},
		{"no certificate", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := http.NewRequest(http.MethodGet, "/api", nil)
			r.Header.Set(remoteUser, "alice")
			r.Header.Add(remoteGroup, "devs")
			if tc.cert != nil {
				r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{parseCert(t, tc.cert)}}
			}
			resp, ok, _ := keys.FrontProxy.authenticator().AuthenticateRequest(r)
			if tc.want == "" {
				assert.False(t, ok)
				return
			}
			require.True(t, ok)
			assert.Equal(t, tc.want, resp.User.GetName())
			assert.Equal(t, []string{"devs"}, resp.User.GetGroups())
		})
	}
	info := keys.FrontProxy.publishedInfo()
	assert.Equal(t, `["X-Remote-User"]`, info["requestheader-username-headers"])
	assert.Equal(t, `["front-proxy-client"]`, info["requestheader-allowed-names"])
	assert.Equal(t, string(keys.FrontProxy.ca.CertPEM), info["requestheader-client-ca-file"])
}

func parseCert(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	certs, err := certutil.ParseCertsPEM(pemBytes)
	require.NoError(t, err)
	return certs[0]
}

// jwks is the issuer's public keys as its discovery serves them.
func jwks(t *testing.T, k Keys) string {
	t.Helper()
	_, h := k.Issuer.DiscoveryHandlers("https://127.0.0.1:1")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/openid/v1/jwks", nil))
	require.Equal(t, http.StatusOK, w.Code)
	return w.Body.String()
}

// The front proxy's directories that no server holds are removed by the
// next process's first server; a held one (a living server's, whatever its
// process ID namespace), a new one and other names are kept.
func TestSweepFrontProxyDirs(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("no directory locks here: nothing is swept")
	}
	dir := t.TempDir()
	names := map[string]bool{ // kept?
		frontProxyDirPrefix + "4242-ended": false,
		frontProxyDirPrefix + "4243-held":  true,
		frontProxyDirPrefix + "4244-young": true,
		frontProxyDirPrefix + "1022437790": true, // an older kubeembed's: no process ID in the name
		"unrelated-1-2":                    true,
	}
	old := time.Now().Add(-2 * time.Minute)
	for name := range names {
		path := filepath.Join(dir, name)
		require.NoError(t, os.Mkdir(path, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(path, "tls.crt"), []byte("x"), 0o600))
		if !strings.HasSuffix(name, "young") {
			require.NoError(t, os.Chtimes(path, old, old))
		}
	}
	unlock, err := lockDir(filepath.Join(dir, frontProxyDirPrefix+"4243-held"))
	require.NoError(t, err)
	defer unlock()
	sweepFrontProxyDirs(dir)
	for name, kept := range names {
		_, err := os.Stat(filepath.Join(dir, name))
		assert.Equal(t, kept, err == nil, "%s kept", name)
	}
}
