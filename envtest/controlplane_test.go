package envtest_test

import (
	"net"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubeembed/apiserver/envtest"
)

// Suites provision users through the control plane, as
// controller-runtime's scratch-env example does
// (testEnv.ControlPlane.AddUser(...), then KubeConfig for kubectl), and read
// its connection details: after Start, both are the server's.
func TestControlPlaneAddUser(t *testing.T) {
	t.Parallel()
	te := &envtest.Environment{}
	start(t, te)
	u, err := te.ControlPlane.AddUser(envtest.User{Name: "envtest-admin", Groups: []string{"system:masters"}}, nil)
	require.NoError(t, err)
	kc, err := u.KubeConfig()
	require.NoError(t, err)
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	require.NoError(t, err)
	review, err := clientsetFor(t, u.Config()).AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "envtest-admin", review.Status.UserInfo.Username)
	_, err = clientsetFor(t, cfg).CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{})
	assert.NoError(t, err, "the kubeconfig, over the network")

	api := te.ControlPlane.APIServer
	assert.Equal(t, te.Server.URL(), te.ControlPlane.APIURL().String())
	assert.Equal(t, te.Server.URL(), api.SecureServing.URL("https", "").String())
	assert.Equal(t, strconv.Itoa(api.SecurePort), api.SecureServing.Port)
	assert.Equal(t, te.Server.CACert(), api.SecureServing.CA)
	assert.DirExists(t, api.CertDir)
	// Suites clean up after envtest's etcd, or give it time to stop.
	te.ControlPlane.Etcd.StopTimeout = time.Second
	assert.Empty(t, te.ControlPlane.Etcd.DataDir, "no etcd ran")
	assert.NoError(t, te.ControlPlane.Etcd.Stop())
}

// Stop forgets what Start described, and removes the control plane's
// directory; a port the suite set is served on, and kept for a restart.
func TestControlPlanePort(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	require.NoError(t, l.Close())

	te := &envtest.Environment{}
	te.ControlPlane.GetAPIServer().Port = port
	_, err = te.Start()
	require.NoError(t, err)
	u, err := url.Parse(te.Server.URL())
	require.NoError(t, err)
	assert.Equal(t, port, u.Port())
	dir := te.ControlPlane.APIServer.CertDir
	require.NoError(t, te.Stop())
	assert.NoDirExists(t, dir)
	api := te.ControlPlane.APIServer
	assert.Equal(t, port, api.Port, "the suite's")
	assert.NotEmpty(t, api.CA, "kept, as envtest keeps it")
	_, err = te.ControlPlane.AddUser(envtest.User{Name: "late"}, nil)
	assert.Error(t, err, "no server")

	// A restart serves on the suite's port again.
	cfg, err := te.Start()
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, te.Stop()) })
	assert.Equal(t, port, te.ControlPlane.APIServer.Port)
	_, err = clientsetFor(t, cfg).CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{})
	assert.NoError(t, err)

	other := &envtest.Environment{}
	start(t, other)
	require.NoError(t, other.Stop())
	assert.Empty(t, other.ControlPlane.APIServer.Port, "a port Start chose is not kept")
	assert.Nil(t, other.ControlPlane.APIServer.URL)
}

// --service-cluster-ip-range, set as suites set it for envtest's
// kube-apiserver, is the server's range: a Service may take an IP in it.
func TestControlPlaneServiceRange(t *testing.T) {
	t.Parallel()
	configured, deprecated := &envtest.Environment{}, &envtest.Environment{}
	configured.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.0.0.0/16")
	deprecated.ControlPlane.GetAPIServer().Args = []string{"--service-cluster-ip-range=10.0.0.0/16"}
	for _, te := range []*envtest.Environment{configured, deprecated} {
		cfg := start(t, te)
		svc, err := clientsetFor(t, cfg).CoreV1().Services("default").Create(t.Context(), &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "pinned"},
			Spec:       corev1.ServiceSpec{ClusterIP: "10.0.100.1", Ports: []corev1.ServicePort{{Port: 80}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		assert.Equal(t, "10.0.100.1", svc.Spec.ClusterIP)
	}
}
