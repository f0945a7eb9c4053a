package kubelet_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeembed/apiserver/controllers/kubelet"
)

// A container's end carries the runtime's reason and the termination
// message the kubelet reads: what the process wrote (ExitWith), or, with
// FallbackToLogsOnError and a failure, the end of its log (80 lines, at
// most 2,048 bytes); nothing from the log for a success.
func TestTerminationReasonAndMessage(t *testing.T) {
	t.Parallel()
	e := start(t)
	newPod := func(name string, policy corev1.TerminationMessagePolicy) *corev1.Pod {
		p := simplePod(name)
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		p.Spec.Containers[0].TerminationMessagePolicy = policy
		return e.waitPod(t, e.createPod(t, p), ready)
	}
	ended := func(p *corev1.Pod) *corev1.ContainerStateTerminated {
		t.Helper()
		p = e.waitPod(t, p, func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
		})
		require.NotNil(t, status(p, "app").State.Terminated)
		return status(p, "app").State.Terminated
	}

	oom := newPod("oom", corev1.TerminationMessageReadFile)
	require.NoError(t, e.k.ExitWith(t.Context(), "default", "oom", "app", kubelet.Exit{Code: 137, Reason: "OOMKilled", Message: "out of memory"}))
	term := ended(oom)
	assert.Equal(t, "OOMKilled", term.Reason)
	assert.Equal(t, int32(137), term.ExitCode)
	assert.Equal(t, "out of memory", term.Message)

	var log strings.Builder
	for i := range 100 {
		fmt.Fprintf(&log, "line %03d of the log, padded to be long enough ...\n", i)
	}
	fallback := newPod("fallback", corev1.TerminationMessageFallbackToLogsOnError)
	e.k.SetLogs("default", "fallback", "app", log.String())
	require.NoError(t, e.k.Fail(t.Context(), "default", "fallback", 2))
	all := log.String()
	assert.Equal(t, all[len(all)-2048:], ended(fallback).Message, "the last 2,048 bytes of the last 80 lines")

	ok := newPod("ok", corev1.TerminationMessageFallbackToLogsOnError)
	e.k.SetLogs("default", "ok", "app", "fine\n")
	require.NoError(t, e.k.Complete(t.Context(), "default", "ok"))
	assert.Empty(t, ended(ok).Message, "a success does not read the log")

	short := newPod("short", corev1.TerminationMessageFallbackToLogsOnError)
	e.k.SetLogs("default", "short", "app", "panic: boom\n")
	require.NoError(t, e.k.Fail(t.Context(), "default", "short", 1))
	assert.Equal(t, "panic: boom\n", ended(short).Message)
}
