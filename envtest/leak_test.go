package envtest_test

import (
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/envtest"
	"github.com/kubeembed/apiserver/internal/leaktest"
)

// TestNoGoroutineLeakAfterStop checks that Stop ends every goroutine Start
// started. A first Environment starts the libraries' process-wide
// goroutines; the check is on a second, with CRDs, webhooks and
// controllers.
//
// Serial on purpose: goleak looks at every goroutine of the process, so no
// other test's server may run meanwhile (the parallel tests wait until the
// serial ones have ended).
func TestNoGoroutineLeakAfterStop(t *testing.T) {
	warm := &envtest.Environment{}
	_, err := warm.Start()
	require.NoError(t, err)
	require.NoError(t, warm.Stop())

	before := leaktest.IgnoreCurrent(t)
	te := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("testdata", "crds")}, Controllers: []controllers.Name{"*"},
		WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: []string{filepath.Join("testdata", "webhooks")}}}
	_, err = te.Start()
	require.NoError(t, err)
	t.Run("webhook server", func(t *testing.T) {
		serveWebhooks(t, te.WebhookInstallOptions, map[string]http.Handler{"/validate-v1-configmap": &webhook.Admission{Handler: denyConfigMaps{}}})
	})
	require.NoError(t, te.Stop())
	leaktest.VerifyNone(t, before)
}
