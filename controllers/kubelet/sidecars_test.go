package kubelet_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/controllers/kubelet"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// withSidecars is a pod whose init containers are the sidecars named
// (restartPolicy Always), in order, before its container app.
func withSidecars(name string, sidecars ...string) *corev1.Pod {
	pod := simplePod(name)
	for _, s := range sidecars {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: s, Image: "envoy:1",
			RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)})
	}
	return pod
}

// A sidecar that crashes is reported terminated, the pod not ready, before
// it is restarted as any container is (at once, then with back-off); the
// pod stays Running and initialized, and its regular container goes on
// meanwhile: it exits and restarts while the sidecar waits out its
// back-off (computeInitContainerActions holds nothing back once the pod
// has initialized).
func TestSidecarCrashRestarts(t *testing.T) {
	t.Parallel()
	e := start(t)
	p := e.waitPod(t, e.createPod(t, withSidecars("sidecar", "proxy")), ready)

	require.NoError(t, e.k.Exit(t.Context(), "default", "sidecar", "proxy", 1))
	crashed := e.waitPod(t, p, func(p *corev1.Pod) bool { return status(p, "proxy").State.Terminated != nil })
	assert.Equal(t, int32(1), status(crashed, "proxy").State.Terminated.ExitCode)
	assert.False(t, ready(crashed))
	assert.Equal(t, "containers with unready status: [proxy]", condition(crashed, corev1.ContainersReady).Message)
	assert.Equal(t, corev1.ConditionTrue, condition(crashed, corev1.PodInitialized).Status)
	assert.Equal(t, corev1.PodRunning, crashed.Status.Phase)
	p = e.waitPod(t, crashed, func(p *corev1.Pod) bool { return status(p, "proxy").RestartCount == 1 && ready(p) })

	require.NoError(t, e.k.Exit(t.Context(), "default", "sidecar", "proxy", 1))
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return status(p, "proxy").State.Waiting != nil })
	waiting := status(p, "proxy").State.Waiting
	assert.Equal(t, "CrashLoopBackOff", waiting.Reason)
	assert.Equal(t, "back-off 10s restarting failed container=proxy pod=sidecar_default("+string(p.UID)+")", waiting.Message)
	require.NoError(t, e.k.Exit(t.Context(), "default", "sidecar", "app", 2))
	p = e.waitPod(t, p, func(p *corev1.Pod) bool {
		return status(p, "app").RestartCount == 1 && status(p, "app").State.Running != nil
	})
	assert.NotNil(t, status(p, "proxy").State.Waiting, "still backing off")

	e.clock.Step(10 * time.Second)
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return status(p, "proxy").RestartCount == 2 && ready(p) })
	assert.Equal(t, corev1.ConditionTrue, condition(p, corev1.PodInitialized).Status)
}

// When a pod's regular containers have all ended for good, the kubelet
// writes it Running (its sidecars run), then stops the sidecars (Killing),
// the last first, each once the one after it has stopped, and writes the
// pod's status again once all have: it ends by its regular containers'
// exit codes.
func TestSidecarsStopAfterTheRegularContainers(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.k.AddRule(kubelet.Rule{Namespace: "default", StopAfter: 3 * time.Second})
	pod := withSidecars("job-like", "proxy", "logs")
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	p := e.waitPod(t, e.createPod(t, pod), ready)
	ended := e.clock.Now().Truncate(time.Second) // the clock stands still until stepped
	require.NoError(t, e.k.Complete(t.Context(), "default", "job-like"))
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return status(p, "app").State.Terminated != nil })
	assert.Equal(t, corev1.PodRunning, p.Status.Phase, "its sidecars run")
	assert.NotNil(t, status(p, "proxy").State.Running)
	assert.NotNil(t, status(p, "logs").State.Running)
	assert.Equal(t, "containers with unready status: [app]", condition(p, corev1.ContainersReady).Message)
	for _, c := range []string{"spec.initContainers{proxy}", "spec.initContainers{logs}"} {
		e.eventsOf(t, "default", "job-like", c, "Killing")
	}

	e.clock.Step(3 * time.Second)
	apiservertest.WaitIdle(t, e.srv)
	got, err := e.client.CoreV1().Pods("default").Get(t.Context(), "job-like", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, p.Status, got.Status, "nothing written while the kubelet waits for the sidecars")
	e.clock.Step(3 * time.Second)
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	for c, end := range map[string]time.Duration{"logs": 3 * time.Second, "proxy": 6 * time.Second} {
		term := status(p, c).State.Terminated
		require.NotNil(t, term, c)
		assert.Equal(t, int32(143), term.ExitCode, c)
		assert.Equal(t, end, term.FinishedAt.Sub(ended), "%s: the last stops first", c)
		assert.Zero(t, status(p, c).RestartCount, c)
	}
	assert.Equal(t, int32(0), status(p, "app").State.Terminated.ExitCode)
}

