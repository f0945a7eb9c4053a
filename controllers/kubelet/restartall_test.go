package kubelet_test

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/controllers/kubelet"
)

const removedNote = "The container is removed because RestartAllContainers in place"

// restartsAllOn gives the container restartPolicy Never and a rule that
// restarts the whole pod when it exits with code.
func restartsAllOn(c *corev1.Container, code int32) {
	c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
	c.RestartPolicyRules = []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{code}}}}
}

// inPlacePod has an init container setup (it runs a minute), a sidecar
// proxy, and regular containers app and worker; worker's exit with 42
// restarts the pod in place.
func inPlacePod(e env, name string) *corev1.Pod {
	e.k.AddRule(kubelet.Rule{Namespace: "default", Container: "setup", Exit: &kubelet.Exit{Code: 0, After: time.Minute}})
	pod := simplePod(name, "app", "worker")
	pod.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox:1"},
		{Name: "proxy", Image: "envoy:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}
	restartsAllOn(&pod.Spec.Containers[1], 42)
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"drain"}}}}
	return pod
}

func waitingReason(p *corev1.Pod, container string) string {
	if w := status(p, container).State.Waiting; w != nil {
		return w.Reason
	}
	return ""
}

// A container's exit that its RestartAllContainers rule names restarts the
// whole pod in place, in the three statuses kubelet v1.37 writes: the
// exit with AllContainersRestarting True; the containers removed
// (RestartingAllContainers, a terminated one keeping its IDs); the pod run
// again from its init container, Pending meanwhile, in the same sandbox.
func TestRestartAllContainersInPlace(t *testing.T) {
	t.Parallel()
	e := start(t)
	var preStops atomic.Int32
	e.k.HandleExec("default", "in-place", "app", func(context.Context, kubelet.Exec) int { preStops.Add(1); return 0 })
	p := e.waitPod(t, e.createPod(t, inPlacePod(e, "in-place")), func(p *corev1.Pod) bool { return status(p, "setup").State.Running != nil })
	e.clock.Step(time.Minute)
	p = e.waitPod(t, p, ready)
	assert.Equal(t, corev1.PodCondition{Type: corev1.AllContainersRestarting, Status: corev1.ConditionFalse,
		LastTransitionTime: condition(p, corev1.AllContainersRestarting).LastTransitionTime}, condition(p, corev1.AllContainersRestarting))
	before := p

	require.NoError(t, e.k.Exit(t.Context(), "default", "in-place", "worker", 42))
	seen := e.waitPod(t, p, func(p *corev1.Pod) bool { return status(p, "worker").State.Terminated != nil })
	restarting := condition(seen, corev1.AllContainersRestarting)
	assert.Equal(t, corev1.ConditionTrue, restarting.Status)
	assert.Equal(t, "RestartAllContainersStarted", restarting.Reason)
	assert.Equal(t, "container exited with restart policy rule", restarting.Message)
	assert.Zero(t, restarting.ObservedGeneration, "its generator sets none")
	assert.NotNil(t, status(seen, "app").State.Running)
	assert.Equal(t, corev1.PodRunning, seen.Status.Phase)

	removed := e.waitPod(t, seen, func(p *corev1.Pod) bool { return waitingReason(p, "app") != "" })
	for _, name := range []string{"setup", "proxy", "app", "worker"} {
		s := status(removed, name)
		assert.Equal(t, &corev1.ContainerStateWaiting{Reason: "RestartingAllContainers", Message: removedNote}, s.State.Waiting, name)
		assert.Equal(t, &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "RestartingAllContainers", Message: removedNote},
			s.LastTerminationState.Terminated, name)
		assert.Equal(t, int32(1), s.RestartCount, name)
		assert.Equal(t, name == "setup", s.Ready, "%s: a completed init container's readiness stays", name)
	}
	// A terminated container's status is its last one's (its IDs); a
	// running one's is that of a container not in the runtime.
	assert.Equal(t, status(seen, "worker").ContainerID, status(removed, "worker").ContainerID)
	assert.Equal(t, status(seen, "setup").ContainerID, status(removed, "setup").ContainerID)
	assert.Empty(t, status(removed, "app").ContainerID)
	assert.Equal(t, "nginx:1.27", status(removed, "app").Image)
	assert.Equal(t, corev1.ConditionFalse, condition(removed, corev1.AllContainersRestarting).Status)
	assert.Empty(t, condition(removed, corev1.AllContainersRestarting).Reason)
	assert.Equal(t, corev1.PodRunning, removed.Status.Phase, "its stopped containers restart")

	again := e.waitPod(t, removed, func(p *corev1.Pod) bool { return status(p, "setup").State.Running != nil })
	assert.Equal(t, corev1.PodPending, again.Status.Phase, "a regular init container runs")
	assert.Equal(t, corev1.ConditionTrue, condition(again, corev1.PodInitialized).Status, "once initialized, a pod stays so")
	assert.Equal(t, "PodInitializing", waitingReason(again, "app"))
	assert.Equal(t, "RestartingAllContainers", status(again, "app").LastTerminationState.Terminated.Reason)
	e.clock.Step(time.Minute)
	after := e.waitPod(t, again, ready)
	assert.Equal(t, before.Status.PodIP, after.Status.PodIP, "the sandbox is kept")
	for _, name := range []string{"proxy", "app", "worker"} {
		s := status(after, name)
		assert.NotNil(t, s.State.Running, name)
		assert.NotEqual(t, status(before, name).ContainerID, s.ContainerID, name)
		assert.Equal(t, int32(1), s.RestartCount, name)
		assert.Equal(t, "RestartingAllContainers", s.LastTerminationState.Terminated.Reason, name)
	}
	assert.Equal(t, "Completed", status(after, "setup").State.Terminated.Reason)

	// The running containers were killed with no grace period (no preStop
	// hook), the regular ones first; the exited one was not.
	var order []int
	for _, field := range []string{"spec.containers{app}", "spec.initContainers{proxy}"} {
		for _, ev := range e.eventsOf(t, "default", "in-place", field, "Killing") {
			if ev.Reason == "Killing" {
				assert.Equal(t, "killing", ev.Message, field)
				rv, err := strconv.Atoi(ev.ResourceVersion)
				require.NoError(t, err)
				order = append(order, rv)
			}
		}
	}
	require.Len(t, order, 2)
	assert.Less(t, order[0], order[1], "app's Killing before proxy's")
	assert.Zero(t, preStops.Load())
	assert.NotContains(t, reasons(e.eventsOf(t, "default", "in-place", "spec.containers{worker}", "Started")), "Killing")
	// Its previous log is gone with the container.
	_, err := e.logs(t, "in-place", &corev1.PodLogOptions{Container: "app", Previous: true})
	assertStatus(t, err, http.StatusBadRequest, `previous terminated container "app" in pod "in-place" not found`)

	// Each restart in place counts one more.
	require.NoError(t, e.k.Exit(t.Context(), "default", "in-place", "worker", 42))
	e.waitPod(t, after, func(p *corev1.Pod) bool { return status(p, "setup").State.Running != nil })
	e.clock.Step(time.Minute)
	p = e.waitPod(t, after, func(p *corev1.Pod) bool { return ready(p) && status(p, "app").RestartCount == 2 })
	assert.Equal(t, int32(2), status(p, "setup").RestartCount)
}

