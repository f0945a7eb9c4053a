package kubelet_test

import (
	"fmt"
	"strconv"
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

func intstrFrom(port int) intstr.IntOrString { return intstr.FromInt32(int32(port)) }

// A container that exits is restarted as the kubelet does: the first time
// at once, then after 10 s, 20 s... of back-off (CrashLoopBackOff), on the
// server's clock.
func TestCrashedContainerRestartsWithBackOff(t *testing.T) {
	t.Parallel()
	e := start(t)
	p := e.waitPod(t, e.createPod(t, simplePod("crash")), ready)
	first := status(p, "app").ContainerID

	require.NoError(t, e.k.Exit(t.Context(), "default", "crash", "app", 2))
	// The sync that sees the exit writes it (not ready) before the restart.
	crashed := e.waitPod(t, p, func(p *corev1.Pod) bool { return status(p, "app").State.Terminated != nil })
	assert.Equal(t, int32(2), status(crashed, "app").State.Terminated.ExitCode)
	assert.Equal(t, corev1.PodRunning, crashed.Status.Phase)
	assert.False(t, ready(crashed))
	p = e.waitPod(t, crashed, func(p *corev1.Pod) bool { return status(p, "app").RestartCount == 1 && ready(p) })
	s := status(p, "app")
	assert.NotEqual(t, first, s.ContainerID, "a new container")
	require.NotNil(t, s.LastTerminationState.Terminated)
	assert.Equal(t, int32(2), s.LastTerminationState.Terminated.ExitCode)
	assert.Equal(t, "Error", s.LastTerminationState.Terminated.Reason)
	assert.Equal(t, first, s.LastTerminationState.Terminated.ContainerID)

	require.NoError(t, e.k.Exit(t.Context(), "default", "crash", "app", 2))
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return status(p, "app").State.Waiting != nil })
	waiting := status(p, "app").State.Waiting
	assert.Equal(t, "CrashLoopBackOff", waiting.Reason)
	assert.Equal(t, "back-off 10s restarting failed container=app pod=crash_default("+string(p.UID)+")", waiting.Message)
	assert.Equal(t, corev1.PodRunning, p.Status.Phase, "Running: the container will restart")
	assert.Equal(t, "ContainersNotReady", condition(p, corev1.PodReady).Reason)
	e.events(t, "default", "crash", "BackOff")

	e.clock.Step(10 * time.Second)
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return status(p, "app").RestartCount == 2 && ready(p) })
	require.NoError(t, e.k.Exit(t.Context(), "default", "crash", "app", 2))
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return status(p, "app").State.Waiting != nil })
	assert.Contains(t, status(p, "app").State.Waiting.Message, "back-off 20s ", "doubled")
	// Up to the 5 minutes' cap, the message naming each wait in turn.
	for i, wait := range []time.Duration{20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 5 * time.Minute} {
		e.clock.Step(wait)
		restarts := int32(3 + i)
		p = e.waitPod(t, p, func(p *corev1.Pod) bool { return status(p, "app").RestartCount == restarts && ready(p) })
		require.NoError(t, e.k.Exit(t.Context(), "default", "crash", "app", 2))
		p = e.waitPod(t, p, func(p *corev1.Pod) bool { return status(p, "app").State.Waiting != nil })
		next := min(2*wait, 5*time.Minute)
		assert.Contains(t, status(p, "app").State.Waiting.Message, fmt.Sprintf("back-off %v ", next))
	}
}

