package kubelet

// pods/exec and pods/attach as the kubelet serves them: its checks, then
// the container runtime's streaming (k8s.io/cri-streaming's ServeExec and
// ServeAttach, SPDY or WebSocket as the client speaks), with the test's
// handlers as the processes.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// TerminalSize is a terminal's size in characters, as a client sets it.
type TerminalSize struct {
	Width, Height uint16
}

// Stdio is a process's standard streams as an exec or attach session
// connects them to its client.
type Stdio struct {
	// Stdin is what the client sends, at EOF once it closes it (at once
	// when it sends none). Read it as a process does: the client's input
	// waits until it is read.
	Stdin io.Reader
	// Stdout and Stderr reach the client (what it did not ask for is
	// discarded). With a terminal they are one: Stderr is Stdout.
	Stdout, Stderr io.Writer
	// TTY: the process has a terminal (an exec's client asked for one;
	// an attached container has one when its spec says tty).
	TTY bool
	// Resize receives the terminal's size as the client sets and changes
	// it; nil without a terminal, closed once the client sends no more.
	Resize <-chan TerminalSize
}

// Exec is a command pods/exec runs in a container.
type Exec struct {
	Command []string
	Stdio
}

// ExecHandler is what runs the commands of an exec in a container: it
// returns the command's exit code, 0 for success (taken modulo 256, as a
// process's; a client sees another as "command terminated with exit code
// N"). ctx ends when the client goes.
type ExecHandler func(ctx context.Context, e Exec) (exitCode int)

// AttachHandler is a container's main process as pods/attach reaches it:
// called for each attach with its streams. Returning ends the attach, not
// the container.
type AttachHandler func(ctx context.Context, s Stdio)

// HandleExec makes h run the commands exec'd in the container of the pod
// (of the pods of that name, from now on), its lifecycle hooks' exec
// commands too; an empty container name is every container of the pod
// without one of its own. Without a handler, a command fails as one that
// is not in the container's image (a hook's succeeds, as probes pass).
func (k *Kubelet) HandleExec(namespace, pod, container string, h ExecHandler) {
	k.streams.mu.Lock()
	defer k.streams.mu.Unlock()
	k.streams.exec[namespace+"/"+pod+"/"+container] = h
}

// HandleAttach makes h the main process of the container of the pod, as
// pods/attach reaches it; an empty container name is every container of
// the pod. Without a handler, an attach shows what the container logs
// from then on (AppendLog) and discards its input.
func (k *Kubelet) HandleAttach(namespace, pod, container string, h AttachHandler) {
	k.streams.mu.Lock()
	defer k.streams.mu.Unlock()
	k.streams.attach[namespace+"/"+pod+"/"+container] = h
}

// The kubelet's streaming defaults (--streaming-connection-idle-timeout,
// the CRI streaming server's stream creation timeout).
const (
	streamIdleTimeout     = 4 * time.Hour
	streamCreationTimeout = remotecommand.DefaultStreamCreationTimeout
)

// serveExec is /exec/{namespace}/{pod}[/{uid}]/{container}: getExec.
func (k *Kubelet) serveExec(w http.ResponseWriter, req *http.Request) {
	opts, err := remotecommand.NewOptions(req)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	pod, ok := k.nodePod(req.Context(), req.PathValue("namespace"), req.PathValue("pod"))
	if !ok {
		writeError(w, http.StatusNotFound, "pod does not exist")
		return
	}
	name := req.PathValue("container")
	if _, running := k.runningContainer(pod, req.PathValue("uid"), name); !running {
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("container not found (%q)", name))
		return
	}
	if k.translate(w, req, opts) {
		return
	}
	rt := &streamRuntime{k: k, pod: pod.Namespace + "/" + pod.Name}
	remotecommand.ServeExec(w, req, rt, podFullName(pod), string(pod.UID), name, req.URL.Query()[corev1.ExecCommandParam],
		opts, streamIdleTimeout, streamCreationTimeout, remotecommand.SupportedStreamingProtocols)
}

// serveAttach is /attach/{namespace}/{pod}[/{uid}]/{container}: getAttach,
// with the terminal the container's spec says (it cannot change once the
// process runs).
func (k *Kubelet) serveAttach(w http.ResponseWriter, req *http.Request) {
	opts, err := remotecommand.NewOptions(req)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	pod, ok := k.nodePod(req.Context(), req.PathValue("namespace"), req.PathValue("pod"))
	if !ok {
		writeError(w, http.StatusNotFound, "pod does not exist")
		return
	}
	name := req.PathValue("container")
	id, running := k.runningContainer(pod, req.PathValue("uid"), name)
	spec := containerSpec(pod, name)
	if !running || spec == nil {
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("container %s not found in pod %s", name, podFullName(pod)))
		return
	}
	if spec.TTY && opts.Stderr { // the CRI streaming server's validation
		writeError(w, http.StatusInternalServerError, "rpc error: code = InvalidArgument desc = tty and stderr cannot both be true")
		return
	}
	if k.translate(w, req, opts) {
		return
	}
	rt := &streamRuntime{k: k, pod: pod.Namespace + "/" + pod.Name, instance: id, tty: spec.TTY}
	remotecommand.ServeAttach(w, req, rt, podFullName(pod), string(pod.UID), name, opts,
		streamIdleTimeout, streamCreationTimeout, remotecommand.SupportedStreamingProtocols)
}

