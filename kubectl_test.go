package apiserver_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// TestKubectl drives the server with the kubectl found on PATH, as a user of
// the CLI would.
func TestKubectl(t *testing.T) {
	t.Parallel()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not on PATH")
	}
	srv := apiservertest.Start(t, apiservertest.WithCRDPaths("testdata/crds"))
	kc, err := srv.Kubeconfig()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, kc, 0o600))
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), kubectl, append([]string{"--kubeconfig", path}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir()) // no discovery cache shared between servers
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "kubectl %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}

	checkKubectlVersion(t, kubectl, path)

	resources := run("api-resources")
	for _, want := range []string{"configmaps", "namespaces", "leases", "customresourcedefinitions", "apiservices", "widgets"} {
		assert.Contains(t, resources, want)
	}
	assert.Contains(t, run("get", "namespaces"), "kube-system")
	// SelfSubjectAccessReview, answered by the server's authorizer.
	assert.Equal(t, "yes", strings.TrimSpace(run("auth", "can-i", "delete", "pods")))
	assert.Contains(t, run("auth", "whoami"), "kubeembed-admin")

	run("create", "configmap", "settings", "--from-literal=mode=fast")
	out := run("get", "cm", "settings")
	assert.Regexp(t, `(?m)^NAME\s+DATA\s+AGE\s*$`, out)
	assert.Regexp(t, `(?m)^settings\s+1\s+`, out)

	widget := filepath.Join(t.TempDir(), "widget.yaml")
	require.NoError(t, os.WriteFile(widget, []byte("apiVersion: example.kubeembed.dev/v1\nkind: Widget\nmetadata:\n  name: small\nspec:\n  size: 3\n"), 0o600))
	run("apply", "-f", widget)
	out = run("get", "wd")
	assert.Regexp(t, `(?m)^NAME\s+SIZE\s*$`, out, "printer columns from the CRD")
	assert.Regexp(t, `(?m)^small\s+3\s*$`, out)
	run("apply", "--server-side", "-f", widget)
	run("delete", "widget", "small")

	// kubectl explain reads OpenAPI v3; CRDs' too, once kube-aggregator
	// has fetched their group's document again (it does every second, as
	// on kube-apiserver).
	assert.Contains(t, run("explain", "deployment.spec.replicas"), "Number of desired pods")
	assert.Eventually(t, func() bool {
		cmd := exec.CommandContext(t.Context(), kubectl, "--kubeconfig", path, "explain", "widgets.spec")
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		return err == nil && strings.Contains(string(out), "size")
	}, 10*time.Second, 100*time.Millisecond, "kubectl explain widgets.spec")

	// The Deployment rolls out on the simulated node; kubectl waits for it.
	run("create", "deployment", "web", "--image=nginx:1.27")
	assert.Contains(t, run("rollout", "status", "deployment/web", "--timeout=30s"), `deployment "web" successfully rolled out`)
	out = run("get", "deploy", "web")
	assert.Regexp(t, `(?m)^NAME\s+READY\s+UP-TO-DATE\s+AVAILABLE\s+AGE\s*$`, out)
	assert.Regexp(t, `(?m)^web\s+1/1\s+1\s+1\s+`, out)
	run("scale", "deployment", "web", "--replicas=2")
	assert.Contains(t, run("rollout", "status", "deployment/web", "--timeout=30s"), `deployment "web" successfully rolled out`)
	assert.Regexp(t, `(?m)^(deployment.apps/)?web\s+2/2\s+`, run("get", "all"))
	out = run("describe", "deployment", "web")
	assert.Regexp(t, `(?m)^Replicas:\s+2 desired`, out)
	assert.Regexp(t, `(?m)^StrategyType:\s+RollingUpdate`, out)
	run("create", "service", "clusterip", "web", "--tcp=80:8080")
	assert.Regexp(t, `(?m)^IP:\s+10\.0\.0\.\d+`, run("describe", "service", "web"))
}

// checkKubectlVersion checks that kubectl version parses the server's (it
// failed on the library's unset "v0.0.0-master+$Format:%H$"); it may warn
// about version skew.
func checkKubectlVersion(t *testing.T, kubectl, kubeconfig string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), kubectl, "--kubeconfig", kubeconfig, "version", "-o", "json")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	require.NoError(t, err, "kubectl version: %s", stderr.String())
	assert.NotContains(t, stderr.String(), "error")
	var version struct {
		ServerVersion struct{ GitVersion string } `json:"serverVersion"`
	}
	require.NoError(t, json.Unmarshal(stdout, &version))
	assert.Equal(t, "v1.37.2", version.ServerVersion.GitVersion)
}