// With restartPolicy Never or OnFailure, containers that end end the
// pod: Succeeded when all exited 0, Failed otherwise, with the kubelet's
// terminal conditions.
func TestPodsEndByRestartPolicy(t *testing.T) {
	t.Parallel()
	e := start(t)
	for _, tc := range []struct {
		name   string
		policy corev1.RestartPolicy
		code   int32
		phase  corev1.PodPhase
		reason string
	}{
		{"never-ok", corev1.RestartPolicyNever, 0, corev1.PodSucceeded, "PodCompleted"},
		{"never-fail", corev1.RestartPolicyNever, 3, corev1.PodFailed, "PodFailed"},
		{"onfailure-ok", corev1.RestartPolicyOnFailure, 0, corev1.PodSucceeded, "PodCompleted"},
	} {
		pod := simplePod(tc.name)
		pod.Spec.RestartPolicy = tc.policy
		p := e.waitPod(t, e.createPod(t, pod), ready)
		if tc.code == 0 {
			require.NoError(t, e.k.Complete(t.Context(), "default", tc.name))
		} else {
			require.NoError(t, e.k.Fail(t.Context(), "default", tc.name, tc.code))
		}
		p = e.waitPod(t, p, func(p *corev1.Pod) bool { return p.Status.Phase == tc.phase })
		assert.Equal(t, tc.code, status(p, "app").State.Terminated.ExitCode, tc.name)
		assert.Equal(t, tc.reason, condition(p, corev1.PodReady).Reason, tc.name)
		assert.Equal(t, tc.reason, condition(p, corev1.ContainersReady).Reason, tc.name)
		assert.Equal(t, "pod sandbox is not ready", condition(p, corev1.PodReadyToStartContainers).Message, tc.name)
	}
	assert.Error(t, e.k.Fail(t.Context(), "default", "never-ok", 0), "exit 0 is not a failure")
	assert.ErrorContains(t, e.k.Exit(t.Context(), "default", "never-ok", "app", 1), "no running container")
	assert.ErrorContains(t, e.k.Exit(t.Context(), "default", "nope", "app", 1), "not running on a simulated node")
}

// A rule decides how the containers of matching pods end, each instance:
// a Job's pods succeed a second after they start.
func TestRuleEndsMatchingPods(t *testing.T) {
	t.Parallel()
	e := start(t)
	remove := e.k.AddRule(kubelet.Rule{OwnerKind: "Job", Exit: &kubelet.Exit{Code: 0, After: time.Second}})
	e.k.AddRule(kubelet.Rule{Selector: labels.SelectorFromSet(labels.Set{"app": "flaky"}), Container: "app", Exit: &kubelet.Exit{Code: 1, After: time.Minute}})

	job := simplePod("job-pod")
	job.Spec.RestartPolicy = corev1.RestartPolicyNever
	job.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: "u", Controller: ptr.To(true)}}
	jp := e.waitPod(t, e.createPod(t, job), ready)
	other := e.waitPod(t, e.createPod(t, simplePod("other")), ready)
	flaky := simplePod("flaky")
	flaky.Labels = map[string]string{"app": "flaky"}
	fp := e.waitPod(t, e.createPod(t, flaky), ready)

	e.clock.Step(time.Second)
	jp = e.waitPod(t, jp, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	e.clock.Step(time.Minute)
	e.waitPod(t, fp, func(p *corev1.Pod) bool { return status(p, "app").RestartCount == 1 })
	remove()
	got, err := e.client.CoreV1().Pods("default").Get(t.Context(), "other", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, status(other, "app").ContainerID, status(got, "app").ContainerID, "no rule: runs on")
	assert.Equal(t, jp.Status.ContainerStatuses[0].State.Terminated.Reason, "Completed")
}

// Readiness: a readiness probe passes once its initialDelaySeconds are
// over; a test sets a container unready and ready again; readiness gates
// hold the pod's Ready condition.
func TestReadiness(t *testing.T) {
	t.Parallel()
	e := start(t)
	pod := simplePod("probed")
	pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{InitialDelaySeconds: 5,
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstrFrom(80)}}}
	p := e.waitPod(t, e.createPod(t, pod), running)
	assert.False(t, status(p, "app").Ready)
	e.clock.Step(5 * time.Second)
	p = e.waitPod(t, p, ready)

	require.NoError(t, e.k.SetReady(t.Context(), "default", "probed", "app", false))
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return !ready(p) })
	assert.Equal(t, "containers with unready status: [app]", condition(p, corev1.PodReady).Message)
	e.events(t, "default", "probed", "Unhealthy")
	require.NoError(t, e.k.SetReady(t.Context(), "default", "probed", "app", true))
	e.waitPod(t, p, ready)

	gated := simplePod("gated")
	gated.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}}
	g := e.waitPod(t, e.createPod(t, gated), func(p *corev1.Pod) bool {
		return condition(p, corev1.ContainersReady).Status == corev1.ConditionTrue
	})
	assert.Equal(t, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ReadinessGatesNotReady",
		Message: `corresponding condition of pod readiness gate "example.com/lb" does not exist.`, ObservedGeneration: 1,
		LastTransitionTime: condition(g, corev1.PodReady).LastTransitionTime}, condition(g, corev1.PodReady))
	g.Status.Conditions = append(g.Status.Conditions, corev1.PodCondition{Type: "example.com/lb", Status: corev1.ConditionTrue})
	g, err := e.client.CoreV1().Pods("default").UpdateStatus(t.Context(), g, metav1.UpdateOptions{})
	require.NoError(t, err)
	g = e.waitPod(t, g, ready)
	assert.Equal(t, corev1.PodConditionType("example.com/lb"), g.Status.Conditions[0].Type, "others' conditions first")
}