// streamRuntime runs the test's handlers as a container runtime runs
// processes: remotecommand's Executor and Attacher.
type streamRuntime struct {
	k   *Kubelet
	pod string
	// instance and tty are the attached container's.
	instance string
	tty      bool
}

// ExecInContainer runs the handler of the container, or fails as runc
// does for a command that is not there.
func (rt *streamRuntime) ExecInContainer(ctx context.Context, _, _, container string, cmd []string, in io.Reader, out, errOut io.WriteCloser,
	tty bool, resize <-chan remotecommand.TerminalSize, _ time.Duration) error {
	h, ok := handler(rt.k.streams, rt.k.streams.exec, rt.pod, container)
	if !ok {
		return notFound(cmd, rt.pod, container)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	code := h(ctx, Exec{Command: cmd, Stdio: newStdio(ctx, in, out, errOut, tty, resize)}) & 0xff
	closeAll(out, errOut)
	if code != 0 {
		// What containerd returns: ServeExec reports the code to the client.
		return utilexec.CodeExitError{Err: fmt.Errorf("error executing command %v, exit code %d", cmd, code), Code: code}
	}
	return nil
}

// AttachContainer connects to the container's handler, or to its output.
func (rt *streamRuntime) AttachContainer(ctx context.Context, _, _, container string, in io.Reader, out, errOut io.WriteCloser,
	_ bool, resize <-chan remotecommand.TerminalSize) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := newStdio(ctx, in, out, errOut, rt.tty, resize)
	if h, ok := handler(rt.k.streams, rt.k.streams.attach, rt.pod, container); ok {
		h(ctx, s)
	} else {
		go func() { _, _ = io.Copy(io.Discard, s.Stdin) }()
		_ = rt.k.writeLogs(ctx, rt.k.logOf(rt.pod, container, rt.instance), attachLogOptions(), s.Stdout)
	}
	closeAll(out, errOut)
	return nil
}

// notFound is runc's error for a command not in the container's image, as
// containerd reports it, with what a test does about it.
func notFound(cmd []string, pod, container string) error {
	name := ""
	if len(cmd) > 0 {
		name = cmd[0]
	}
	id := make([]byte, 32)
	_, _ = rand.Read(id)
	return fmt.Errorf("failed to exec in container: failed to start exec %q: OCI runtime exec failed: exec failed: unable to start container process: "+
		"exec: %q: executable file not found in $PATH: unknown (kubeembed: nothing runs in container %q of pod %s: "+
		"say what its commands do with Kubelet.HandleExec)", hex.EncodeToString(id), name, container, pod)
}

// newStdio is the streams a handler gets: never nil, one terminal with a
// TTY, resize events until ctx ends.
func newStdio(ctx context.Context, in io.Reader, out, errOut io.Writer, tty bool, resize <-chan remotecommand.TerminalSize) Stdio {
	s := Stdio{Stdin: in, Stdout: out, Stderr: errOut, TTY: tty}
	if s.Stdin == nil {
		s.Stdin = strings.NewReader("")
	}
	if s.Stdout == nil {
		s.Stdout = io.Discard
	}
	if s.Stderr == nil || tty {
		s.Stderr = s.Stdout
	}
	if resize != nil {
		sizes := make(chan TerminalSize)
		s.Resize = sizes
		go forwardSizes(ctx, resize, sizes)
	}
	return s
}

// forwardSizes passes resize events on until they end or ctx does.
func forwardSizes(ctx context.Context, from <-chan remotecommand.TerminalSize, to chan<- TerminalSize) {
	defer close(to)
	for {
		select {
		case s, ok := <-from:
			if !ok {
				return
			}
			select {
			case to <- TerminalSize{Width: s.Width, Height: s.Height}:
			case <-ctx.Done():
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// closeAll ends the output streams once the process is done, so that its
// last output reaches the client before the exit status.
func closeAll(ws ...io.WriteCloser) {
	for _, w := range ws {
		if w != nil {
			_ = w.Close()
		}
	}
}

// podFullName is the kubelet's name of a pod: name_namespace.
func podFullName(pod *corev1.Pod) string { return pod.Name + "_" + pod.Namespace }

// containerSpec is the pod's container (init, regular or ephemeral) of
// that name; nil if there is none.
func containerSpec(pod *corev1.Pod, name string) *corev1.Container {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if c := &pod.Spec.EphemeralContainers[i]; c.Name == name {
			return (*corev1.Container)(&c.EphemeralContainerCommon)
		}
	}
	return nil
}

// writeError answers a request the kubelet refuses, in plain text, as
// its handlers and the CRI streaming server do.
func writeError(w http.ResponseWriter, code int, msg string) {
	w.WriteHeader(code)
	_, _ = w.Write([]byte(msg))
}
