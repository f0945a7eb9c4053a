package kubelet_test

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/controllers/kubelet"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// withPreStop is simplePod with containers app (whose preStop hook is h)
// and web (none), a grace period of grace seconds, held by a finalizer so
// that its final status can be read.
func withPreStop(name string, grace int64, h corev1.LifecycleHandler) *corev1.Pod {
	pod := simplePod(name, "app", "web")
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &h}
	pod.Spec.TerminationGracePeriodSeconds = ptr.To(grace)
	pod.Finalizers = []string{"example.com/hold"}
	return pod
}

// deleteAndWait deletes the pod (with grace seconds, if not nil) and
// returns it Terminating and when the kubelet saw it deleted (the fake
// clock stands still until stepped).
func (e env) deleteAndWait(t *testing.T, p *corev1.Pod, grace *int64) (*corev1.Pod, time.Time) {
	t.Helper()
	deleted := e.clock.Now()
	require.NoError(t, e.client.CoreV1().Pods("default").Delete(t.Context(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: grace}))
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return p.DeletionTimestamp != nil })
	e.eventsOf(t, "default", p.Name, "spec.containers{app}", "Killing")
	return p, deleted.Truncate(time.Second)
}

// rv is the event's resourceVersion, the order of the writes.
func rv(t *testing.T, ev corev1.Event) int64 {
	t.Helper()
	n, err := strconv.ParseInt(ev.ResourceVersion, 10, 64)
	require.NoError(t, err)
	return n
}

// finished is how long after from the container's instance ended, and
// its exit code.
func finished(t *testing.T, p *corev1.Pod, container string, from time.Time) (time.Duration, int32) {
	t.Helper()
	term := status(p, container).State.Terminated
	require.NotNil(t, term, "%s of %s", container, p.Name)
	return term.FinishedAt.Sub(from), term.ExitCode
}

func failed(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed }

// A preStop sleep holds the container's SIGTERM back for its seconds, at
// most the grace period, which it uses up (the kubelet gives at least 2 s
// more): the pod's other container stops at once, both written terminated
// together once the last has stopped.
func TestPreStopSleep(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.k.AddRule(kubelet.Rule{Namespace: "default", Selector: labels.SelectorFromSet(labels.Set{"slow": "yes"}), StopAfter: 10 * time.Second})
	sleep := func(s int64) corev1.LifecycleHandler {
		return corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: s}}
	}
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		grace    *int64 // the deletion's
		app, web time.Duration
		code     int32
	}{
		{name: "sleeps", pod: withPreStop("sleeps", 30, sleep(5)), app: 5 * time.Second, code: 143},
		// Cut to the deletion's 4 s, then SIGTERM with 2 s left: the
		// process takes 10 s, so it is killed.
		{name: "capped", pod: withPreStop("capped", 30, sleep(20)), grace: ptr.To[int64](4), app: 6 * time.Second, web: 4 * time.Second, code: 137},
	} {
		if tc.name == "capped" {
			tc.pod.Labels = map[string]string{"slow": "yes"}
		}
		p := e.waitPod(t, e.createPod(t, tc.pod), ready)
		p, deleted := e.deleteAndWait(t, p, tc.grace)
		e.clock.Step(tc.app - time.Second)
		apiservertest.WaitIdle(t, e.srv)
		got, err := e.client.CoreV1().Pods("default").Get(t.Context(), tc.name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.NotNil(t, status(got, "app").State.Running, "%s: stopped before its hook's end", tc.name)
		e.clock.Step(time.Second)
		p = e.waitPod(t, p, failed)
		at, code := finished(t, p, "app", deleted)
		assert.Equal(t, tc.app, at, tc.name)
		assert.Equal(t, tc.code, code, tc.name)
		at, _ = finished(t, p, "web", deleted)
		assert.Equal(t, tc.web, at, "%s: web has no hook", tc.name)
	}
}

