package kubelet

// Lifecycle hooks, as kubelet v1.37.2 runs them (kuberuntime_container.go,
// lifecycle/handlers.go): a container's postStart hook in startContainer,
// once it has started, the pod's sync waiting for it (no time limit); its
// preStop hook in killContainer, before the stop signal, for at most the
// grace period, which it uses up.

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubeembed/apiserver/internal/version"
)

// hook is a container's preStop hook run: from start, until end (zero
// while the test's handler runs); the kubelet waits for it until limit
// (the grace period's end), then stops the container all the same.
type hook struct {
	start, end, limit time.Time
	// failure is why a postStart hook failed (the message the container's
	// PostStartHookError shows), "" if it did not.
	failure string
	// pending: its handler is the test's (exec, httpGet) and has not
	// been started yet (Kubelet.startHooks); cancel ends the handler's
	// context once started.
	pending bool
	cancel  context.CancelFunc
}

// stopHooks ends the contexts of the handlers still running the
// containers' hooks: their containers stopped (an exec dies with its
// container), or the pod is gone.
func (r *podRuntime) stopHooks() {
	for _, c := range r.all() {
		for _, h := range []*hook{c.preStop, c.postStart} {
			if h != nil && h.cancel != nil {
				h.cancel()
			}
		}
	}
}

// over is when the kubelet stops waiting for the hook: its end, or its
// limit (if it has one) while it runs.
func (h *hook) over() time.Time {
	if !h.limit.IsZero() && (h.end.IsZero() || h.end.After(h.limit)) {
		return h.limit
	}
	return h.end
}

// beginPreStops starts the preStop hooks of the running containers the
// kubelet kills from now with grace (at least 1 s: the pod worker's
// least), as killContainer runs them: a sleep takes its seconds, a
// tcpSocket handler fails (the kubelet has none), exec and httpGet run
// the test's handlers (startHooks). A container whose hook ran already (a
// kill under way) is not hooked again.
func (r *podRuntime) beginPreStops(now time.Time, grace time.Duration) {
	for _, c := range r.all() {
		lc := c.spec.Lifecycle
		if !c.instance.running() || c.preStop != nil || lc == nil || lc.PreStop == nil {
			continue
		}
		h := beginHook(now, lc.PreStop)
		h.limit = now.Add(max(grace, time.Second)) // as orderStops
		if h.failure != "" {
			c.preStopFailed()
		}
		c.preStop = h
	}
}

// beginHook is the run from now of a hook lh, with no limit: a sleep
// ends after its seconds, a tcpSocket handler fails at once (the kubelet
// has none), exec and httpGet wait for the test's handlers (startHooks).
func beginHook(now time.Time, lh *corev1.LifecycleHandler) *hook {
	h := &hook{start: now, end: now}
	switch {
	case lh.Sleep != nil:
		h.end = now.Add(seconds(lh.Sleep.Seconds))
	case lh.Exec != nil || lh.HTTPGet != nil:
		h.end, h.pending = time.Time{}, true
	default:
		h.failure = fmt.Sprintf("Cannot run handler: %v", fmt.Errorf("invalid handler: %v", lh))
	}
	return h
}

// postStarting: a container's postStart hook runs at now.
func (r *podRuntime) postStarting(now time.Time) bool {
	return slices.ContainsFunc(r.all(), func(c *container) bool {
		return c.postStart != nil && (c.postStart.end.IsZero() || now.Before(c.postStart.end))
	})
}

// endPostStarts makes the instances whose postStart hook has run by now
// the containers' own, started as their hooks began; one whose hook failed
// is killed as it ended (FailedPostStartHook, then Killing; exit code
// 143 or Rule.StopExitCode, at once as on a probe's kill) and waits with
// PostStartHookError until it restarts. It reports whether there was one.
func (r *podRuntime) endPostStarts(pod *corev1.Pod, now time.Time, plans planner) bool {
	var ended bool
	for _, c := range r.all() {
		h := c.postStart
		if h == nil || h.end.IsZero() || now.Before(h.end) {
			continue
		}
		c.postStart, ended = nil, true
		c.run(h.start, h.end, plans, pod)
		if h.failure == "" {
			continue
		}
		c.record(event{corev1.EventTypeWarning, "FailedPostStartHook", "PostStartHook failed"},
			event{corev1.EventTypeNormal, "Killing", "FailedPostStartHook"})
		_, code := plans.stopPlan(pod)
		c.exit(h.end, Exit{Code: code})
		c.exitUnseen, c.hookError = true, h.failure // of a sidecar at most among init containers: validation allows none other a hook
	}
	return ended
}