// An exit no rule names is the container's own: restartPolicy Never ends
// it, and the pod runs on with the condition False.
func TestExitNoRuleNamesRestartsNothing(t *testing.T) {
	t.Parallel()
	e := start(t)
	pod := simplePod("one-exit", "app", "worker")
	restartsAllOn(&pod.Spec.Containers[1], 42)
	p := e.waitPod(t, e.createPod(t, pod), ready)
	require.NoError(t, e.k.Exit(t.Context(), "default", "one-exit", "worker", 1))
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return status(p, "worker").State.Terminated != nil })
	assert.Equal(t, corev1.ConditionFalse, condition(p, corev1.AllContainersRestarting).Status)
	require.NoError(t, e.srv.WaitIdle(t.Context()))
	p, err := e.client.CoreV1().Pods("default").Get(t.Context(), "one-exit", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(0), status(p, "app").RestartCount)
	assert.NotNil(t, status(p, "worker").State.Terminated)
	assert.Equal(t, corev1.PodRunning, p.Status.Phase)
}

// An init container's exit can restart the pod too: before the regular
// containers ever ran, they stay waiting as they were, and the pod is
// Pending throughout; with no back-off, each failure starts it again.
func TestInitContainerRestartsAll(t *testing.T) {
	t.Parallel()
	e := start(t)
	failing := e.k.AddRule(kubelet.Rule{Namespace: "default", Container: "migrate", Exit: &kubelet.Exit{Code: 3, After: time.Minute}})
	pod := simplePod("migrating")
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.InitContainers = []corev1.Container{{Name: "migrate", Image: "busybox:1"}}
	restartsAllOn(&pod.Spec.InitContainers[0], 3)
	p := e.waitPod(t, e.createPod(t, pod), func(p *corev1.Pod) bool { return status(p, "migrate").State.Running != nil })
	e.clock.Step(time.Minute)
	seen := e.waitPod(t, p, func(p *corev1.Pod) bool { return status(p, "migrate").State.Terminated != nil })
	assert.Equal(t, corev1.ConditionTrue, condition(seen, corev1.AllContainersRestarting).Status)
	assert.Equal(t, corev1.PodPending, seen.Status.Phase)
	removed := e.waitPod(t, seen, func(p *corev1.Pod) bool { return waitingReason(p, "migrate") == "RestartingAllContainers" })
	assert.Equal(t, corev1.PodPending, removed.Status.Phase)
	app := status(removed, "app")
	app.VolumeMounts = nil // the service account's
	assert.Equal(t, corev1.ContainerStatus{Name: "app", Image: "nginx:1.27", Started: ptr.To(false),
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}, app, "never ran: as it was")
	p = e.waitPod(t, removed, func(p *corev1.Pod) bool { return status(p, "migrate").State.Running != nil })
	assert.Equal(t, int32(1), status(p, "migrate").RestartCount, "at once: no back-off")
	assert.Equal(t, corev1.PodPending, p.Status.Phase)
	failing() // its next instance completes at once
	e.clock.Step(time.Minute)
	p = e.waitPod(t, p, ready)
	assert.Equal(t, int32(2), status(p, "migrate").RestartCount)
	assert.Equal(t, int32(0), status(p, "app").RestartCount)
}