// An exec preStop hook runs the command through the test's exec handler:
// the SIGTERM waits for it (up to the grace period), and a non-zero exit
// is a FailedPreStopHook event; the stop goes on all the same.
func TestPreStopExec(t *testing.T) {
	t.Parallel()
	e := start(t)
	type call struct {
		pod     string
		command []string
	}
	calls := make(chan call, 2)
	release := map[string]chan struct{}{"drains": make(chan struct{}), "hangs": nil} // hangs: never released
	for name, ch := range release {
		e.k.HandleExec("default", name, "app", func(ctx context.Context, x kubelet.Exec) int {
			calls <- call{name, x.Command}
			select {
			case <-ch:
				return 1
			case <-ctx.Done(): // the server closes
				return 0
			}
		})
	}
	hook := corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "drain"}}}

	p, deleted := e.deleteAndWait(t, e.waitPod(t, e.createPod(t, withPreStop("drains", 30, hook)), ready), nil)
	assert.Equal(t, call{"drains", []string{"/bin/sh", "-c", "drain"}}, <-calls)
	e.clock.Step(5 * time.Second)
	apiservertest.WaitIdle(t, e.srv)
	got, err := e.client.CoreV1().Pods("default").Get(t.Context(), "drains", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotNil(t, status(got, "app").State.Running, "stopped while its preStop hook runs")
	close(release["drains"])
	p = e.waitPod(t, p, failed)
	at, code := finished(t, p, "app", deleted)
	assert.Equal(t, 5*time.Second, at, "SIGTERMed as its hook ended")
	assert.Equal(t, int32(143), code)
	events := e.eventsOf(t, "default", "drains", "spec.containers{app}", "Killing", "FailedPreStopHook")
	i := slices.IndexFunc(events, func(ev corev1.Event) bool { return ev.Reason == "FailedPreStopHook" })
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, corev1.EventTypeWarning, events[i].Type)
	assert.Equal(t, "PreStopHook failed", events[i].Message)

	// A hook still running at the end of the grace period: stopped then,
	// the command killed with its container (a failure).
	p, deleted = e.deleteAndWait(t, e.waitPod(t, e.createPod(t, withPreStop("hangs", 3, hook)), ready), nil)
	assert.Equal(t, "hangs", (<-calls).pod)
	e.clock.Step(3 * time.Second)
	p = e.waitPod(t, p, failed)
	at, code = finished(t, p, "app", deleted)
	assert.Equal(t, 3*time.Second, at)
	assert.Equal(t, int32(143), code)
	e.eventsOf(t, "default", "hangs", "spec.containers{app}", "FailedPreStopHook")
}

// Every container's preStop hook starts as the kill begins; a sidecar's
// SIGTERM then waits for the regular containers (and the sidecar after
// it) to stop, the hook's whole seconds and the wait both taken from its
// grace period: so on a deletion and on a pod past its active deadline.
// app: a 3 s hook, then 2 s to stop (Rule.StopAfter): ends at +5; proxy:
// a 6 s hook, past its turn (+5), then 2 s to stop: +8; logs (no hook),
// last: its turn at +8, 2 s of grace left: +10.
func TestPreStopOfSidecars(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.k.AddRule(kubelet.Rule{Namespace: "default", Selector: labels.Everything(), StopAfter: 2 * time.Second})
	for _, deadline := range []bool{false, true} {
		name := "deleted"
		if deadline {
			name = "deadline"
		}
		pod := withSidecars(name, "logs", "proxy")
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](10)
		sleep := func(s int64) *corev1.Lifecycle {
			return &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: s}}}
		}
		pod.Spec.Containers[0].Lifecycle, pod.Spec.InitContainers[1].Lifecycle = sleep(3), sleep(6)
		pod.Finalizers = []string{"example.com/hold"}
		var killed time.Time
		if deadline {
			pod.Spec.ActiveDeadlineSeconds = ptr.To[int64](30)
		}
		p := e.waitPod(t, e.createPod(t, pod), ready)
		if deadline {
			e.clock.Step(30 * time.Second)
			killed = p.Status.StartTime.Add(30 * time.Second)
			e.eventsOf(t, "default", name, "spec.containers{app}", "Killing")
		} else {
			p, killed = e.deleteAndWait(t, p, nil)
		}
		e.clock.Step(10 * time.Second)
		p = e.waitPod(t, p, failed)
		for c, want := range map[string]time.Duration{"app": 5 * time.Second, "proxy": 8 * time.Second, "logs": 10 * time.Second} {
			at, code := finished(t, p, c, killed)
			assert.Equal(t, want, at, "%s of %s", c, name)
			assert.Equal(t, int32(143), code, "%s of %s", c, name)
		}
	}
}

