package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/metricsapi"
)

// TestCLI builds the command, runs it as a subprocess, uses the server
// through the kubeconfig it wrote, and stops it with SIGTERM.
func TestCLI(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "kubeembed")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())

	kubeconfig := filepath.Join(dir, "kubeconfig")
	cmd := exec.Command(bin, "--kubeconfig", kubeconfig, "--crds", "../../testdata/crds", "--nodes", "2")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	lines := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			lines <- s.Text()
		}
	}()
	select {
	case line := <-lines:
		assert.Contains(t, line, "export KUBECONFIG="+kubeconfig)
	case err := <-exited:
		t.Fatalf("kubeembed exited before serving: %v\n%s", err, stderr.String())
	case <-time.After(time.Minute):
		t.Fatalf("kubeembed did not print its ready line\n%s", stderr.String())
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ns, err := c.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, ns.Items, 4)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	_, err = dyn.Resource(schema.GroupVersionResource{Group: "example.kubeembed.dev", Version: "v1", Resource: "widgets"}).
		Namespace("default").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err, "CRDs from --crds are served")
	nodes, err := c.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, nodes.Items, 2, "--nodes 2")
	for _, n := range nodes.Items {
		assert.Empty(t, n.Spec.Taints, "%s is Ready and schedulable when the CLI serves", n.Name)
	}

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		require.NoError(t, err, "exit status after SIGTERM\n%s", stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("kubeembed did not stop on SIGTERM")
	}
}

// lineWriter sends what is written to it to a channel, line by line.
type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w <- l
	}
	return len(p), nil
}

func TestCLIPortInUse(t *testing.T) {
	out := make(lineWriter, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	kc := filepath.Join(t.TempDir(), "kc")
	go func() { done <- run(ctx, []string{"--kubeconfig", kc}, out, io.Discard) }()
	defer func() { cancel(); <-done }()

	var line string
	select {
	case line = <-out:
	case err := <-done:
		t.Fatalf("first server exited: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("first server did not start")
	}
	url := strings.TrimSuffix(strings.Fields(line)[2], ";")
	port := url[strings.LastIndex(url, ":")+1:]
	err := run(context.Background(), []string{"--port", port, "--kubeconfig", kc + "2"}, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "address already in use")
}

// --audit-policy-file is read at start: a bad one stops the CLI with the
// policy's error.
func TestCLIAuditPolicy(t *testing.T) {
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	require.NoError(t, os.WriteFile(policy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Loud}]\n"), 0o600))
	err := run(context.Background(), []string{"--audit-policy-file", policy, "--audit-log-path", "-",
		"--kubeconfig", filepath.Join(t.TempDir(), "kc")}, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "audit policy")
}

// --controllers reads kube-controller-manager's syntax; an unknown name
// stops the CLI with the list of known ones.
func TestCLIControllers(t *testing.T) {
	assert.Equal(t, []controllers.Name{"*", "-namespace"}, splitNames("*, -namespace"))
	assert.Empty(t, splitNames(""), "none")
	err := run(context.Background(), []string{"--controllers", "*,-nosuch", "--kubeconfig", filepath.Join(t.TempDir(), "kc")}, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), fmt.Sprintf(`unknown controller "-nosuch" (known: %v)`, controllers.All()))
}

// --profile names a profile; --controllers, when given, overrides its
// controllers.
func TestCLIProfile(t *testing.T) {
	err := run(context.Background(), []string{"--profile", "kind", "--kubeconfig", filepath.Join(t.TempDir(), "kc")}, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `Profile "kind" is not a profile (known: [cluster envtest])`)
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	v := fs.String("controllers", "*", "")
	require.NoError(t, fs.Parse(nil))
	assert.Nil(t, controllersFlag(fs, *v), "not given: the profile's")
	require.NoError(t, fs.Parse([]string{"--controllers", ""}))
	assert.Equal(t, []controllers.Name{}, controllersFlag(fs, *v), "given empty: none")
	assert.Nil(t, nodesFlag(-1), "--nodes not given: the profile's")
	assert.Equal(t, []controllers.Node{}, nodesFlag(0), "--nodes 0: none")
	f, _, err := parseFlags(nil, io.Discard)
	require.NoError(t, err)
	assert.False(t, f.metrics, "--metrics is off unless given")
}

// --metrics serves metrics.k8s.io with the simulated usage (a Running
// pod's containers use what they request, the node the sum): kubectl top
// pods and top nodes answer, and so does the metrics clientset. The stop
// deletes the APIService before the handler ends: nothing is logged as an
// error.
func TestCLIMetrics(t *testing.T) {
	t.Parallel()
	kc := filepath.Join(t.TempDir(), "kc")
	log := &lockedBuffer{}
	stop := runLogging(t, log, "--metrics", "--kubeconfig", kc)
	c, _ := clientsOf(t, kc)
	_, err := c.CoreV1().Pods("default").Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}}}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	waitRunning(t, c, "default", "web")

	if kubectl := kubectlOn(t, kc); kubectl != nil {
		out, err := kubectl("top", "pods", "-n", "default")
		require.NoError(t, err, out)
		assert.Regexp(t, `(?m)^web\s+250m\s+64Mi\s*$`, out)
		out, err = kubectl("top", "nodes")
		require.NoError(t, err, out)
		assert.Regexp(t, `(?m)^node-0\s+250m\s+\d+%\s+64Mi\s+\d+%\s*$`, out)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	require.NoError(t, err)
	mc, err := metricsclient.NewForConfig(cfg)
	require.NoError(t, err)
	pm, err := mc.MetricsV1beta1().PodMetricses("default").Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "250m", pm.Containers[0].Usage.Cpu().String())
	nm, err := mc.MetricsV1beta1().NodeMetricses().Get(t.Context(), "node-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "64Mi", nm.Usage.Memory().String())

	stop()
	assert.NotContains(t, log.String(), "ERROR")
}

