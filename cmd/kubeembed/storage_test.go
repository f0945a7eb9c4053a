package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

var widgets = schema.GroupVersionResource{Group: "example.kubeembed.dev", Version: "v1", Resource: "widgets"}

// runUntilServing runs the command in process until stop is called; it
// returns once the server serves.
func runUntilServing(t *testing.T, args ...string) (stop func()) {
	t.Helper()
	out := make(lineWriter, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, out, io.Discard) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			assert.NoError(t, <-done)
		}
	}
	t.Cleanup(stop)
	select {
	case <-out:
		return stop
	case err := <-done:
		stopped = true
		t.Fatalf("kubeembed exited: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("kubeembed did not start")
	}
	return nil
}

func clientsOf(t *testing.T, kubeconfig string) (kubernetes.Interface, dynamic.Interface) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	d, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	return c, d
}

// kubectlOn runs the kubectl on PATH against kubeconfig; nil without one.
func kubectlOn(t *testing.T, kubeconfig string) func(args ...string) (string, error) {
	path, err := exec.LookPath("kubectl")
	if err != nil {
		return nil
	}
	home := t.TempDir()
	return func(args ...string) (string, error) {
		cmd := exec.CommandContext(t.Context(), path, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home)
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
}

// --data-dir keeps the cluster: objects (kubectl apply'd too), CRDs and
// custom resources written before a stop are there after the next start.
func TestCLIDataDir(t *testing.T) {
	t.Parallel()
	dir, kc := t.TempDir(), filepath.Join(t.TempDir(), "kc")
	stop := runUntilServing(t, "--data-dir", dir, "--kubeconfig", kc, "--crds", "../../testdata/crds")
	c, d := clientsOf(t, kc)
	_, err := c.CoreV1().ConfigMaps("default").Create(t.Context(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = d.Resource(widgets).Namespace("default").Create(t.Context(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.kubeembed.dev/v1", "kind": "Widget", "metadata": map[string]any{"name": "kept"},
		"spec": map[string]any{"size": int64(1), "maxSize": int64(2)},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	kubectl := kubectlOn(t, kc)
	if kubectl != nil {
		manifest := filepath.Join(t.TempDir(), "cm.yaml")
		require.NoError(t, os.WriteFile(manifest, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: applied}\ndata: {k: v}\n"), 0o600))
		out, err := kubectl("apply", "-f", manifest)
		require.NoError(t, err, out)
	}
	stop()

	runUntilServing(t, "--data-dir", dir, "--kubeconfig", kc) // the CRD is in etcd
	if kubectl != nil {
		out, err := kubectl("get", "configmap", "applied", "-o", "jsonpath={.data.k}")
		require.NoError(t, err, out)
		assert.Equal(t, "v", out)
	}
	c, d = clientsOf(t, kc)
	cm, err := c.CoreV1().ConfigMaps("default").Get(t.Context(), "kept", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "v", cm.Data["k"])
	_, err = d.Resource(widgets).Namespace("default").Get(t.Context(), "kept", metav1.GetOptions{})
	require.NoError(t, err)
}

// A data directory in use by a running server is refused, at once.
func TestCLIDataDirInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runUntilServing(t, "--data-dir", dir, "--kubeconfig", filepath.Join(t.TempDir(), "kc"))
	err := run(context.Background(), []string{"--data-dir", dir, "--kubeconfig", filepath.Join(t.TempDir(), "kc")}, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is in use by another server")
}

// An etcd that does not answer fails the start after --etcd-dial-timeout.
func TestCLIEtcdUnreachable(t *testing.T) {
	t.Parallel()
	start := time.Now()
	err := run(context.Background(), []string{"--etcd-servers", "http://127.0.0.1:1", "--etcd-dial-timeout", "1s",
		"--kubeconfig", filepath.Join(t.TempDir(), "kc")}, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "etcd [http://127.0.0.1:1] did not answer within 1s")
	assert.Less(t, time.Since(start), 10*time.Second)
}
