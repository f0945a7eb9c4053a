package apiserver_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/internal/certs"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// frontProxied is a server whose CAs the test holds: the front proxy's
// and its own (read from CertDir, where the server keeps them).
type frontProxied struct {
	srv                    *apiserver.Server
	frontProxyCA, serverCA *certs.CA
}

func startFrontProxied(t *testing.T) frontProxied {
	t.Helper()
	dir := t.TempDir()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{CertDir: dir}))
	frontProxyCA, err := certs.LoadOrNewCA(dir, "front-proxy-ca", "")
	require.NoError(t, err)
	serverCA, err := certs.LoadOrNewCA(dir, "ca", "")
	require.NoError(t, err)
	return frontProxied{srv, frontProxyCA, serverCA}
}

// client presents a certificate of ca for commonName (in groups).
func (f frontProxied) client(t *testing.T, ca *certs.CA, commonName string, groups ...string) *http.Client {
	t.Helper()
	leaf, err := ca.Client(commonName, "", groups)
	require.NoError(t, err)
	cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(f.srv.RESTConfig().CAData)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		Certificates: []tls.Certificate{cert}, RootCAs: roots, MinVersion: tls.VersionTLS12}}}
}

// whoAmI creates a SelfSubjectReview with client, the request's
// X-Remote-* headers naming alice (or remoteUser) of devs in team blue.
func (f frontProxied) whoAmI(t *testing.T, client *http.Client, remoteUser string) (int, authenticationv1.UserInfo) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, f.srv.URL()+"/apis/authentication.k8s.io/v1/selfsubjectreviews",
		bytes.NewBufferString(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Remote-User", remoteUser)
	req.Header.Add("X-Remote-Group", "devs")
	req.Header.Set("X-Remote-Extra-Team", "blue")
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var review authenticationv1.SelfSubjectReview
	_ = json.NewDecoder(resp.Body).Decode(&review)
	return resp.StatusCode, review.Status.UserInfo
}

// The server authenticates a front proxy as kube-apiserver does with
// --requestheader-*: a client certificate of the front-proxy CA named
// front-proxy-client makes X-Remote-* the caller; another name, or a
// certificate of another CA, does not.
func TestRequestHeaderAuthentication(t *testing.T) {
	t.Parallel()
	f := startFrontProxied(t)

	code, u := f.whoAmI(t, f.client(t, f.frontProxyCA, "front-proxy-client"), "alice")
	require.Equal(t, http.StatusCreated, code)
	assert.Equal(t, "alice", u.Username)
	assert.Equal(t, []string{"devs", "system:authenticated"}, u.Groups)
	assert.Equal(t, authenticationv1.ExtraValue{"blue"}, u.Extra["team"])

	code, _ = f.whoAmI(t, f.client(t, f.frontProxyCA, "someone-else"), "alice")
	assert.Equal(t, http.StatusUnauthorized, code, "a name the request-header configuration does not allow")

	code, u = f.whoAmI(t, f.client(t, f.serverCA, "bob"), "alice")
	require.Equal(t, http.StatusCreated, code)
	assert.Equal(t, "bob", u.Username, "a client certificate of the server's CA: the headers are not read")
}

// The server remembers the users of verified client certificates, not of
// the front proxy's: each of its requests is the user its headers name.
func TestRequestHeaderUserOfEachRequest(t *testing.T) {
	t.Parallel()
	f := startFrontProxied(t)
	proxy := f.client(t, f.frontProxyCA, "front-proxy-client")
	for _, name := range []string{"alice", "carol", "alice"} {
		code, u := f.whoAmI(t, proxy, name)
		require.Equal(t, http.StatusCreated, code)
		assert.Equal(t, name, u.Username, "the front proxy's certificate, X-Remote-User %s", name)
	}
	bob := f.client(t, f.serverCA, "bob", "team")
	code, first := f.whoAmI(t, bob, "alice")
	require.Equal(t, http.StatusCreated, code)
	assert.Equal(t, "bob", first.Username)
	assert.Equal(t, []string{"team", "system:authenticated"}, first.Groups)
	assert.Len(t, first.Extra["authentication.kubernetes.io/credential-id"], 1)
	for range 2 {
		_, u := f.whoAmI(t, bob, "carol")
		assert.Equal(t, first, u, "the same answer for the certificate's next requests")
	}
}