// A deleted pod's containers stop (Killing) with exit code 143, as ended by
// SIGTERM, or as a rule says; its final status is written, and the kubelet
// deletes it with grace period 0.
func TestDeletedPodStopsAndGoes(t *testing.T) {
	t.Parallel()
	e := start(t)
	p := e.waitPod(t, e.createPod(t, simplePod("doomed")), ready)
	require.NoError(t, e.client.CoreV1().Pods("default").Delete(t.Context(), "doomed", metav1.DeleteOptions{}))
	final := e.waitPod(t, p, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	assert.NotNil(t, final.DeletionTimestamp)
	assert.Equal(t, int32(143), status(final, "app").State.Terminated.ExitCode, "ended by SIGTERM")
	assert.Equal(t, "Error", status(final, "app").State.Terminated.Reason)
	e.waitGone(t, final)
	e.events(t, "default", "doomed", "Killing")

	remove := e.k.AddRule(kubelet.Rule{Selector: labels.SelectorFromSet(labels.Set{"graceful": "yes"}), StopExitCode: ptr.To[int32](0)})
	clean := simplePod("clean")
	clean.Labels = map[string]string{"graceful": "yes"}
	cp := e.waitPod(t, e.createPod(t, clean), ready)
	require.NoError(t, e.client.CoreV1().Pods("default").Delete(t.Context(), "clean", metav1.DeleteOptions{}))
	final = e.waitPod(t, cp, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	assert.Equal(t, "Completed", status(final, "app").State.Terminated.Reason, "exits cleanly on SIGTERM")
	remove()

	slow := simplePod("slow")
	slow.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	slow.Finalizers = []string{"example.com/hold"}
	e.k.AddRule(kubelet.Rule{Selector: labels.Everything(), Namespace: "default", StopAfter: time.Minute})
	sp := e.waitPod(t, e.createPod(t, slow), ready)
	require.NoError(t, e.client.CoreV1().Pods("default").Delete(t.Context(), "slow", metav1.DeleteOptions{}))
	sp = e.waitPod(t, sp, func(p *corev1.Pod) bool { return p.DeletionTimestamp != nil })
	e.events(t, "default", "slow", "Killing") // as the SIGTERM is sent
	apiservertest.WaitIdle(t, e.srv)
	got, err := e.client.CoreV1().Pods("default").Get(t.Context(), "slow", metav1.GetOptions{})
	require.NoError(t, err, "terminating until its containers stop")
	assert.NotNil(t, status(got, "app").State.Running)
	e.clock.Step(30 * time.Second) // the grace period is over before StopAfter: SIGKILL
	final = e.waitPod(t, sp, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	assert.Equal(t, int32(137), status(final, "app").State.Terminated.ExitCode, "killed at the end of the grace period")
	_, err = e.client.CoreV1().Pods("default").Patch(t.Context(), "slow", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
	require.NoError(t, err)
	e.waitGone(t, sp)
}

// The grace period a deleted pod's containers get is the deletion's, even
// longer than the pod's own; a second delete with a shorter one does not
// touch the kill under way (SyncTerminatingPod kills on a context of its
// own, TODO(#113606) in kubelet v1.37.2): the containers stop as the
// first one lets them.
func TestDeletionGracePeriod(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.k.AddRule(kubelet.Rule{Selector: labels.Everything(), Namespace: "default", StopAfter: 45 * time.Second})
	final := map[string]*corev1.Pod{}
	for _, name := range []string{"longer", "shortened"} {
		pod := simplePod(name)
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
		pod.Finalizers = []string{"example.com/hold"}
		p := e.waitPod(t, e.createPod(t, pod), ready)
		require.NoError(t, e.client.CoreV1().Pods("default").Delete(t.Context(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](60)}))
		final[name] = e.waitPod(t, p, func(p *corev1.Pod) bool { return p.DeletionTimestamp != nil })
	}
	apiservertest.WaitIdle(t, e.srv)
	require.NoError(t, e.client.CoreV1().Pods("default").Delete(t.Context(), "shortened", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](5)}))
	apiservertest.WaitIdle(t, e.srv)
	e.clock.Step(10 * time.Second)
	apiservertest.WaitIdle(t, e.srv)
	got, err := e.client.CoreV1().Pods("default").Get(t.Context(), "shortened", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotNil(t, status(got, "app").State.Running, "not killed past the shorter grace period")
	e.clock.Step(35 * time.Second)
	for _, name := range []string{"longer", "shortened"} {
		p := e.waitPod(t, final[name], func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
		assert.Equal(t, int32(143), status(p, "app").State.Terminated.ExitCode, name)
	}
}

// A pod deleted before its containers ran (an image that cannot be
// pulled) ends Failed before it goes, as the status manager's
// TerminatePod ends it: its containers terminated with
// ContainerStatusUnknown and 137 once it had initialized; before that, the
// first init container only.
func TestPodDeletedBeforeItsContainersRanEndsFailed(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.k.FailImagePulls("registry.example/missing:1", "")
	unknown := statusUnknown()
	for _, init := range []bool{false, true} {
		pod := simplePod(fmt.Sprintf("unpulled-%t", init))
		pod.Finalizers = []string{"example.com/hold"}
		if init {
			pod.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "registry.example/missing:1"}}
		} else {
			pod.Spec.Containers[0].Image = "registry.example/missing:1"
		}
		p := e.waitPod(t, e.createPod(t, pod), func(p *corev1.Pod) bool {
			for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
				if s.State.Waiting != nil && s.State.Waiting.Reason == "ErrImagePull" {
					return true
				}
			}
			return false
		})
		require.NoError(t, e.client.CoreV1().Pods("default").Delete(t.Context(), pod.Name, metav1.DeleteOptions{}))
		final := e.waitPod(t, p, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
		if init {
			assert.Equal(t, unknown, final.Status.InitContainerStatuses[0].State.Terminated)
			assert.Equal(t, "PodInitializing", status(final, "app").State.Waiting.Reason, "never initialized: left waiting")
		} else {
			assert.Equal(t, unknown, status(final, "app").State.Terminated)
		}
	}
}

// statusUnknown is the state the status manager's TerminatePod gives a
// container that never ended.
func statusUnknown() *corev1.ContainerStateTerminated {
	return &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "ContainerStatusUnknown",
		Message: "The container could not be located when the pod was terminated"}
}

