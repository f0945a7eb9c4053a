package kubelet_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// A liveness probe the test fails fails at each period once its initial
// delay is over; at its failure threshold the kubelet kills the container
// ("failed liveness probe, will be restarted") and restarts it; live again,
// the new instance runs on.
func TestLivenessProbeFailureRestarts(t *testing.T) {
	t.Parallel()
	e := start(t)
	pod := simplePod("live")
	pod.Spec.Containers[0].LivenessProbe = &corev1.Probe{InitialDelaySeconds: 5, PeriodSeconds: 10, FailureThreshold: 3,
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstrFrom(8080)}}}
	p := e.waitPod(t, e.createPod(t, pod), ready)
	first := status(p, "app").ContainerID
	require.NoError(t, e.k.SetLive(t.Context(), "default", "live", "app", false))

	for _, step := range []time.Duration{5 * time.Second, 10 * time.Second} { // two failures: not yet killed
		e.clock.Step(step)
		apiservertest.WaitIdle(t, e.srv)
	}
	got, err := e.client.CoreV1().Pods("default").Get(t.Context(), "live", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, first, status(got, "app").ContainerID, "two failures of three")
	require.NoError(t, e.k.SetLive(t.Context(), "default", "live", "app", true))
	require.NoError(t, e.k.SetLive(t.Context(), "default", "live", "app", false)) // the count starts again

	e.clock.Step(20 * time.Second) // three failures: at once (past the delay), +10 s, +20 s
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return status(p, "app").RestartCount == 1 })
	last := status(p, "app").LastTerminationState.Terminated
	require.NotNil(t, last)
	assert.Equal(t, first, last.ContainerID)
	assert.Equal(t, int32(143), last.ExitCode)
	events := e.eventsOf(t, "default", "live", "spec.containers{app}", "Unhealthy", "Killing")
	for _, ev := range events {
		switch ev.Reason {
		case "Unhealthy":
			assert.Equal(t, "Liveness probe failed: ", ev.Message)
			assert.Equal(t, corev1.EventTypeWarning, ev.Type)
		case "Killing":
			assert.Equal(t, "Container app failed liveness probe, will be restarted", ev.Message)
		}
	}

	require.NoError(t, e.k.SetLive(t.Context(), "default", "live", "app", true))
	e.clock.Step(time.Minute)
	apiservertest.WaitIdle(t, e.srv)
	got, err = e.client.CoreV1().Pods("default").Get(t.Context(), "live", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(1), status(got, "app").RestartCount, "live again: runs on")
	assert.ErrorContains(t, e.k.SetLive(t.Context(), "default", "live", "nope", false), "no container")
	plain := e.waitPod(t, e.createPod(t, simplePod("plain")), ready)
	assert.ErrorContains(t, e.k.SetLive(t.Context(), "default", plain.Name, "app", false), "has no liveness probe")
}

// A container killed again and again by its liveness probe is restarted
// at once as long as the instance before ended at least the back-off
// before (the kubelet restarts it in the sync that kills it, reading the
// back-off from the instance before): killed every 20 s, at once four
// times (the back-off 10 s, 20 s, 40 s from the second), then it waits:
// CrashLoopBackOff, "back-off 40s".
func TestRepeatedProbeKillsBackOffAsTheKubelet(t *testing.T) {
	t.Parallel()
	e := start(t)
	pod := simplePod("flaky")
	pod.Spec.Containers[0].LivenessProbe = &corev1.Probe{PeriodSeconds: 10, FailureThreshold: 3,
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstrFrom(8080)}}}
	e.waitPod(t, e.createPod(t, pod), ready)
	require.NoError(t, e.k.SetLive(t.Context(), "default", "flaky", "app", false))
	var got *corev1.Pod
	for range 10 { // 100 s: kills at 20, 40, 60, 80 and 100 s
		e.clock.Step(10 * time.Second)
		apiservertest.WaitIdle(t, e.srv)
		var err error
		got, err = e.client.CoreV1().Pods("default").Get(t.Context(), "flaky", metav1.GetOptions{})
		require.NoError(t, err)
		if w := status(got, "app").State.Waiting; w != nil {
			break
		}
	}
	s := status(got, "app")
	require.NotNil(t, s.State.Waiting, "a kill that waits")
	assert.Equal(t, int32(4), s.RestartCount, "four restarts at once first")
	assert.Equal(t, "CrashLoopBackOff", s.State.Waiting.Reason)
	assert.Contains(t, s.State.Waiting.Message, "back-off 40s ")
}