// preStopFailed records the kubelet's event for a failed preStop hook
// (the handler's message goes to its log only).
func (c *container) preStopFailed() { c.record(preStopFailure) }

var preStopFailure = event{corev1.EventTypeWarning, "FailedPreStopHook", "PreStopHook failed"}

// startHooks runs the test's handlers of the pod's hooks begun (a
// preStop's by beginPreStops, a postStart's as its container started),
// each in its own goroutine: when it returns the hook ends, and the pod is
// synced (the stops ordered again from a preStop's end). A hook whose
// handler the test did not register ends at once, as probes pass
// without one: it reports whether a postStart hook did. Called with k.mu
// held.
func (k *Kubelet) startHooks(pod *corev1.Pod, r *podRuntime) (postStarted bool) {
	for _, c := range r.all() {
		if h := c.postStart; h != nil && h.pending {
			h.pending = false
			if run := k.hookHandler(pod, r, c, c.spec.Lifecycle.PostStart); run == nil {
				h.end, postStarted = h.start, true
			} else {
				ctx, cancel := context.WithCancel(k.hooks.ctx)
				h.cancel = cancel
				go func() {
					defer cancel()
					k.postStartEnded(pod, r, c, h, run(ctx))
				}()
			}
		}
		h := c.preStop
		if h == nil || !h.pending {
			continue
		}
		h.pending = false
		run := k.hookHandler(pod, r, c, c.spec.Lifecycle.PreStop)
		if run == nil {
			h.end = h.start
			r.reorderStops()
			continue
		}
		ctx, cancel := context.WithCancel(k.hooks.ctx)
		h.cancel = cancel
		go func() {
			defer cancel()
			failed := run(ctx) != "" || ctx.Err() != nil // killed with its container: ExecSync fails
			k.preStopEnded(pod, r, c, h, failed)
		}()
	}
	return postStarted
}

// postStartEnded ends the postStart hook h of the pod's container c as
// its handler returned, why if it failed, and syncs the pod: its sync
// goes on from there.
func (k *Kubelet) postStartEnded(pod *corev1.Pod, r *podRuntime, c *container, h *hook, failure string) {
	if k.hooks.ctx.Err() != nil {
		return // the kubelet stopped
	}
	k.mu.Lock()
	if k.running[r.uid] == r && c.postStart == h {
		h.end, h.failure = later(h.start, k.clock.Now()), failure
	}
	k.mu.Unlock()
	k.requeueAt(pod.Namespace+"/"+pod.Name, time.Time{})
}

// preStopEnded ends the hook h of the pod's container c as its handler
// returned: its stops are ordered again from now and the pod synced. The
// failure's event is recorded with the pod's next status, or at once if
// the kubelet is done with the pod (it came too late for the stop), but
// not for a pod it forgot.
func (k *Kubelet) preStopEnded(pod *corev1.Pod, r *podRuntime, c *container, h *hook, failed bool) {
	if k.hooks.ctx.Err() != nil {
		return // the kubelet stopped
	}
	k.mu.Lock()
	known := k.running[r.uid] == r // a pod forgotten (gone, or Reset) gets no more events
	live := known && !r.deleted && c.preStop == h
	if live {
		h.end = later(h.start, k.clock.Now())
		if failed {
			c.preStopFailed()
		}
		r.reorderStops()
	}
	node, version := r.node, r.version
	k.mu.Unlock()
	if !live {
		if failed && known {
			k.record(pod, node, podWork{version: version, events: []containerEvent{{c, stamp(preStopFailure)}}})
		}
		return
	}
	k.requeueAt(pod.Namespace+"/"+pod.Name, time.Time{})
}

// hookHandler is what runs the container's exec or httpGet hook lh,
// returning why it failed ("" if it did not), in the kubelet's words; nil
// when the test registered nothing to run it.
func (k *Kubelet) hookHandler(pod *corev1.Pod, r *podRuntime, c *container, lh *corev1.LifecycleHandler) func(context.Context) (failure string) {
	key := pod.Namespace + "/" + pod.Name
	if lh.Exec != nil {
		h, ok := handler(k.streams, k.streams.exec, key, c.spec.Name)
		if !ok {
			return nil
		}
		return func(ctx context.Context) string { return execHook(ctx, h, lh.Exec.Command, pod, c.spec.Name) }
	}
	get := lh.HTTPGet
	failed := func(err error) string {
		return fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %v", get.Path, c.spec.Name, podDesc(pod), err)
	}
	port, err := hookPort(get.Port, c.spec)
	if err != nil {
		return func(context.Context) string { return failed(err) }
	}
	if get.Host == "" && !k.streams.serves(key, port) {
		return nil // nothing registered at the pod's own port
	}
	host := cmp.Or(get.Host, r.ip)
	return func(ctx context.Context) string {
		fellBack, err := k.httpHook(ctx, get, host, port)
		if err != nil {
			return failed(err)
		}
		if fellBack {
			k.mu.Lock()
			r.podEvents = append(r.podEvents, event{corev1.EventTypeWarning, "LifecycleHTTPFallback",
				fmt.Sprintf("request to HTTPS lifecycle hook %s got HTTP response, retry with HTTP succeeded", net.JoinHostPort(host, strconv.Itoa(int(port))))})
			k.mu.Unlock()
		}
		return ""
	}
}

