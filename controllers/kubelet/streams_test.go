package kubelet_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
)

// deadline bounds every streaming call of these tests.
const deadline = 20 * time.Second

// parameterCodec encodes options into a query, as client-go's typed
// clients do.
var parameterCodec = scheme.ParameterCodec

// runningPod creates the pod on node-0 and waits until its containers run.
func (e env) runningPod(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	created := e.createPod(t, pod)
	return e.waitPod(t, created, func(p *corev1.Pod) bool {
		if !running(p) {
			return false
		}
		for _, c := range p.Spec.Containers {
			if status(p, c.Name).State.Running == nil {
				return false
			}
		}
		return true
	})
}

// logs reads the pod's log with client-go's GetLogs.
func (e env) logs(t *testing.T, pod string, opts *corev1.PodLogOptions) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	// Stream, as kubectl logs reads: DoRaw would hide the Status of an
	// error.
	r, err := e.client.CoreV1().Pods("default").GetLogs(pod, opts).Stream(ctx)
	if err != nil {
		return "", err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	return string(b), err
}

// executors are the ways client-go runs a remote command, with the
// server's network configuration and with an in-process one (whose SPDY
// and WebSocket round trippers reach the server over the network all the
// same).
var executors = map[string]func(e env, u *url.URL) (remotecommand.Executor, error){
	"spdy": func(e env, u *url.URL) (remotecommand.Executor, error) {
		return remotecommand.NewSPDYExecutor(e.srv.RESTConfig(), http.MethodPost, u)
	},
	"websocket": func(e env, u *url.URL) (remotecommand.Executor, error) {
		return remotecommand.NewWebSocketExecutor(e.srv.RESTConfig(), http.MethodGet, u.String())
	},
	"fallback": func(e env, u *url.URL) (remotecommand.Executor, error) {
		return fallbackExecutor(e.srv.RESTConfig(), u)
	},
	"spdy, in-process config": func(e env, u *url.URL) (remotecommand.Executor, error) {
		return remotecommand.NewSPDYExecutor(e.srv.InProcessRESTConfig(), http.MethodPost, u)
	},
	"fallback, in-process config": func(e env, u *url.URL) (remotecommand.Executor, error) {
		return fallbackExecutor(e.srv.InProcessRESTConfig(), u)
	},
}

// fallbackExecutor is kubectl's: WebSocket, else SPDY.
func fallbackExecutor(cfg *rest.Config, u *url.URL) (remotecommand.Executor, error) {
	ws, err := remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, u.String())
	if err != nil {
		return nil, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, u)
	if err != nil {
		return nil, err
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

// session is a remote command's result.
type session struct {
	stdout, stderr string
	err            error
}

// stream runs pods/<sub> (exec or attach) of the pod with opts over the
// protocol (an executors key), with stdin as its input.
func (e env) stream(t *testing.T, protocol, pod, sub string, opts runtime.Object, stdin io.Reader, sizes remotecommand.TerminalSizeQueue) session {
	t.Helper()
	req := e.client.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name(pod).SubResource(sub).
		VersionedParams(opts, parameterCodec)
	exec, err := executors[protocol](e, req.URL())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	var stdout, stderr bytes.Buffer
	so := streamOptions(opts, stdin, &stdout, &stderr)
	so.TerminalSizeQueue = sizes
	err = exec.StreamWithContext(ctx, so)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "the session did not end in time")
	return session{stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// streamOptions are the client's streams for what opts ask, as kubectl
// passes them: a stream not asked for is nil (the server would not expect
// it), stderr too with a terminal.
func streamOptions(opts runtime.Object, stdin io.Reader, stdout, stderr io.Writer) remotecommand.StreamOptions {
	var so remotecommand.StreamOptions
	set := func(in, out, errOut, tty bool) {
		if in {
			so.Stdin = stdin
		}
		if out {
			so.Stdout = stdout
		}
		if errOut && !tty {
			so.Stderr = stderr
		}
		so.Tty = tty
	}
	switch o := opts.(type) {
	case *corev1.PodExecOptions:
		set(o.Stdin, o.Stdout, o.Stderr, o.TTY)
	case *corev1.PodAttachOptions:
		set(o.Stdin, o.Stdout, o.Stderr, o.TTY)
	}
	return so
}