// An httpGet preStop hook is a GET to the pod's port as the kubelet sends
// it, reaching the test's handler; its status code is not read. An HTTPS
// hook a plain HTTP server answers is sent again over HTTP, with a
// LifecycleHTTPFallback event; a tcpSocket hook always fails (the kubelet
// has no such handler); a hook whose port the test serves nothing on
// succeeds, as probes do.
func TestPreStopHTTPGetAndTCPSocket(t *testing.T) {
	t.Parallel()
	e := start(t)
	var mu sync.Mutex
	got := map[string]*http.Request{}
	for _, name := range []string{"http", "https"} {
		e.k.HandleProxy("default", name, 8080, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got[name] = r
			mu.Unlock()
			w.WriteHeader(http.StatusInternalServerError)
		}))
	}
	get := func(scheme corev1.URIScheme, port intstr.IntOrString) corev1.LifecycleHandler {
		return corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/drain?now=1", Port: port, Scheme: scheme,
			HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Drain", Value: "yes"}, {Name: "Authorization", Value: "Bearer t"}}}}
	}
	for _, tc := range []struct {
		name   string
		hook   corev1.LifecycleHandler
		events []string // of the pod's app container, beside Killing
	}{
		{"http", get("", intstr.FromString("http")), nil},
		{"https", get(corev1.URISchemeHTTPS, intstr.FromInt32(8080)), []string{"LifecycleHTTPFallback"}},
		{"unserved", get("", intstr.FromInt32(9090)), nil},
		{"tcp", corev1.LifecycleHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}, []string{"FailedPreStopHook"}},
	} {
		pod := withPreStop(tc.name, 30, tc.hook)
		pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
		p, _ := e.deleteAndWait(t, e.waitPod(t, e.createPod(t, pod), ready), nil)
		p = e.waitPod(t, p, failed)
		_, err := e.client.CoreV1().Pods("default").Patch(t.Context(), tc.name, types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		require.NoError(t, err)
		e.waitGone(t, p)
		apiservertest.WaitIdle(t, e.srv)
		events := e.events(t, "default", tc.name, append([]string{"Killing"}, tc.events...)...)
		for _, r := range []string{"FailedPreStopHook", "LifecycleHTTPFallback"} {
			assert.Equal(t, slices.Contains(tc.events, r), slices.Contains(reasons(events), r), "%s: %s in %v", tc.name, r, reasons(events))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, name := range []string{"http", "https"} {
		r := got[name]
		require.NotNil(t, r, name)
		assert.Equal(t, "/drain?now=1", r.URL.RequestURI(), name)
		assert.Equal(t, "yes", r.Header.Get("X-Drain"), name)
		assert.Equal(t, "kube-lifecycle/1.37", r.Header.Get("User-Agent"), name)
		assert.Equal(t, "*/*", r.Header.Get("Accept"), name)
	}
	assert.Equal(t, "Bearer t", got["http"].Header.Get("Authorization"))
	assert.Empty(t, got["https"].Header.Get("Authorization"), "dropped as it falls back to HTTP")
}

// A postStart hook runs once its container has started (Created and
// Started are recorded), the kubelet's sync waiting for it: the container
// is reported waiting until it has run, and the next container starts
// only then; the first is then running since its start.
func TestPostStartSleep(t *testing.T) {
	t.Parallel()
	e := start(t)
	pod := simplePod("hooked", "app", "web")
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}
	started := e.clock.Now().Truncate(time.Second)
	p := e.createPod(t, pod)
	e.eventsOf(t, "default", "hooked", "spec.containers{app}", "Created", "Started")
	apiservertest.WaitIdle(t, e.srv)
	got, err := e.client.CoreV1().Pods("default").Get(t.Context(), "hooked", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.PodPending, got.Status.Phase)
	for _, c := range []string{"app", "web"} {
		require.NotNil(t, status(got, c).State.Waiting, c)
		assert.Equal(t, "ContainerCreating", status(got, c).State.Waiting.Reason, c)
	}
	events, err := e.client.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.fieldPath=spec.containers{web}"})
	require.NoError(t, err)
	assert.Empty(t, events.Items, "web started while app's hook ran")
	e.clock.Step(5 * time.Second)
	p = e.waitPod(t, p, ready)
	assert.Equal(t, started, status(p, "app").State.Running.StartedAt.Time, "app runs since it started")
	assert.Equal(t, started.Add(5*time.Second), status(p, "web").State.Running.StartedAt.Time, "web started once app's hook ran")
}

// A postStart hook that fails (the test's exec handler exits non-zero)
// kills its container (FailedPostStartHook, Killing; 143), which waits
// with PostStartHookError and the kubelet's message, then restarts as a
// crashed one does (at once, then after back-off); with restartPolicy
// Never the pod fails. A deletion waits for a hook that runs.
func TestPostStartFailsOrHoldsDeletion(t *testing.T) {
	t.Parallel()
	e := start(t)
	fail := func(_ context.Context, x kubelet.Exec) int {
		_, _ = io.WriteString(x.Stdout, "out")
		_, _ = io.WriteString(x.Stderr, "boom")
		return 2
	}
	var calls int
	third := make(chan struct{})
	e.k.HandleExec("default", "fails", "app", func(ctx context.Context, x kubelet.Exec) int {
		if calls++; calls == 3 { // the restart after the back-off: held until the test has looked
			select {
			case <-third:
			case <-ctx.Done():
			}
		}
		return fail(ctx, x)
	})
	e.k.HandleExec("default", "once", "app", fail)
	release := make(chan struct{})
	e.k.HandleExec("default", "slow", "app", func(ctx context.Context, _ kubelet.Exec) int {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return 0
	})
	hooked := func(name string) *corev1.Pod {
		pod := simplePod(name)
		pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{
			Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "register"}}}}
		return pod
	}

	p := e.createPod(t, hooked("fails"))
	want := fmt.Sprintf(`Exec lifecycle hook ([/bin/sh -c register]) for Container "app" in Pod "fails_default(%s)" failed - `+
		`error: command '/bin/sh -c register' exited with 2: boom, message: "outboom"`, p.UID)
	first := e.waitPod(t, p, func(p *corev1.Pod) bool {
		w := status(p, "app").State.Waiting
		return w != nil && w.Reason == "PostStartHookError"
	})
	assert.Equal(t, want, status(first, "app").State.Waiting.Message)
	assert.Equal(t, int32(143), status(first, "app").LastTerminationState.Terminated.ExitCode)
	assert.Equal(t, int32(0), status(first, "app").RestartCount)
	backOff := e.waitPod(t, first, func(p *corev1.Pod) bool {
		w := status(p, "app").State.Waiting
		return w != nil && w.Reason == "CrashLoopBackOff"
	})
	assert.Equal(t, int32(1), status(backOff, "app").RestartCount, "restarted at once, failed again")
	events := e.eventsOf(t, "default", "fails", "spec.containers{app}", "FailedPostStartHook", "Killing", "BackOff")
	slices.SortFunc(events, func(a, b corev1.Event) int { return cmp.Compare(rv(t, a), rv(t, b)) }) // as written
	assert.Equal(t, []string{"Pulled", "Created", "Started", "FailedPostStartHook", "Killing"}, reasons(events)[:5])
	for _, ev := range events {
		switch ev.Reason {
		case "FailedPostStartHook":
			assert.Equal(t, []string{corev1.EventTypeWarning, "PostStartHook failed"}, []string{ev.Type, ev.Message})
		case "Killing":
			assert.Equal(t, "FailedPostStartHook", ev.Message)
		}
	}
	// After the back-off the restart's hook runs: the status shows the
	// back-off's reason until it has run (the kubelet's sync waits).
	e.clock.Step(10 * time.Second)
	apiservertest.WaitIdle(t, e.srv)
	got, err := e.client.CoreV1().Pods("default").Get(t.Context(), "fails", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, status(got, "app").State.Waiting)
	assert.Equal(t, []any{"CrashLoopBackOff", int32(1)}, []any{status(got, "app").State.Waiting.Reason, status(got, "app").RestartCount})
	close(third)
	e.waitPod(t, got, func(p *corev1.Pod) bool {
		w := status(p, "app").State.Waiting
		return w != nil && w.Reason == "PostStartHookError" && status(p, "app").RestartCount == 2
	})

	never := hooked("once")
	never.Spec.RestartPolicy = corev1.RestartPolicyNever
	p = e.waitPod(t, e.createPod(t, never), failed)
	at, code := finished(t, p, "app", status(p, "app").State.Terminated.StartedAt.Time)
	assert.Equal(t, []any{time.Duration(0), int32(143), "Error"}, []any{at, code, status(p, "app").State.Terminated.Reason})

	slow := hooked("slow")
	slow.Finalizers = []string{"example.com/hold"}
	p = e.createPod(t, slow)
	e.eventsOf(t, "default", "slow", "spec.containers{app}", "Started")
	require.NoError(t, e.client.CoreV1().Pods("default").Delete(t.Context(), "slow", metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, e.srv)
	got, err = e.client.CoreV1().Pods("default").Get(t.Context(), "slow", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.PodPending, got.Status.Phase, "ended while its postStart hook runs")
	close(release)
	p = e.waitPod(t, p, failed)
	assert.Equal(t, int32(143), status(p, "app").State.Terminated.ExitCode)
	e.eventsOf(t, "default", "slow", "spec.containers{app}", "Killing")
}