// A pod whose image cannot be pulled fails at its deadline all the same,
// its container, which never ran, ended by TerminatePod; no pull is tried
// after.
func TestActiveDeadlineOfAPodThatNeverRan(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.k.FailImagePulls("registry.example/missing:1", "")
	pod := simplePod("unpulled")
	pod.Spec.Containers[0].Image = "registry.example/missing:1"
	pod.Spec.ActiveDeadlineSeconds = ptr.To[int64](30)
	p := e.waitPod(t, e.createPod(t, pod), func(p *corev1.Pod) bool {
		w := status(p, "app").State.Waiting
		return w != nil && w.Reason == "ErrImagePull"
	})
	e.clock.Step(30 * time.Second)
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	assert.Equal(t, "DeadlineExceeded", p.Status.Reason)
	assert.Equal(t, statusUnknown(), status(p, "app").State.Terminated)

	e.clock.Step(time.Hour)
	apiservertest.WaitIdle(t, e.srv)
	got, err := e.client.CoreV1().Pods("default").Get(t.Context(), "unpulled", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, p.Status, got.Status, "ended for good")
}

// A pod active longer than its activeDeadlineSeconds fails as the kubelet
// fails it: what runs is stopped (Killing) as on a deletion, with the
// pod's grace period, the pod written Running and not ready meanwhile
// (mergePodStatus holds a terminal phase while containers may run), then
// phase Failed with reason DeadlineExceeded, the containers terminated
// (143), the DeadlineExceeded event counted four times (twice before the
// kill), no restart after; a pod without the field, or one that finished
// before its deadline, is left as it is; a deadline lowered while the pod
// runs is read at once.
func TestActiveDeadline(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.k.AddRule(kubelet.Rule{Namespace: "default", Selector: labels.SelectorFromSet(labels.Set{"slow": "yes"}), StopAfter: 5 * time.Second})
	deadlined := simplePod("deadlined")
	deadlined.Labels = map[string]string{"slow": "yes"}
	deadlined.Spec.ActiveDeadlineSeconds = ptr.To[int64](60)
	p := e.waitPod(t, e.createPod(t, deadlined), ready)
	other := e.waitPod(t, e.createPod(t, simplePod("other")), ready)
	done := simplePod("done")
	done.Spec.RestartPolicy = corev1.RestartPolicyNever
	done.Spec.ActiveDeadlineSeconds = ptr.To[int64](60)
	d := e.waitPod(t, e.createPod(t, done), ready)
	require.NoError(t, e.k.Complete(t.Context(), "default", "done"))
	d = e.waitPod(t, d, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })

	e.clock.Step(59 * time.Second)
	apiservertest.WaitIdle(t, e.srv)
	got, err := e.client.CoreV1().Pods("default").Get(t.Context(), "deadlined", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.PodRunning, got.Status.Phase, "a second before its deadline")

	e.clock.Step(time.Second)
	passed := e.clock.Now().Truncate(time.Second)
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return condition(p, corev1.PodReady).Reason == "PodFailed" })
	assert.Equal(t, corev1.PodRunning, p.Status.Phase, "not over while its container stops")
	assert.Empty(t, p.Status.Reason)
	assert.NotNil(t, status(p, "app").State.Running)
	assert.Equal(t, corev1.ConditionTrue, condition(p, corev1.PodReadyToStartContainers).Status, "the sandbox runs")
	written := map[string]int{} // the order of the events' last writes
	for _, ev := range e.events(t, "default", "deadlined", "DeadlineExceeded", "Killing") {
		rv, err := strconv.Atoi(ev.ResourceVersion)
		require.NoError(t, err)
		written[ev.Reason] = rv
		if ev.Reason == "DeadlineExceeded" {
			assert.Equal(t, int32(2), ev.Count, "SyncPod's status and SyncTerminatingPod's before the kill")
			assert.Equal(t, corev1.EventTypeNormal, ev.Type)
		}
	}
	assert.Less(t, written["DeadlineExceeded"], written["Killing"], "recorded as the status is generated, before the kill")

	e.clock.Step(5 * time.Second)
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	assert.Equal(t, "DeadlineExceeded", p.Status.Reason)
	assert.Equal(t, "Pod was active on the node longer than the specified deadline", p.Status.Message)
	term := status(p, "app").State.Terminated
	require.NotNil(t, term, "killed")
	assert.Equal(t, int32(143), term.ExitCode)
	assert.Equal(t, 5*time.Second, term.FinishedAt.Sub(passed))
	assert.Equal(t, "PodFailed", condition(p, corev1.PodReady).Reason)
	assert.Equal(t, corev1.ConditionFalse, condition(p, corev1.PodReadyToStartContainers).Status)

	e.clock.Step(time.Hour)
	apiservertest.WaitIdle(t, e.srv)
	for _, ev := range e.events(t, "default", "deadlined", "DeadlineExceeded") {
		if ev.Reason == "DeadlineExceeded" {
			assert.Equal(t, int32(4), ev.Count, "once for each status the kubelet generates")
		}
	}
	for name, want := range map[string]*corev1.Pod{"deadlined": p, "other": other, "done": d} {
		got, err := e.client.CoreV1().Pods("default").Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, want.Status.Phase, got.Status.Phase, name)
		assert.Equal(t, want.Status.Reason, got.Status.Reason, name)
		assert.Equal(t, status(want, "app").ContainerID, status(got, "app").ContainerID, name+": not restarted")
	}

	lowered := e.waitPod(t, e.createPod(t, simplePod("lowered")), ready)
	lowered.Spec.ActiveDeadlineSeconds = ptr.To[int64](10)
	_, err = e.client.CoreV1().Pods("default").Update(t.Context(), lowered, metav1.UpdateOptions{})
	require.NoError(t, err)
	e.clock.Step(10 * time.Second)
	e.waitPod(t, lowered, func(p *corev1.Pod) bool { return p.Status.Reason == "DeadlineExceeded" })
}