// A container waiting out a back-off when the pod restarts in place keeps
// showing why until it starts, and starts with the others, at once,
// counting the restart then.
func TestBackingOffContainerRestartsWithThePod(t *testing.T) {
	t.Parallel()
	e := start(t)
	pod := simplePod("backing-off", "app", "worker")
	restartsAllOn(&pod.Spec.Containers[1], 42)
	p := e.waitPod(t, e.createPod(t, pod), ready)
	for i := range 2 {
		require.NoError(t, e.k.Exit(t.Context(), "default", "backing-off", "app", 1))
		p = e.waitPod(t, p, func(p *corev1.Pod) bool {
			return status(p, "app").RestartCount == int32(i+1) || waitingReason(p, "app") == "CrashLoopBackOff"
		})
	}
	require.Equal(t, "CrashLoopBackOff", waitingReason(p, "app"))
	require.Equal(t, int32(1), status(p, "app").RestartCount)
	last := status(p, "app").LastTerminationState.Terminated

	require.NoError(t, e.k.Exit(t.Context(), "default", "backing-off", "worker", 42))
	removed := e.waitPod(t, p, func(p *corev1.Pod) bool { return waitingReason(p, "worker") == "RestartingAllContainers" })
	assert.Equal(t, "CrashLoopBackOff", waitingReason(removed, "app"))
	assert.Equal(t, int32(1), status(removed, "app").RestartCount)
	assert.Equal(t, last, status(removed, "app").LastTerminationState.Terminated)
	p = e.waitPod(t, removed, ready)
	assert.Equal(t, int32(2), status(p, "app").RestartCount)
	assert.Equal(t, last, status(p, "app").LastTerminationState.Terminated)
	assert.Equal(t, int32(1), status(p, "worker").RestartCount)
}