// A postStart httpGet hook reaches the test's handler on the pod's port
// while its container starts (the process listens there), and the
// container is running once it has answered.
func TestPostStartHTTPGet(t *testing.T) {
	t.Parallel()
	e := start(t)
	got := make(chan string, 1)
	e.k.HandleProxy("default", "web", 8080, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.URL.Path + " " + r.Header.Get("User-Agent")
	}))
	pod := simplePod("web")
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{
		HTTPGet: &corev1.HTTPGetAction{Path: "/warm", Port: intstr.FromInt32(8080)}}}
	e.waitPod(t, e.createPod(t, pod), ready)
	assert.Equal(t, "/warm kube-lifecycle/1.37", <-got)
	events, err := e.client.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{FieldSelector: "reason=FailedPostStartHook"})
	require.NoError(t, err)
	assert.Empty(t, events.Items)
}

// A container restarted for a resize runs its postStart hook again: the
// pod is not taken as ended meanwhile, though the container's last
// instance exited 0 under restartPolicy OnFailure, and runs once the hook
// has run.
func TestPostStartAfterAResizeRestart(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.k.AddRule(kubelet.Rule{Namespace: "default", Selector: labels.Everything(), StopExitCode: ptr.To[int32](0)})
	pod := sizedPod("resized", "100m")
	pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	pod.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.RestartContainer}}
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}
	p := e.createPod(t, pod)
	e.eventsOf(t, "default", "resized", "spec.containers{app}", "Started")
	e.clock.Step(5 * time.Second)
	p = e.resizeCPU(t, e.waitPod(t, p, running), "200m")
	e.eventsOf(t, "default", "resized", "spec.containers{app}", "Killing")
	apiservertest.WaitIdle(t, e.srv)
	e.clock.Step(5 * time.Second)
	p = e.waitPod(t, p, func(p *corev1.Pod) bool {
		return status(p, "app").RestartCount == 1 && status(p, "app").State.Running != nil
	})
	assert.Equal(t, corev1.PodRunning, p.Status.Phase)
	// It goes on as any container: a crash restarts it (at once, then its
	// hook runs).
	require.NoError(t, e.k.Exit(t.Context(), "default", "resized", "app", 1))
	apiservertest.WaitIdle(t, e.srv)
	e.clock.Step(5 * time.Second)
	e.waitPod(t, p, func(p *corev1.Pod) bool {
		return status(p, "app").RestartCount == 2 && status(p, "app").State.Running != nil
	})
}
