package reliability_test

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/kubeembed/apiserver/internal/load"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// LoadDurationEnv names the environment variable that sets how long
// TestLoad's clients run (a Go duration; default 3 s, the full run 60s).
const LoadDurationEnv = "KUBEEMBED_LOAD_DURATION"

// TestLoad runs 64 concurrent clients against one server of the cluster
// profile (the default: controllers running, kube-apiserver's default API
// Priority and Fairness configuration) for LoadDurationEnv, with 64
// watches open from the start, and checks that every acknowledged write is
// there in its final state and that every watch saw every event of its
// objects in order (internal/load). On etcd when KUBEEMBED_TEST_ETCD is
// set (hack/with-etcd.sh), as every apiservertest server.
func TestLoad(t *testing.T) {
	t.Parallel()
	d := 3 * time.Second
	if v := os.Getenv(LoadDurationEnv); v != "" {
		var err error
		d, err = time.ParseDuration(v)
		require.NoError(t, err, "%s=%q", LoadDurationEnv, v)
	}
	srv := apiservertest.Start(t)
	admin, err := srv.Clientset()
	require.NoError(t, err)
	require.NoError(t, load.Prepare(t.Context(), admin, "load", "load-clients"))
	// Not system:masters, which API Priority and Fairness exempts: the
	// clients fall in the global-default flow schema, as a test's or a
	// controller's user would, and may be given 429s.
	cfg, err := srv.RESTConfigFor(&user.DefaultInfo{Name: "load", Groups: []string{"load-clients"}})
	require.NoError(t, err)
	cfg, err = srv.InProcess(cfg)
	require.NoError(t, err)
	res, err := load.Run(t.Context(), load.Options{Config: cfg, Namespace: "load", Duration: d})
	require.NoError(t, err)
	backend := "memory"
	if os.Getenv(apiservertest.EtcdEnv) != "" {
		backend = "etcd"
	}
	t.Logf("load on %s:\n%s", backend, res)
	assert.Empty(t, res.Problems)
}