// A cluster on --data-dir keeps nothing of --metrics after a stop: the
// next start without it has no APIService leading nowhere (discovery
// would fail for metrics.k8s.io) and no Service kube-system/metrics-server.
func TestCLIMetricsDataDir(t *testing.T) {
	t.Parallel()
	dir, kc := t.TempDir(), filepath.Join(t.TempDir(), "kc")
	// No node: its kubelet's start-up events, refused while a server that
	// has just started stops, hold the stop for 10 s each.
	runUntilServing(t, "--data-dir", dir, "--metrics", "--nodes", "0", "--kubeconfig", kc)()
	// The port kept for the next start is below the ephemeral range, where
	// no outgoing connection of the machine can take it meanwhile.
	kept, err := os.ReadFile(filepath.Join(dir, "port"))
	require.NoError(t, err)
	port, err := strconv.Atoi(strings.TrimSpace(string(kept)))
	require.NoError(t, err)
	if low := ephemeralLow(); low > 0 {
		assert.Less(t, port, low, "the kept port")
	}
	runUntilServing(t, "--data-dir", dir, "--nodes", "0", "--kubeconfig", kc)
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	require.NoError(t, err)
	agg, err := aggregatorclient.NewForConfig(cfg)
	require.NoError(t, err)
	_, err = agg.ApiregistrationV1().APIServices().Get(t.Context(), metricsapi.APIServiceName, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "APIService: %v", err)
	c, _ := clientsOf(t, kc)
	_, err = c.CoreV1().Services(metricsapi.Namespace).Get(t.Context(), metricsapi.ServiceName, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "Service: %v", err)
}

// waitRunning watches pod namespace/name until it is Running, for at most
// 30 s.
func waitRunning(t *testing.T, c kubernetes.Interface, namespace, name string) {
	t.Helper()
	waitPodPhase(t, c, namespace, name, corev1.PodRunning)
}