// execHook runs an exec hook's command through the test's handler h, as
// ExecSync: a non-zero exit fails it, with its output (stdout, then
// stderr) in the message.
func execHook(ctx context.Context, h ExecHandler, cmd []string, pod *corev1.Pod, container string) string {
	var stdout, stderr lockedBuffer
	code := h(ctx, Exec{Command: cmd, Stdio: Stdio{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr}}) & 0xff
	if code == 0 {
		return ""
	}
	err := fmt.Errorf("command '%s' exited with %d: %s", strings.Join(cmd, " "), code, stderr.String())
	return fmt.Sprintf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: %v, message: %q",
		cmd, container, podDesc(pod), err, stdout.String()+stderr.String())
}

// lockedBuffer is a buffer a handler may write from several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// hookPort is an httpGet hook's port: a number, or the name of one of the
// container's ports.
func hookPort(p intstr.IntOrString, spec *corev1.Container) (int32, error) {
	if p.Type == intstr.Int {
		if p.IntVal <= 0 || p.IntVal > 65535 {
			return 0, fmt.Errorf("invalid port number: %v", p.IntVal)
		}
		return p.IntVal, nil
	}
	for _, cp := range spec.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort, nil
		}
	}
	return 0, fmt.Errorf("port %q not found", p.StrVal)
}

// httpHook sends an httpGet hook's request over the simulated cluster
// network, as the kubelet's lifecycle handler sends it: its headers, a
// kube-lifecycle user agent, TLS unverified, and an HTTPS request a plain
// HTTP server answers sent again over HTTP, without its Authorization
// (fellBack). Only a failure to get an answer fails the hook; its status
// code is not read.
func (k *Kubelet) httpHook(ctx context.Context, get *corev1.HTTPGetAction, host string, port int32) (fellBack bool, err error) {
	scheme := strings.ToLower(string(get.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	client := &http.Client{Transport: &http.Transport{DialContext: k.DialContext,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}, // #nosec G402 -- as the kubelet's
		CheckRedirect: localRedirects}
	defer client.CloseIdleConnections()
	send := func(scheme string, fallback bool) error {
		req, err := hookRequest(ctx, scheme, net.JoinHostPort(host, strconv.Itoa(int(port))), get)
		if err != nil {
			return err
		}
		if fallback {
			req.Header.Del("Authorization")
		}
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		return err
	}
	if err = send(scheme, false); err != nil && scheme == "https" && strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		if send("http", true) == nil {
			return true, nil
		}
	}
	return false, err
}

// localRedirects follows redirects to the same host, at most 10, and takes
// a redirect elsewhere as the answer (the kubelet's
// RedirectChecker(false)).
func localRedirects(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}

// hookRequest is the kubelet's request for an httpGet hook
// (probe/http/request.go): its path as parsed (as it is when it does not
// parse), its headers, User-Agent kube-lifecycle/<major>.<minor> and
// Accept */* unless set (an Accept set empty is dropped).
func hookRequest(ctx context.Context, scheme, hostPort string, get *corev1.HTTPGetAction) (*http.Request, error) {
	u, err := url.Parse(get.Path)
	if err != nil {
		u = &url.URL{Path: get.Path}
	}
	u.Scheme, u.Host = scheme, hostPort
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	headers := http.Header{}
	for _, h := range get.HTTPHeaders {
		headers.Add(h.Name, h.Value)
	}
	if _, ok := headers["User-Agent"]; !ok {
		headers.Set("User-Agent", "kube-lifecycle/"+minorVersion())
	}
	if _, ok := headers["Accept"]; !ok {
		headers.Set("Accept", "*/*")
	} else if headers.Get("Accept") == "" {
		headers.Del("Accept")
	}
	req.Header, req.Host = headers, headers.Get("Host")
	return req, nil
}

// minorVersion is the simulated kubelet's <major>.<minor> ("1.37").
func minorVersion() string {
	v := strings.Split(version.Kubernetes(), ".")
	return v[0] + "." + v[1]
}
