// Package helm runs the helm CLI (v4, built by TestMain from the module
// proxy at the version go.mod's tool directive names) against kubeembed
// servers: install,
// upgrade and rollback with --wait, which returns only once helm's status
// watcher sees the release's Deployment rolled out and its Service ready,
// so it needs the server's simulated node, scheduler and kubelet and its
// Deployment and ReplicaSet controllers. Its own module, so that helm never
// becomes a dependency of the library.
package helm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// helmBin is the helm CLI TestMain built.
var helmBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kubeembed-helm-*")
	if err != nil {
		panic(err)
	}
	helmBin = filepath.Join(dir, "helm")
	build := exec.Command("go", "build", "-o", helmBin, "helm.sh/helm/v4/cmd/helm")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		panic("build helm: " + err.Error())
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// helmOn starts a server (cluster profile: one simulated node, the
// workload controllers) and returns a runner of helm against it.
func helmOn(t *testing.T) (*apiserver.Server, func(args ...string) (string, error)) {
	t.Helper()
	srv := apiservertest.Start(t)
	kc, err := srv.Kubeconfig()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, kc, 0o600))
	home := t.TempDir()
	return srv, func(args ...string) (string, error) {
		cmd := exec.CommandContext(t.Context(), helmBin, append([]string{"--kubeconfig", path}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home, "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
			"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}

// helm install --wait returns once the chart's Deployment is rolled out on
// the simulated node; upgrade --wait rolls it to a new image, rollback
// --wait back, each a revision of the release as on a cluster.
func TestInstallUpgradeRollbackWait(t *testing.T) {
	t.Parallel()
	_, run := helmOn(t)
	helm := func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		require.NoError(t, err, "helm %s:\n%s", strings.Join(args, " "), out)
		return out
	}
	out := helm("install", "web", "testdata/web", "--wait", "--timeout", "60s")
	assert.Contains(t, out, "STATUS: deployed")
	assert.Contains(t, out, "REVISION: 1")
	status := helm("status", "web", "-o", "json")
	assert.Contains(t, status, `"status":"deployed"`)

	out = helm("upgrade", "web", "testdata/web", "--set", "image=nginx:1.28", "--wait", "--timeout", "60s")
	assert.Contains(t, out, "REVISION: 2")
	assert.Contains(t, helm("get", "manifest", "web"), "image: nginx:1.28")

	assert.Contains(t, helm("rollback", "web", "1", "--wait", "--timeout", "60s"), "Rollback was a success")
	history := helm("history", "web")
	assert.Regexp(t, `(?m)^3\s+.*\bdeployed\b.*Rollback to 1`, history)
}

// --wait fails, at its timeout, for a Deployment that cannot roll out: its
// pods never become ready (the simulated kubelet's readiness probe result
// is the test's; here no pod can be scheduled: it asks for more CPU than
// the node has).
func TestInstallWaitTimesOut(t *testing.T) {
	t.Parallel()
	srv, helm := helmOn(t)
	out, err := helm("install", "big", "testdata/web", "--set-json", `resources={"requests":{"cpu":"1000"}}`,
		"--wait", "--timeout", "3s")
	require.Error(t, err, "%s", out)
	assert.Contains(t, out, "context deadline exceeded")
	c, err := srv.Clientset()
	require.NoError(t, err)
	d, err := c.AppsV1().Deployments("default").Get(t.Context(), "big", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Zero(t, d.Status.AvailableReplicas)
	status, err := helm("status", "big")
	require.NoError(t, err, status)
	assert.Contains(t, status, "STATUS: failed")
}
