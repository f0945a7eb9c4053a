package apiserver_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

func whoAmI(t *testing.T, c kubernetes.Interface) authenticationv1.UserInfo {
	t.Helper()
	r, err := c.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	return r.Status.UserInfo
}

// A client certificate of the server's CA authenticates its common name as
// the user, its organizations as groups and its UID attribute as UID.
func TestRESTConfigFor(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	alice, err := srv.ClientsetFor(&user.DefaultInfo{Name: "alice", UID: "alice-1", Groups: []string{"dev"}})
	require.NoError(t, err)
	info := whoAmI(t, alice)
	assert.Equal(t, "alice", info.Username)
	assert.Equal(t, "alice-1", info.UID)
	assert.Equal(t, []string{"dev", "system:authenticated"}, info.Groups)
	assert.Contains(t, info.Extra["authentication.kubernetes.io/credential-id"][0], "X509SHA256=", "as kube-apiserver names a certificate")

	admin := apiservertest.ClientsetFor(t, srv, "root", user.SystemPrivilegedGroup)
	_, err = admin.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err, "system:masters may do anything")

	_, err = srv.RESTConfigFor(&user.DefaultInfo{Name: "x", Extra: map[string][]string{"k": {"v"}}})
	require.Error(t, err, "a certificate carries no extra fields")
	_, err = srv.RESTConfigFor(&user.DefaultInfo{})
	require.Error(t, err)
}

// A client certificate is a credential for its own server only: another
// server of the same process answers 401.
func TestClientCertificateOfAnotherServer(t *testing.T) {
	t.Parallel()
	a, b := apiservertest.Start(t), apiservertest.Start(t)
	cfg, err := a.RESTConfigFor(&user.DefaultInfo{Name: "root", Groups: []string{user.SystemPrivilegedGroup}})
	require.NoError(t, err)
	cfg.Host, cfg.CAData = b.URL(), b.CACert() // trust b, present a's certificate
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	_, err = c.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
	require.True(t, apierrors.IsUnauthorized(err), "got %v", err)
	assert.NotEqual(t, a.CACert(), b.CACert(), "each server has its own CA")

	// Credentials are a union, as kube-apiserver's: b's token with a's
	// certificate authenticates as the token's user.
	cfg.BearerToken = b.RESTConfig().BearerToken
	c, err = kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	review, err := c.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "kubeembed-admin", review.Status.UserInfo.Username)
}

// A service account's client authenticates with a bound token as
// system:serviceaccount:<ns>:<name>.
func TestRESTConfigForServiceAccount(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	_, err := clientset(t, srv).CoreV1().ServiceAccounts("default").Create(t.Context(),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	info := whoAmI(t, apiservertest.ClientsetForServiceAccount(t, srv, "default", "robot"))
	assert.Equal(t, "system:serviceaccount:default:robot", info.Username)
	assert.Equal(t, []string{"system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"}, info.Groups)

	_, err = srv.RESTConfigForServiceAccount(t.Context(), "default", "nobody")
	require.True(t, apierrors.IsNotFound(err), "got %v", err)
}

// RBACPaths takes RBAC manifests and service accounts only, and says which
// file and document is something else.
func TestRBACPathsRefusesOtherKinds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manager.yaml"), []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n"), 0o644))
	_, err := apiserver.New(apiserver.Options{RBACPaths: []string{dir}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `manager.yaml: document 1: apps/v1 "Deployment" is not an RBAC object`)
}