// kubectlFor returns a runner of the kubectl on PATH against srv as its
// admin (skipping the test without one): stdout and stderr trimmed.
func kubectlFor(t *testing.T, srv *apiserver.Server) func(args ...string) (stdout, stderr string, err error) {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not on PATH")
	}
	kc, err := srv.Kubeconfig()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, kc, 0o600))
	return func(args ...string) (string, string, error) {
		cmd := exec.CommandContext(t.Context(), kubectl, append([]string{"--kubeconfig", path}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir()) // no discovery cache shared between servers
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return strings.TrimSpace(stdout.String()), strings.TrimSpace(stderr.String()), err
	}
}

// kubectl's RBAC commands against the server's RBAC: can-i with --as and
// --list, create role and rolebinding, a forbidden get --as.
func TestKubectlRBAC(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	run := kubectlFor(t, srv)
	kube := func(args ...string) (string, error) {
		out, errOut, err := run(args...)
		return strings.TrimSpace(out + "\n" + errOut), err
	}
	out, err := kube("auth", "can-i", "list", "pods", "--as", "alice")
	require.Error(t, err, "can-i exits 1 for no")
	assert.Equal(t, "no", out)

	for _, args := range [][]string{
		{"create", "role", "pod-reader", "--verb=get,list", "--resource=pods"},
		{"create", "rolebinding", "alice-reads", "--role=pod-reader", "--user=alice"},
	} {
		out, err := kube(args...)
		require.NoError(t, err, out)
	}
	out, err = kube("auth", "can-i", "list", "pods", "--as", "alice")
	require.NoError(t, err, out)
	assert.Equal(t, "yes", out)
	out, err = kube("auth", "can-i", "--list", "--as", "alice")
	require.NoError(t, err, out)
	assert.Regexp(t, `(?m)^pods\s+\[\]\s+\[\]\s+\[get list\]`, out)
	out, err = kube("get", "pods", "--as", "alice", "-n", "kube-system")
	require.Error(t, err)
	assert.Contains(t, out, `pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "kube-system"`)
}

// kubectl's workload commands against the server's Deployment and
// ReplicaSet controllers on a simulated node: wait for Available, set
// image and watch the rollout, read its history, undo it (kubectl finds the
// previous ReplicaSet by its revision annotation and writes its template
// back), scale, pause and resume.
func TestKubectlRollouts(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	run := kubectlFor(t, srv)
	kube := func(args ...string) string {
		t.Helper()
		out, errOut, err := run(args...)
		require.NoError(t, err, "kubectl %s: %s", strings.Join(args, " "), errOut)
		return out
	}
	kube("create", "deployment", "web", "--image=nginx:1.27", "--replicas=2")
	assert.Equal(t, "deployment.apps/web condition met", kube("wait", "--for=condition=Available", "deployment/web", "--timeout=30s"))
	kube("set", "image", "deployment/web", "nginx=nginx:1.28")
	assert.Contains(t, kube("rollout", "status", "deployment/web", "--timeout=30s"), `deployment "web" successfully rolled out`)
	history := kube("rollout", "history", "deployment/web")
	assert.Regexp(t, `(?m)^1\s+<none>$`, history)
	assert.Regexp(t, `(?m)^2\s+<none>$`, history)

	assert.Equal(t, "deployment.apps/web rolled back", kube("rollout", "undo", "deployment/web"))
	assert.Contains(t, kube("rollout", "status", "deployment/web", "--timeout=30s"), `deployment "web" successfully rolled out`)
	assert.Equal(t, "nginx:1.27", kube("get", "deployment", "web", "-o", "jsonpath={.spec.template.spec.containers[0].image}"))
	// The first ReplicaSet is revision 3 now, as upstream renumbers it.
	assert.Regexp(t, `(?m)^3\s+<none>$`, kube("rollout", "history", "deployment/web"))

	kube("scale", "deployment/web", "--replicas=3")
	assert.Contains(t, kube("rollout", "status", "deployment/web", "--timeout=30s"), `deployment "web" successfully rolled out`)
	assert.Equal(t, "3", kube("get", "deployment", "web", "-o", "jsonpath={.status.availableReplicas}"))
	assert.Equal(t, "deployment.apps/web paused", kube("rollout", "pause", "deployment/web"))
	kube("set", "image", "deployment/web", "nginx=nginx:1.29")
	apiservertest.WaitIdle(t, srv)
	assert.Equal(t, "nginx:1.27 nginx:1.27 nginx:1.27", kube("get", "pods", "-l", "app=web", "-o", "jsonpath={.items[*].spec.containers[0].image}"),
		"a paused Deployment does not roll out")
	assert.Equal(t, "deployment.apps/web resumed", kube("rollout", "resume", "deployment/web"))
	assert.Contains(t, kube("rollout", "status", "deployment/web", "--timeout=30s"), `deployment "web" successfully rolled out`)
	apiservertest.WaitIdle(t, srv) // the old pods are gone
	assert.Equal(t, "nginx:1.29 nginx:1.29 nginx:1.29", kube("get", "pods", "-l", "app=web", "--field-selector=status.phase=Running",
		"-o", "jsonpath={.items[*].spec.containers[0].image}"))
}
