package kubelet_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeembed/apiserver/controllers/kubelet"
)

// kubectlEnv is kubectl on PATH pointed at the server, or a skipped test.
func (e env) kubectlEnv(t *testing.T) func(ctx context.Context, args ...string) *exec.Cmd {
	t.Helper()
	path, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not on PATH: install it to run this test")
	}
	kubeconfig, err := e.srv.Kubeconfig()
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(file, kubeconfig, 0o600))
	return func(ctx context.Context, args ...string) *exec.Cmd {
		return exec.CommandContext(ctx, path, append([]string{"--kubeconfig", file}, args...)...)
	}
}

// run runs cmd with stdin and returns its output and exit code.
func run(t *testing.T, cmd *exec.Cmd, stdin string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out.String(), errOut.String(), exit.ExitCode()
	}
	require.NoError(t, err)
	return out.String(), errOut.String(), 0
}

func TestKubectl(t *testing.T) {
	t.Parallel()
	e := start(t)
	kubectl := e.kubectlEnv(t)
	e.runningPod(t, simplePod("p"))
	e.k.SetLogs("default", "p", "app", "started\nlistening on :8080\n")
	e.k.HandleExec("default", "p", "app", shell)
	e.k.HandlePort("default", "p", 8080, echo)
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()

	out, errOut, code := run(t, kubectl(ctx, "logs", "p", "--tail=1"), "")
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, "listening on :8080\n", out)

	out, errOut, code = run(t, kubectl(ctx, "exec", "p", "--", "echo", "hi", "there"), "")
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, "hi there\n", out)

	out, errOut, code = run(t, kubectl(ctx, "exec", "-i", "p", "--", "cat"), "from stdin\n")
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, "from stdin\n", out)

	_, errOut, code = run(t, kubectl(ctx, "exec", "p", "--", "fail"), "")
	assert.Equal(t, 3, code)
	assert.Equal(t, "boom\ncommand terminated with exit code 3\n", errOut)

	_, errOut, code = run(t, kubectl(ctx, "exec", "p", "-c", "nope", "--", "ls"), "")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "container nope is not valid for pod p")
}

func TestKubectlPortForward(t *testing.T) {
	t.Parallel()
	e := start(t)
	kubectl := e.kubectlEnv(t)
	e.runningPod(t, simplePod("p"))
	e.k.HandlePort("default", "p", 8080, echo)
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()

	cmd := kubectl(ctx, "port-forward", "pod/p", ":8080")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() {
		cancel() // kills it
		_ = cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	m := regexp.MustCompile(`^Forwarding from (127\.0\.0\.1:\d+) -> 8080`).FindStringSubmatch(line)
	require.NotNil(t, m, "kubectl port-forward printed %q", line)
	go func() { _, _ = io.Copy(io.Discard, stdout) }()

	c, err := net.Dial("tcp", m[1])
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "over kubectl\n")
	require.NoError(t, err)
	got, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "echo: over kubectl\n", got)
}

// kubectl debug adds an ephemeral container, waits for it to run and
// attaches to it (it hung before the kubelet ran ephemeral containers).
func TestKubectlDebug(t *testing.T) {
	t.Parallel()
	e := start(t)
	kubectl := e.kubectlEnv(t)
	e.runningPod(t, simplePod("p"))
	e.k.HandleAttach("default", "p", "dbg", func(_ context.Context, s kubelet.Stdio) {
		_, _ = io.Copy(s.Stdout, s.Stdin)
	})
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()

	out, errOut, code := run(t, kubectl(ctx, "debug", "-i", "p", "--image=busybox:1.36", "-c", "dbg", "--profile=general"), "from stdin\n")
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, "from stdin\n", out)
	p, err := e.client.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, p.Status.EphemeralContainerStatuses, 1)
	assert.Equal(t, "dbg", p.Status.EphemeralContainerStatuses[0].Name)
}
