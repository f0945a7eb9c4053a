package envtest_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/envtest"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// start starts te and stops it when the test ends.
func start(t *testing.T, te *envtest.Environment) *rest.Config {
	t.Helper()
	cfg, err := te.Start()
	t.Cleanup(func() { assert.NoError(t, te.Stop()) })
	require.NoError(t, err)
	return cfg
}

func clientsetFor(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return c
}

// Start gives what envtest gives: the admin "admin" in system:masters by
// client certificate, the CRDs of the paths installed and served (other
// documents skipped), a working KubeConfig, and envtest's control plane: a
// new namespace has no service account.
func TestStart(t *testing.T) {
	t.Parallel()
	te := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("testdata", "crds")}, ErrorIfCRDPathMissing: true}
	cfg := start(t, te)
	assert.NotEmpty(t, cfg.CertData, "a client certificate, as envtest's admin")
	assert.Equal(t, float32(1000), cfg.QPS)
	ctx := t.Context()
	c := clientsetFor(t, cfg)
	review, err := c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "admin", review.Status.UserInfo.Username)
	assert.Equal(t, []string{"system:masters", "system:authenticated"}, review.Status.UserInfo.Groups)

	var names []string
	for _, crd := range te.CRDs {
		names = append(names, crd.Name)
	}
	assert.ElementsMatch(t, []string{"widgets.example.com", "gadgets.example.com"}, names)
	resources, err := c.Discovery().ServerResourcesForGroupVersion("example.com/v2")
	require.NoError(t, err, "served when Start returns")
	assert.Equal(t, "gadgets", resources.APIResources[0].Name)

	_, err = c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "suite"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	sas, err := c.CoreV1().ServiceAccounts("suite").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, sas.Items, "no default service account, as envtest")

	fromKubeConfig, err := clientcmd.RESTConfigFromKubeConfig(te.KubeConfig)
	require.NoError(t, err)
	_, err = clientsetFor(t, fromKubeConfig).CoreV1().Namespaces().Get(ctx, "suite", metav1.GetOptions{})
	assert.NoError(t, err)
}

// A missing CRD path fails Start only with ErrorIfCRDPathMissing, as in
// envtest; Stop after a failed Start is fine.
func TestStartMissingCRDPath(t *testing.T) {
	t.Parallel()
	te := &envtest.Environment{CRDDirectoryPaths: []string{"nosuch"}, ErrorIfCRDPathMissing: true}
	_, err := te.Start()
	require.Error(t, err)
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.NoError(t, te.Stop())

	start(t, &envtest.Environment{CRDDirectoryPaths: []string{"nosuch"}})
}

// Stop removes the webhook certificates and closes the server; a second
// Stop is fine.
func TestStop(t *testing.T) {
	t.Parallel()
	te := &envtest.Environment{}
	cfg, err := te.Start()
	require.NoError(t, err)
	dir := te.WebhookInstallOptions.LocalServingCertDir
	require.FileExists(t, filepath.Join(dir, "tls.crt"))
	require.NoError(t, te.Stop())
	assert.NoDirExists(t, dir)
	_, err = clientsetFor(t, cfg).CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{})
	assert.Error(t, err, "the server is closed")
	assert.NoError(t, te.Stop())
}

// AddUser provisions a user by client certificate, on top of the base
// configuration; RBAC applies to it.
func TestAddUser(t *testing.T) {
	t.Parallel()
	te := &envtest.Environment{}
	start(t, te)
	u, err := te.AddUser(envtest.User{Name: "alice", Groups: []string{"devs"}}, &rest.Config{QPS: 7, Burst: 14})
	require.NoError(t, err)
	assert.Equal(t, float32(7), u.Config().QPS)
	c := clientsetFor(t, u.Config())
	review, err := c.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "alice", review.Status.UserInfo.Username)
	assert.Equal(t, []string{"devs", "system:authenticated"}, review.Status.UserInfo.Groups)
	_, err = c.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{})
	require.Error(t, err)
	assert.Equal(t, `pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "default"`, err.Error())

	kc, err := u.KubeConfig()
	require.NoError(t, err)
	fromKubeConfig, err := clientcmd.RESTConfigFromKubeConfig(kc)
	require.NoError(t, err)
	assert.Equal(t, u.Config().CertData, fromKubeConfig.CertData)
}

