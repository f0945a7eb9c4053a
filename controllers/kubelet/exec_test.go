package kubelet_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/exec"

	"github.com/kubeembed/apiserver/controllers/kubelet"
)

// shell is a container's commands: cat copies stdin, echo prints its
// arguments, fail writes to stderr and exits 3, size prints the
// terminal's first size.
func shell(_ context.Context, x kubelet.Exec) int {
	switch x.Command[0] {
	case "cat":
		_, _ = io.Copy(x.Stdout, x.Stdin)
	case "echo":
		fmt.Fprintln(x.Stdout, strings.Join(x.Command[1:], " "))
	case "fail":
		fmt.Fprintln(x.Stderr, "boom")
		return 3
	case "size":
		s := <-x.Resize
		fmt.Fprintf(x.Stdout, "%dx%d tty=%v\n", s.Width, s.Height, x.TTY)
		fmt.Fprintln(x.Stderr, "on the terminal too")
	}
	return 0
}

func TestExec(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.runningPod(t, simplePod("p"))
	e.k.HandleExec("default", "p", "app", shell)
	for protocol := range executors {
		t.Run(protocol, func(t *testing.T) {
			t.Parallel()
			s := e.stream(t, protocol, "p", "exec", &corev1.PodExecOptions{Command: []string{"cat"}, Stdin: true, Stdout: true, Stderr: true},
				strings.NewReader("hello\n"), nil)
			require.NoError(t, s.err)
			assert.Equal(t, "hello\n", s.stdout)

			s = e.stream(t, protocol, "p", "exec", &corev1.PodExecOptions{Command: []string{"echo", "a", "b"}, Stdout: true}, nil, nil)
			require.NoError(t, s.err)
			assert.Equal(t, "a b\n", s.stdout)

			s = e.stream(t, protocol, "p", "exec", &corev1.PodExecOptions{Command: []string{"fail"}, Stdout: true, Stderr: true}, nil, nil)
			var code exec.CodeExitError
			require.ErrorAs(t, s.err, &code)
			assert.Equal(t, 3, code.Code)
			assert.EqualError(t, s.err, "command terminated with exit code 3")
			assert.Equal(t, "boom\n", s.stderr)
		})
	}
}

// sizes is a terminal that reports one size.
type sizes struct{ once sync.Once }

func (s *sizes) Next() *remotecommand.TerminalSize {
	var size *remotecommand.TerminalSize
	s.once.Do(func() { size = &remotecommand.TerminalSize{Width: 80, Height: 24} })
	return size
}

func TestExecTTY(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.runningPod(t, simplePod("p"))
	e.k.HandleExec("default", "p", "", shell) // every container of p
	for protocol := range executors {
		t.Run(protocol, func(t *testing.T) {
			t.Parallel()
			s := e.stream(t, protocol, "p", "exec", &corev1.PodExecOptions{Command: []string{"size"}, Stdin: true, Stdout: true, TTY: true},
				strings.NewReader(""), &sizes{})
			require.NoError(t, s.err)
			assert.Equal(t, "80x24 tty=true\non the terminal too\n", s.stdout)
		})
	}
}

func TestExecWithoutHandler(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.runningPod(t, simplePod("p"))
	const runc = `exec: "ls": executable file not found in $PATH: unknown (kubeembed: nothing runs in container "app" of pod default/p: ` +
		`say what its commands do with Kubelet.HandleExec)`
	for protocol, prefix := range map[string]string{
		"spdy": "Internal error occurred: error executing command in container: failed to exec in container: failed to start exec ",
		// The API server's translator wraps the kubelet's error again, as
		// upstream's does.
		"websocket": "Internal error occurred: Internal error occurred: error executing command in container: failed to exec in container: ",
	} {
		t.Run(protocol, func(t *testing.T) {
			s := e.stream(t, protocol, "p", "exec", &corev1.PodExecOptions{Command: []string{"ls"}, Stdout: true}, nil, nil)
			require.Error(t, s.err)
			assert.True(t, strings.HasPrefix(s.err.Error(), prefix), "error %q", s.err)
			assert.True(t, strings.HasSuffix(s.err.Error(), runc), "error %q", s.err)
		})
	}
}