// A container a liveness probe kills, restarted at once by its own policy,
// is never seen exited: its exit code, though a RestartAllContainers rule
// names it, restarts it alone (the kubelet kills and starts it in one
// sync).
func TestProbeKillRestartsItsContainerAlone(t *testing.T) {
	t.Parallel()
	e := start(t)
	pod := simplePod("probed", "app", "worker")
	restartsAllOn(&pod.Spec.Containers[1], 143) // the default code of a kill
	pod.Spec.Containers[1].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	pod.Spec.Containers[1].LivenessProbe = &corev1.Probe{InitialDelaySeconds: 5, PeriodSeconds: 10, FailureThreshold: 1,
		ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	p := e.waitPod(t, e.createPod(t, pod), ready)
	require.NoError(t, e.k.SetLive(t.Context(), "default", "probed", "worker", false))
	e.clock.Step(5 * time.Second)
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return status(p, "worker").RestartCount == 1 })
	require.NoError(t, e.srv.WaitIdle(t.Context()))
	p, err := e.client.CoreV1().Pods("default").Get(t.Context(), "probed", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotNil(t, status(p, "worker").State.Running)
	assert.Equal(t, int32(143), status(p, "worker").LastTerminationState.Terminated.ExitCode)
	assert.Equal(t, int32(0), status(p, "app").RestartCount)
	assert.Equal(t, corev1.ConditionFalse, condition(p, corev1.AllContainersRestarting).Status)
}

// A pod whose containers end as they start restarts in place once a
// second (the runtime's relist), not in a loop at one instant.
func TestRestartInPlaceOncePerRelist(t *testing.T) {
	t.Parallel()
	e := start(t)
	pod := simplePod("looping")
	pod.Spec.InitContainers = []corev1.Container{{Name: "check", Image: "busybox:1"}} // completes at once
	restartsAllOn(&pod.Spec.InitContainers[0], 0)
	p := e.waitPod(t, e.createPod(t, pod), func(p *corev1.Pod) bool { return status(p, "check").RestartCount == 1 })
	require.NoError(t, e.srv.WaitIdle(t.Context()))
	p, err := e.client.CoreV1().Pods("default").Get(t.Context(), "looping", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(1), status(p, "check").RestartCount)
	assert.Equal(t, corev1.ConditionTrue, condition(p, corev1.AllContainersRestarting).Status, "seen, not yet acted on")
	e.clock.Step(time.Second)
	e.waitPod(t, p, func(p *corev1.Pod) bool { return status(p, "check").RestartCount == 2 })
}

// While a restart in place waits for the relist, the pod's sync does
// nothing else: a resize asked then is allocated once the pod restarted,
// and nothing loops meanwhile (WaitIdle returns).
func TestResizeWaitsForTheRestartInPlace(t *testing.T) {
	t.Parallel()
	e := start(t)
	pod := sizedPod("resized", "100m")
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "worker", Image: "nginx:1.27"})
	restartsAllOn(&pod.Spec.Containers[1], 42)
	p := e.runningPod(t, pod)
	require.NoError(t, e.k.Exit(t.Context(), "default", "resized", "worker", 42))
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return status(p, "worker").RestartCount == 1 && ready(p) })
	require.NoError(t, e.k.Exit(t.Context(), "default", "resized", "worker", 42)) // at the same instant: it waits a relist
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return status(p, "worker").State.Terminated != nil })
	e.resizeCPU(t, p, "500m")
	require.NoError(t, e.srv.WaitIdle(t.Context()))
	held, err := e.client.CoreV1().Pods("default").Get(t.Context(), "resized", metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, hasCondition(held, corev1.PodResizeInProgress))
	assert.Equal(t, "100m", cpu(status(held, "app").AllocatedResources))
	assert.Equal(t, corev1.ConditionTrue, condition(held, corev1.AllContainersRestarting).Status)

	e.clock.Step(time.Second)
	done := e.waitPod(t, held, func(p *corev1.Pod) bool {
		return status(p, "app").RestartCount == 2 && ready(p) && !hasCondition(p, corev1.PodResizeInProgress) &&
			status(p, "app").Resources != nil && status(p, "app").Resources.Requests.Cpu().String() == "500m"
	})
	assert.Equal(t, "500m", cpu(status(done, "app").AllocatedResources))
}

func cpu(l corev1.ResourceList) string { return l.Cpu().String() }