// Config and AddUser's configurations are served in process unless
// NetworkClients, with the TLS fields of a network one either way (a
// kubeconfig written from them reaches the server over the network).
func TestConfigInProcess(t *testing.T) {
	t.Parallel()
	for _, network := range []bool{false, true} {
		te := &envtest.Environment{NetworkClients: network}
		cfg := start(t, te)
		u, err := te.AddUser(envtest.User{Name: "alice"}, nil)
		require.NoError(t, err)
		for name, cfg := range map[string]*rest.Config{"admin": cfg, "alice": u.Config()} {
			name = fmt.Sprintf("%s, NetworkClients %v", name, network)
			assert.Equal(t, te.Server.CACert(), cfg.CAData, name)
			assert.NotEmpty(t, cfg.CertData, name)
			hc, err := rest.HTTPClientFor(cfg)
			require.NoError(t, err, name)
			assert.Equal(t, !network, servedInProcess(hc.Transport), name)
			review, err := clientsetFor(t, cfg).AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			require.NoError(t, err, name)
			assert.Equal(t, strings.Split(name, ",")[0], review.Status.UserInfo.Username)
		}
		kc, err := clientcmd.RESTConfigFromKubeConfig(te.KubeConfig)
		require.NoError(t, err)
		assert.Nil(t, kc.WrapTransport)
		_, err = clientsetFor(t, kc).CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{})
		assert.NoError(t, err, "the kubeconfig, over the network")
	}
}

// servedInProcess reports whether rt, or a round tripper it wraps, is the
// one of kubeembed's in-process configurations.
func servedInProcess(rt http.RoundTripper) bool {
	for rt != nil {
		if fmt.Sprintf("%T", rt) == "apiserver.byHost" {
			return true
		}
		w, ok := rt.(utilnet.RoundTripperWrapper)
		if !ok {
			return false
		}
		rt = w.WrappedRoundTripper()
	}
	return false
}

// Controllers opts in to kubeembed's controllers: new namespaces get their
// default service account and deleted ones go, which WaitIdle on the
// Environment's server waits for.
func TestControllers(t *testing.T) {
	t.Parallel()
	te := &envtest.Environment{Controllers: []controllers.Name{"*"}}
	c := clientsetFor(t, start(t, te))
	ctx := t.Context()
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "suite"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.CoreV1().ServiceAccounts("suite").Get(ctx, "default", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, c.CoreV1().Namespaces().Delete(ctx, "suite", metav1.DeleteOptions{}))
	require.NoError(t, te.Server.WaitIdle(ctx))
	_, err = c.CoreV1().Namespaces().Get(ctx, "suite", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "namespace deleted: %v", err)
}

// UseExistingCluster installs the CRDs on the cluster of Config, leaves it
// running at Stop, and uninstalls the CRDs with CleanUpAfterUse.
func TestUseExistingCluster(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	te := &envtest.Environment{UseExistingCluster: new(true), Config: srv.RESTConfig(),
		CRDDirectoryPaths: []string{filepath.Join("testdata", "crds")}, CRDInstallOptions: envtest.CRDInstallOptions{CleanUpAfterUse: true}}
	_, err := te.Start()
	require.NoError(t, err)
	assert.Nil(t, te.Server)
	_, err = te.AddUser(envtest.User{Name: "alice"}, nil)
	assert.ErrorContains(t, err, "no server of its own")

	c, err := client.New(srv.RESTConfig(), client.Options{})
	require.NoError(t, err)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Name: "widgets.example.com"}, crd))

	require.NoError(t, te.Stop())
	err = c.Get(t.Context(), client.ObjectKey{Name: "widgets.example.com"}, crd)
	assert.True(t, apierrors.IsNotFound(err) || crd.DeletionTimestamp != nil, "uninstalled: %v", err)
}

// USE_EXISTING_CLUSTER=true with KUBECONFIG uses that cluster, as envtest
// does. Serial: it sets environment variables of the process.
func TestUseExistingClusterFromEnvironment(t *testing.T) {
	srv := apiservertest.Start(t)
	kc, err := srv.Kubeconfig()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, kc, 0o600))
	t.Setenv("USE_EXISTING_CLUSTER", "true")
	t.Setenv("KUBECONFIG", path)

	te := &envtest.Environment{}
	cfg := start(t, te)
	assert.Nil(t, te.Server)
	assert.Equal(t, srv.URL(), cfg.Host)
}