// A deleted pod's sidecars are stopped after its regular containers, the
// last first, each with what remains of the grace period, at least 2 s;
// past the grace period, every sidecar still waiting for its turn is
// SIGTERMed then and SIGKILLed 2 s later (waitForTurn waits up to the
// grace period). The pod's status is written once all have stopped.
func TestDeletedPodStopsItsSidecarsLast(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.k.AddRule(kubelet.Rule{Namespace: "default", Selector: labels.SelectorFromSet(labels.Set{"slow": "yes"}), StopAfter: 20 * time.Second})
	e.k.AddRule(kubelet.Rule{Namespace: "default", Selector: labels.SelectorFromSet(labels.Set{"slow": "no"}), StopAfter: 3 * time.Second})
	for _, tc := range []struct {
		slow string
		ends []time.Duration // app's, logs', proxy's, after the deletion
		code int32
	}{
		{"no", []time.Duration{3 * time.Second, 6 * time.Second, 9 * time.Second}, 143},
		{"yes", []time.Duration{10 * time.Second, 12 * time.Second, 12 * time.Second}, 137},
	} {
		pod := withSidecars("deleted-"+tc.slow, "proxy", "logs")
		pod.Labels = map[string]string{"slow": tc.slow}
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](10)
		p := e.waitPod(t, e.createPod(t, pod), ready)
		deleted := e.clock.Now().Truncate(time.Second) // the kubelet sees it now: the clock stands still until stepped
		require.NoError(t, e.client.CoreV1().Pods("default").Delete(t.Context(), pod.Name, metav1.DeleteOptions{}))
		p = e.waitPod(t, p, func(p *corev1.Pod) bool { return p.DeletionTimestamp != nil })
		e.events(t, "default", pod.Name, "Killing")
		e.clock.Step(tc.ends[2])
		p = e.waitPod(t, p, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
		for i, c := range []string{"app", "logs", "proxy"} {
			term := status(p, c).State.Terminated
			require.NotNil(t, term, "%s of %s", c, pod.Name)
			assert.Equal(t, tc.ends[i], term.FinishedAt.Sub(deleted), "%s of %s", c, pod.Name)
			assert.Equal(t, tc.code, term.ExitCode, "%s of %s", c, pod.Name)
		}
		e.waitGone(t, p)
	}
}