// finishedPod is a pod whose container ran and exited 0, never restarted.
func (e env) finishedPod(t *testing.T) {
	t.Helper()
	pod := simplePod("done")
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	created := e.runningPod(t, pod)
	require.NoError(t, e.k.Complete(t.Context(), "default", "done"))
	e.waitPod(t, created, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
}

func TestExecInAStoppedContainer(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.finishedPod(t)
	e.k.HandleExec("default", "done", "app", shell)
	opts := &corev1.PodExecOptions{Command: []string{"echo"}, Stdout: true}
	s := e.stream(t, "spdy", "done", "exec", opts, nil, nil)
	assert.EqualError(t, s.err, `unable to upgrade connection: container not found ("app")`)
	// The node declares that its kubelet translates WebSocket streams (as
	// a v1.37 kubelet's does): the kubelet refuses before the upgrade, and
	// the fallback's SPDY gets the kubelet's error (TestKubeletTranslates).
	s = e.stream(t, "fallback", "done", "exec", opts, nil, nil)
	assert.EqualError(t, s.err, `unable to upgrade connection: container not found ("app")`)
	// A node that does not (an older kubelet's): the API server translates,
	// once the client's upgrade succeeded.
	_, err := e.client.CoreV1().Nodes().PatchStatus(t.Context(), "node-0", []byte(`{"status":{"declaredFeatures":null}}`))
	require.NoError(t, err)
	s = e.stream(t, "fallback", "done", "exec", opts, nil, nil)
	assert.EqualError(t, s.err, `Internal error occurred: unable to upgrade connection: container not found ("app")`)
	s = e.stream(t, "spdy", "done", "attach", &corev1.PodAttachOptions{Stdout: true}, nil, nil)
	assert.EqualError(t, s.err, `unable to upgrade connection: container app not found in pod done_default`)
}

// TestKubeletTranslates runs WebSocket clients against a node that
// declares ExtendWebSocketsToKubelet, as a v1.37 kubelet's does: the API
// server passes their upgrades through and the kubelet translates.
func TestKubeletTranslates(t *testing.T) {
	t.Parallel()
	e := start(t)
	_, err := e.client.CoreV1().Nodes().PatchStatus(t.Context(), "node-0", []byte(`{"status":{"declaredFeatures":["ExtendWebSocketsToKubelet"]}}`))
	require.NoError(t, err)
	e.runningPod(t, simplePod("p"))
	e.finishedPod(t)
	e.k.HandleExec("default", "p", "app", shell)

	s := e.stream(t, "websocket", "p", "exec", &corev1.PodExecOptions{Command: []string{"cat"}, Stdin: true, Stdout: true},
		strings.NewReader("through the kubelet\n"), nil)
	require.NoError(t, s.err)
	assert.Equal(t, "through the kubelet\n", s.stdout)
	s = e.stream(t, "websocket", "p", "exec", &corev1.PodExecOptions{Command: []string{"fail"}, Stderr: true}, nil, nil)
	assert.EqualError(t, s.err, "command terminated with exit code 3")

	// The kubelet refuses before the upgrade: the WebSocket handshake
	// fails, and kubectl's fallback retries with SPDY.
	opts := &corev1.PodExecOptions{Command: []string{"echo"}, Stdout: true}
	s = e.stream(t, "websocket", "done", "exec", opts, nil, nil)
	assert.ErrorContains(t, s.err, "unable to upgrade streaming request: websocket: bad handshake (500 Internal Server Error)")
	s = e.stream(t, "fallback", "done", "exec", opts, nil, nil)
	assert.EqualError(t, s.err, `unable to upgrade connection: container not found ("app")`)
}

func TestAttach(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.runningPod(t, simplePod("p"))
	e.k.HandleAttach("default", "p", "app", func(_ context.Context, s kubelet.Stdio) {
		fmt.Fprint(s.Stdout, "attached: ")
		_, _ = io.Copy(s.Stdout, s.Stdin)
	})
	for protocol := range executors {
		t.Run(protocol, func(t *testing.T) {
			t.Parallel()
			s := e.stream(t, protocol, "p", "attach", &corev1.PodAttachOptions{Stdin: true, Stdout: true, Stderr: true},
				strings.NewReader("hi\n"), nil)
			require.NoError(t, s.err)
			assert.Equal(t, "attached: hi\n", s.stdout)
		})
	}
}

// TestAttachShowsOutput attaches to a container without a handler: the
// client sees what it logs from then on, until it exits.
func TestAttachShowsOutput(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.runningPod(t, simplePod("p"))
	e.k.SetLogs("default", "p", "app", "before the attach\n")
	out := &syncBuffer{}
	done := make(chan session, 1)
	go func() {
		done <- e.streamTo(t, "spdy", "p", "attach", &corev1.PodAttachOptions{Stdout: true}, out)
	}()
	// When the attach starts is not observable: log until it shows.
	require.Eventually(t, func() bool {
		e.k.AppendLog("default", "p", "app", "ping")
		return strings.Contains(out.String(), "ping\n")
	}, deadline, 20*time.Millisecond)
	require.NoError(t, e.k.Exit(t.Context(), "default", "p", "app", 0))
	s := <-done
	require.NoError(t, s.err)
	assert.NotContains(t, out.String(), "before the attach")
}

// streamTo runs a session whose stdout is out, with no input.
func (e env) streamTo(t *testing.T, protocol, pod, sub string, opts *corev1.PodAttachOptions, out io.Writer) session {
	req := e.client.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name(pod).SubResource(sub).
		VersionedParams(opts, parameterCodec)
	exec, err := executors[protocol](e, req.URL())
	if err != nil {
		return session{err: err}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), deadline)
	defer cancel()
	return session{err: exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: out})}
}

// syncBuffer is a bytes.Buffer safe to write and read at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
