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