// A container's own restartPolicy and restartPolicyRules decide its
// restart over the pod's (ContainerRestartRules, beta and on in v1.37):
// OnFailure in a pod of Never restarts a failure, a rule restarts the exit
// codes it names, Never in a pod of Always ends the container for good.
func TestContainerRestartPolicies(t *testing.T) {
	t.Parallel()
	e := start(t)
	pod := simplePod("mixed", "onfailure", "rules", "never")
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.Containers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyOnFailure)
	pod.Spec.Containers[1].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
	pod.Spec.Containers[1].RestartPolicyRules = []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestart,
		ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
	pod.Spec.Containers[2].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
	p := e.waitPod(t, e.createPod(t, pod), ready)
	require.NoError(t, e.k.Exit(t.Context(), "default", "mixed", "onfailure", 1))
	require.NoError(t, e.k.Exit(t.Context(), "default", "mixed", "rules", 42))
	p = e.waitPod(t, p, func(p *corev1.Pod) bool {
		return status(p, "onfailure").RestartCount == 1 && status(p, "rules").RestartCount == 1 && ready(p)
	})
	require.NoError(t, e.k.Exit(t.Context(), "default", "mixed", "rules", 3))
	require.NoError(t, e.k.Exit(t.Context(), "default", "mixed", "never", 0))
	p = e.waitPod(t, p, func(p *corev1.Pod) bool {
		return status(p, "rules").State.Terminated != nil && status(p, "never").State.Terminated != nil
	})
	assert.Equal(t, corev1.PodRunning, p.Status.Phase, "onfailure runs on")
	require.NoError(t, e.k.Exit(t.Context(), "default", "mixed", "onfailure", 0))
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	assert.Equal(t, int32(3), status(p, "rules").State.Terminated.ExitCode)

	// An init container's own OnFailure restarts it in a pod of Never.
	e.k.AddRule(kubelet.Rule{Namespace: "default", Container: "setup", Exit: &kubelet.Exit{Code: 1}})
	withInit := simplePod("init-retry")
	withInit.Spec.RestartPolicy = corev1.RestartPolicyNever
	withInit.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyOnFailure)}}
	e.waitPod(t, e.createPod(t, withInit), func(p *corev1.Pod) bool {
		return len(p.Status.InitContainerStatuses) == 1 && p.Status.InitContainerStatuses[0].RestartCount >= 1 && p.Status.Phase == corev1.PodPending
	})
}

// A pod past its active deadline while its init container runs has that
// container stopped too (143 as SIGTERM ends it, Killing), not left to
// its own end.
func TestPastDeadlineStopsARunningInitContainer(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.k.AddRule(kubelet.Rule{Namespace: "default", Container: "setup", Exit: &kubelet.Exit{Code: 0, After: time.Hour}})
	pod := simplePod("initializing")
	pod.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox:1"}}
	pod.Spec.ActiveDeadlineSeconds = ptr.To[int64](30)
	p := e.waitPod(t, e.createPod(t, pod), func(p *corev1.Pod) bool { return status(p, "setup").State.Running != nil })
	e.clock.Step(30 * time.Second)
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	assert.Equal(t, "DeadlineExceeded", p.Status.Reason)
	term := status(p, "setup").State.Terminated
	require.NotNil(t, term)
	assert.Equal(t, int32(143), term.ExitCode)
	assert.Nil(t, status(p, "app").State.Running, "never started")
	e.eventsOf(t, "default", "initializing", "spec.initContainers{setup}", "Killing")
}
