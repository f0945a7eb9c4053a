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

// The server authenticates a front proxy as kube-apiserver does with
// --requestheader-*: a client certificate of the front-proxy CA named
// front-proxy-client makes X-Remote-* the caller; another name, or a
// certificate of another CA, does not. (The CA is read from CertDir, where
// the server keeps it.)
func TestRequestHeaderAuthentication(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{CertDir: dir}))
	frontProxyCA, err := certs.LoadOrNewCA(dir, "front-proxy-ca", "")
	require.NoError(t, err)
	serverCA, err := certs.LoadOrNewCA(dir, "ca", "")
	require.NoError(t, err)

	whoAmI := func(ca *certs.CA, commonName string) (int, authenticationv1.UserInfo) {
		leaf, err := ca.Client(commonName, "", nil)
		require.NoError(t, err)
		cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
		require.NoError(t, err)
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(srv.RESTConfig().CAData)
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
			Certificates: []tls.Certificate{cert}, RootCAs: roots, MinVersion: tls.VersionTLS12}}}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+"/apis/authentication.k8s.io/v1/selfsubjectreviews",
			bytes.NewBufferString(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Remote-User", "alice")
		req.Header.Add("X-Remote-Group", "devs")
		req.Header.Set("X-Remote-Extra-Team", "blue")
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var review authenticationv1.SelfSubjectReview
		_ = json.NewDecoder(resp.Body).Decode(&review)
		return resp.StatusCode, review.Status.UserInfo
	}

	code, u := whoAmI(frontProxyCA, "front-proxy-client")
	require.Equal(t, http.StatusCreated, code)
	assert.Equal(t, "alice", u.Username)
	assert.Equal(t, []string{"devs", "system:authenticated"}, u.Groups)
	assert.Equal(t, authenticationv1.ExtraValue{"blue"}, u.Extra["team"])

	code, _ = whoAmI(frontProxyCA, "someone-else")
	assert.Equal(t, http.StatusUnauthorized, code, "a name the request-header configuration does not allow")

	code, u = whoAmI(serverCA, "bob")
	require.Equal(t, http.StatusCreated, code)
	assert.Equal(t, "bob", u.Username, "a client certificate of the server's CA: the headers are not read")
}

// The server remembers the users of verified client certificates, not of
// the front proxy's: each of its requests is the user its headers name.
func TestRequestHeaderUserOfEachRequest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{CertDir: dir}))
	frontProxyCA, err := certs.LoadOrNewCA(dir, "front-proxy-ca", "")
	require.NoError(t, err)
	serverCA, err := certs.LoadOrNewCA(dir, "ca", "")
	require.NoError(t, err)
	clientOf := func(ca *certs.CA, commonName string) *http.Client {
		leaf, err := ca.Client(commonName, "", []string{"team"})
		require.NoError(t, err)
		cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
		require.NoError(t, err)
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(srv.RESTConfig().CAData)
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
			Certificates: []tls.Certificate{cert}, RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	}
	whoAmI := func(client *http.Client, remoteUser string) authenticationv1.UserInfo {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+"/apis/authentication.k8s.io/v1/selfsubjectreviews",
			bytes.NewBufferString(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Remote-User", remoteUser)
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		var review authenticationv1.SelfSubjectReview
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&review))
		return review.Status.UserInfo
	}
	proxy := clientOf(frontProxyCA, "front-proxy-client")
	for _, name := range []string{"alice", "carol", "alice"} {
		assert.Equal(t, name, whoAmI(proxy, name).Username, "the front proxy's certificate, X-Remote-User %s", name)
	}
	bob := clientOf(serverCA, "bob")
	first := whoAmI(bob, "alice")
	assert.Equal(t, "bob", first.Username)
	assert.Equal(t, []string{"team", "system:authenticated"}, first.Groups)
	assert.Len(t, first.Extra["authentication.kubernetes.io/credential-id"], 1)
	for range 2 {
		assert.Equal(t, first, whoAmI(bob, "carol"), "the same answer for the certificate's next requests")
	}
}
