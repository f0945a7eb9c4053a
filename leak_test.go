package apiserver_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/internal/leaktest"
	"github.com/kubeembed/apiserver/timing"
)

// TestNoGoroutineLeakAfterClose checks that Close ends every goroutine the
// server started. A first server starts the libraries' process-wide
// goroutines (which live as long as the process); the check is on a second.
//
// Serial on purpose: goleak looks at every goroutine of the process, so no
// other test's server may run meanwhile. The parallel tests of the package
// wait until the serial ones have ended.
func TestNoGoroutineLeakAfterClose(t *testing.T) {
	warm, err := apiserver.New(apiserver.Options{})
	require.NoError(t, err)
	require.NoError(t, warm.Start(t.Context()))
	require.NoError(t, warm.Close())

	before := leaktest.IgnoreCurrent(t)
	srv, c, w := startWatching(t, apiserver.Options{CRDPaths: []string{"testdata/crds"}})
	// An admission policy builds the policy plugin, with its controllers
	// and informers: they must end with the server too.
	_, err = c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(t.Context(), &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}}}}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(t.Context(), &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p",
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { // refused once the plugin runs
		_, err := c.CoreV1().Secrets("default").Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{GenerateName: "s-"}}, metav1.CreateOptions{})
		return err != nil
	}, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, srv.Close())
	w.Stop()

	verifyNoLeak(t, before)
}

// A server with a timing ends its delayed watches with Close too, the
// server's own informers' and a client's. Serial, as the test above.
func TestNoGoroutineLeakAfterCloseWithTiming(t *testing.T) {
	warm, err := apiserver.New(apiserver.Options{Timing: timing.Shake(1)})
	require.NoError(t, err)
	require.NoError(t, warm.Start(t.Context()))
	require.NoError(t, warm.Close())

	before := leaktest.IgnoreCurrent(t)
	srv, _, w := startWatching(t, apiserver.Options{Timing: timing.Shake(2)})
	require.NoError(t, srv.Close())
	w.Stop()

	verifyNoLeak(t, before)
}

// startWatching starts a server of opts with a client watching ConfigMaps
// that has seen an event.
func startWatching(t *testing.T, opts apiserver.Options) (*apiserver.Server, kubernetes.Interface, watch.Interface) {
	t.Helper()
	srv, err := apiserver.New(opts)
	require.NoError(t, err)
	require.NoError(t, srv.Start(t.Context()))
	c, err := srv.Clientset()
	require.NoError(t, err)
	w, err := c.CoreV1().ConfigMaps("default").Watch(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	_, err = c.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	<-w.ResultChan()
	return srv, c, w
}

// verifyNoLeak fails t if a goroutine started since before is still there.
func verifyNoLeak(t *testing.T, before goleak.Option) {
	t.Helper()
	leaktest.VerifyNone(t, before,
		// client-go keeps idle HTTP/2 connections of its cached transports
		// until they time out; they belong to clients, not the server.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
	)
}
