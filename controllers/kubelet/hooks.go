package kubelet

// Lifecycle hooks: a container's preStop hook, as kubelet v1.37.2 runs it
// in killContainer (kuberuntime_container.go, lifecycle/handlers.go):
// before the stop signal, for at most the grace period, which it uses up.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
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
	// pending: its handler is the test's (exec, httpGet) and has not
	// been started yet (Kubelet.startHooks); cancel ends the handler's
	// context once started.
	pending bool
	cancel  context.CancelFunc
}

// stopHooks ends the contexts of the handlers still running the
// containers' preStop hooks: their containers stopped (an exec dies with
// its container), or the pod is gone.
func (r *podRuntime) stopHooks() {
	for _, c := range r.all() {
		if h := c.preStop; h != nil && h.cancel != nil {
			h.cancel()
		}
	}
}

// over is when the kubelet stops waiting for the hook: its end, or its
// limit while it runs.
func (h *hook) over() time.Time {
	if h.end.IsZero() || h.end.After(h.limit) {
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
		h := &hook{start: now, end: now, limit: now.Add(max(grace, time.Second))} // as orderStops
		switch ps := lc.PreStop; {
		case ps.Sleep != nil:
			h.end = now.Add(seconds64(ps.Sleep.Seconds))
		case ps.Exec != nil || ps.HTTPGet != nil:
			h.end, h.pending = time.Time{}, true
		default: // tcpSocket: "Cannot run handler: invalid handler"
			c.preStopFailed()
		}
		c.preStop = h
	}
}

func seconds64(s int64) time.Duration { return time.Duration(s) * time.Second }

// preStopFailed records the kubelet's event for a failed preStop hook
// (the handler's message goes to its log only).
func (c *container) preStopFailed() { c.events = append(c.events, preStopFailure) }

var preStopFailure = event{corev1.EventTypeWarning, "FailedPreStopHook", "PreStopHook failed"}

// startHooks runs the test's handlers of the pod's preStop hooks begun
// (beginPreStops), each in its own goroutine: when it returns the hook
// ends, the stops are ordered again from it, and the pod is synced. A
// hook whose handler the test did not register ends at once, as
// probes pass without one. Called with k.mu held.
func (k *Kubelet) startHooks(pod *corev1.Pod, r *podRuntime) {
	for _, c := range r.all() {
		h := c.preStop
		if h == nil || !h.pending {
			continue
		}
		h.pending = false
		run := k.preStopHandler(pod, r, c)
		if run == nil {
			h.end = h.start
			r.reorderStops()
			continue
		}
		ctx, cancel := context.WithCancel(k.hooks.ctx)
		h.cancel = cancel
		go func() {
			defer cancel()
			failed := run(ctx) || ctx.Err() != nil // killed with its container: ExecSync fails
			k.preStopEnded(pod, r, c, h, failed)
		}()
	}
}

// preStopEnded ends the hook h of the pod's container c as its handler
// returned: its stops are ordered again from now and the pod synced. The
// failure's event is recorded with the pod's next status, or at once if
// the kubelet is done with the pod (it came too late for the stop).
func (k *Kubelet) preStopEnded(pod *corev1.Pod, r *podRuntime, c *container, h *hook, failed bool) {
	if k.hooks.ctx.Err() != nil {
		return // the kubelet stopped
	}
	k.mu.Lock()
	live := k.running[r.uid] == r && !r.deleted && c.preStop == h
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
		if failed {
			k.record(pod, node, podWork{version: version, events: []containerEvent{{c, preStopFailure}}})
		}
		return
	}
	k.requeueAt(pod.Namespace+"/"+pod.Name, time.Time{})
}

// preStopHandler is what runs the container's exec or httpGet preStop
// hook, reporting whether it failed; nil when the test registered nothing
// to run it.
func (k *Kubelet) preStopHandler(pod *corev1.Pod, r *podRuntime, c *container) func(context.Context) (failed bool) {
	key := pod.Namespace + "/" + pod.Name
	ps := c.spec.Lifecycle.PreStop
	if ps.Exec != nil {
		h, ok := handler(k.streams, k.streams.exec, key, c.spec.Name)
		if !ok {
			return nil
		}
		return func(ctx context.Context) bool { // its output is the hook's message, which only the kubelet's log shows
			return h(ctx, Exec{Command: ps.Exec.Command, Stdio: Stdio{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard}})&0xff != 0
		}
	}
	get := ps.HTTPGet
	port, err := hookPort(get.Port, c.spec)
	if err != nil {
		return func(context.Context) bool { return true }
	}
	if get.Host == "" && !k.streams.serves(key, port) {
		return nil // nothing registered at the pod's own port
	}
	host := cmpOr(get.Host, r.ip)
	return func(ctx context.Context) bool {
		fellBack, err := k.httpHook(ctx, get, host, port)
		if fellBack && err == nil {
			k.mu.Lock()
			r.podEvents = append(r.podEvents, event{corev1.EventTypeWarning, "LifecycleHTTPFallback",
				fmt.Sprintf("request to HTTPS lifecycle hook %s got HTTP response, retry with HTTP succeeded", net.JoinHostPort(host, strconv.Itoa(int(port))))})
			k.mu.Unlock()
		}
		return err != nil
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
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