// A startup probe the test fails holds the container not started (nor
// ready) and kills it at its failure threshold ("failed startup probe,
// will be restarted"); passing again, the new instance is started.
func TestStartupProbeFailureRestarts(t *testing.T) {
	t.Parallel()
	e := start(t)
	pod := simplePod("slow")
	pod.Spec.Containers[0].StartupProbe = &corev1.Probe{InitialDelaySeconds: 10, PeriodSeconds: 5, FailureThreshold: 2,
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/started", Port: intstrFrom(8080)}}}
	p := e.waitPod(t, e.createPod(t, pod), running)
	require.NoError(t, e.k.SetStarted(t.Context(), "default", "slow", "app", false))
	e.clock.Step(10 * time.Second) // the delay over: the first failure, not started
	apiservertest.WaitIdle(t, e.srv)
	got, err := e.client.CoreV1().Pods("default").Get(t.Context(), "slow", metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, *status(got, "app").Started)
	assert.False(t, ready(got))
	assert.Zero(t, status(got, "app").RestartCount)

	e.clock.Step(5 * time.Second) // the second failure: killed, restarted
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return status(p, "app").RestartCount == 1 })
	assert.False(t, *status(p, "app").Started, "the new instance fails it too")
	events := e.eventsOf(t, "default", "slow", "spec.containers{app}", "Unhealthy", "Killing")
	for _, ev := range events {
		switch ev.Reason {
		case "Unhealthy":
			assert.Equal(t, "Startup probe failed: ", ev.Message)
		case "Killing":
			assert.Equal(t, "Container app failed startup probe, will be restarted", ev.Message)
		}
	}
	require.NoError(t, e.k.SetStarted(t.Context(), "default", "slow", "app", true))
	e.waitPod(t, p, ready)
	assert.ErrorContains(t, e.k.SetStarted(t.Context(), "default", "slow", "nope", true), "no container")
}

// A failing liveness probe is probed only once the container started:
// its first failure comes when the startup probe passes, not before.
func TestLivenessWaitsForStartup(t *testing.T) {
	t.Parallel()
	e := start(t)
	pod := simplePod("both")
	pod.Spec.Containers[0].StartupProbe = &corev1.Probe{InitialDelaySeconds: 30,
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/started", Port: intstrFrom(8080)}}}
	pod.Spec.Containers[0].LivenessProbe = &corev1.Probe{PeriodSeconds: 10, FailureThreshold: 3,
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstrFrom(8080)}}}
	p := e.waitPod(t, e.createPod(t, pod), running)
	require.NoError(t, e.k.SetLive(t.Context(), "default", "both", "app", false))
	e.clock.Step(30 * time.Second) // started: the first liveness failure only
	apiservertest.WaitIdle(t, e.srv)
	got, err := e.client.CoreV1().Pods("default").Get(t.Context(), "both", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Zero(t, status(got, "app").RestartCount, "one failure of three")
	e.clock.Step(20 * time.Second) // the third: killed 20 s after it started
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return status(p, "app").RestartCount == 1 })
	last := status(p, "app").LastTerminationState.Terminated
	require.NotNil(t, last)
	assert.Equal(t, last.StartedAt.Add(50*time.Second), last.FinishedAt.Time)
}