// A sidecar waiting out its back-off when the pod ends (its regular
// container completed) is written waiting, then ended by TerminatePod
// (ContainerStatusUnknown), its crash kept as its last termination.
func TestSidecarBackingOffWhenThePodEnds(t *testing.T) {
	t.Parallel()
	e := start(t)
	pod := withSidecars("ending", "proxy")
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	p := e.waitPod(t, e.createPod(t, pod), ready)
	for restarts := range int32(2) {
		p = e.waitPod(t, p, func(p *corev1.Pod) bool { return status(p, "proxy").RestartCount == restarts && ready(p) })
		require.NoError(t, e.k.Exit(t.Context(), "default", "ending", "proxy", 1))
	}
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return status(p, "proxy").State.Waiting != nil })
	require.NoError(t, e.k.Complete(t.Context(), "default", "ending"))
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	s := status(p, "proxy")
	assert.Equal(t, statusUnknown(), s.State.Terminated)
	require.NotNil(t, s.LastTerminationState.Terminated)
	assert.Equal(t, int32(1), s.LastTerminationState.Terminated.ExitCode)

	// Past the back-off, a sync (the pod's labels changed) writes the same.
	e.clock.Step(time.Minute)
	_, err := e.client.CoreV1().Pods("default").Patch(t.Context(), "ending", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"synced":"again"}}}`), metav1.PatchOptions{}) // the kubelet may write meanwhile
	require.NoError(t, err)
	apiservertest.WaitIdle(t, e.srv)
	got, err := e.client.CoreV1().Pods("default").Get(t.Context(), "ending", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, p.Status, got.Status)
}

// A pod once initialized stays so: its sidecar crashing before the
// regular container could start (its image cannot be pulled) leaves
// Initialized True.
func TestInitializedStaysTrue(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.k.FailImagePulls("registry.example/missing:1", "")
	pod := withSidecars("unpulled", "proxy")
	pod.Spec.Containers[0].Image = "registry.example/missing:1"
	p := e.waitPod(t, e.createPod(t, pod), func(p *corev1.Pod) bool {
		return condition(p, corev1.PodInitialized).Status == corev1.ConditionTrue
	})
	require.NoError(t, e.k.Exit(t.Context(), "default", "unpulled", "proxy", 1))
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return status(p, "proxy").State.Terminated != nil })
	assert.Equal(t, corev1.ConditionTrue, condition(p, corev1.PodInitialized).Status)
	assert.Equal(t, corev1.PodPending, p.Status.Phase)
}

// A pod past its active deadline has its sidecars stopped after its
// regular container, the last first, as a deleted pod's (with its grace
// period: past it, SIGKILL); it is written Failed once all have stopped.
func TestPastDeadlineStopsItsSidecarsLast(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.k.AddRule(kubelet.Rule{Namespace: "default", StopAfter: 20 * time.Second})
	pod := withSidecars("deadlined", "proxy", "logs")
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](10)
	pod.Spec.ActiveDeadlineSeconds = ptr.To[int64](30)
	p := e.waitPod(t, e.createPod(t, pod), ready)
	e.clock.Step(30 * time.Second)
	passed := e.clock.Now().Truncate(time.Second)
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return condition(p, corev1.PodReady).Reason == "PodFailed" })
	assert.Equal(t, corev1.PodRunning, p.Status.Phase)
	e.events(t, "default", "deadlined", "Killing")

	e.clock.Step(10 * time.Second)
	apiservertest.WaitIdle(t, e.srv)
	got, err := e.client.CoreV1().Pods("default").Get(t.Context(), "deadlined", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, p.Status, got.Status, "nothing written while the kubelet waits for the sidecars")
	e.clock.Step(2 * time.Second)
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	assert.Equal(t, "DeadlineExceeded", p.Status.Reason)
	for c, end := range map[string]time.Duration{"app": 10 * time.Second, "logs": 12 * time.Second, "proxy": 12 * time.Second} {
		term := status(p, c).State.Terminated
		require.NotNil(t, term, c)
		assert.Equal(t, int32(137), term.ExitCode, c)
		assert.Equal(t, end, term.FinishedAt.Sub(passed), c)
	}
}

// A pod whose init container failed for good (restartPolicy Never) has
// its sidecar stopped with its grace period; it stays Pending until the
// sidecar has stopped, then is written Failed.
func TestFailedInitStopsItsSidecars(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.k.AddRule(kubelet.Rule{Namespace: "default", StopAfter: 3 * time.Second})
	e.k.AddRule(kubelet.Rule{Namespace: "default", Container: "setup", Exit: &kubelet.Exit{Code: 1}})
	pod := withSidecars("init-failed", "proxy")
	pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: "setup", Image: "busybox:1"})
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	created := e.createPod(t, pod)
	p := e.waitPod(t, created, func(p *corev1.Pod) bool { return status(p, "setup").State.Terminated != nil })
	failed := status(p, "setup").State.Terminated.FinishedAt.Time
	assert.Equal(t, corev1.PodPending, p.Status.Phase, "not over while its sidecar stops")
	assert.NotNil(t, status(p, "proxy").State.Running)
	assert.Equal(t, "PodFailed", condition(p, corev1.ContainersReady).Reason)
	e.eventsOf(t, "default", "init-failed", "spec.initContainers{proxy}", "Killing")

	e.clock.Step(3 * time.Second)
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	term := status(p, "proxy").State.Terminated
	require.NotNil(t, term)
	assert.Equal(t, int32(143), term.ExitCode)
	assert.Equal(t, 3*time.Second, term.FinishedAt.Sub(failed))
	assert.Equal(t, int32(1), status(p, "setup").State.Terminated.ExitCode)
	assert.Nil(t, status(p, "app").State.Running, "never started")
}
