package kubelet_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/controllers/kubelet"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// A pod bound to a simulated node is first reported Pending, its
// containers being created, then Running and Ready with the IP of its
// sandbox, as a kubelet v1.37 reports it.
func TestPodStartsAsAKubeletReportsIt(t *testing.T) {
	t.Parallel()
	e := start(t)
	created := e.createPod(t, simplePod("web", "nginx", "sidecar"))

	pending := e.waitPod(t, created, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodPending && p.Status.HostIP != "" })
	assert.Empty(t, pending.Status.PodIP, "no sandbox yet")
	assert.Equal(t, corev1.ContainerStateWaiting{Reason: "ContainerCreating"}, *status(pending, "nginx").State.Waiting)
	assert.Equal(t, "nginx:1.27", status(pending, "nginx").Image, "the spec's image until the runtime knows it")
	ignoreTimes := cmpopts.IgnoreFields(corev1.PodCondition{}, "LastTransitionTime")
	assert.Empty(t, cmp.Diff([]corev1.PodCondition{
		{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse, Reason: "PodSandboxNotReady", Message: "no pod sandbox exists", ObservedGeneration: 1},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, ObservedGeneration: 1},
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [nginx sidecar]", ObservedGeneration: 1},
		{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [nginx sidecar]", ObservedGeneration: 1},
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, ObservedGeneration: 1},
	}, pending.Status.Conditions, ignoreTimes))

	p := e.waitPod(t, pending, ready)
	assert.Equal(t, corev1.PodRunning, p.Status.Phase)
	assert.True(t, netip.MustParsePrefix("10.244.0.0/24").Contains(netip.MustParseAddr(p.Status.PodIP)), p.Status.PodIP)
	assert.Equal(t, []corev1.PodIP{{IP: p.Status.PodIP}}, p.Status.PodIPs)
	assert.Equal(t, "172.18.0.2", p.Status.HostIP)
	assert.Equal(t, corev1.PodQOSBestEffort, p.Status.QOSClass)
	assert.NotNil(t, p.Status.StartTime)
	s := status(p, "nginx")
	assert.Equal(t, "docker.io/library/nginx:1.27", s.Image)
	assert.Regexp(t, `^docker\.io/library/nginx@sha256:[0-9a-f]{64}$`, s.ImageID)
	assert.Regexp(t, `^containerd://[0-9a-f]{64}$`, s.ContainerID)
	assert.True(t, s.Ready)
	assert.Equal(t, ptr.To(true), s.Started)
	assert.NotNil(t, s.State.Running)
	assert.Equal(t, []string{"nginx", "sidecar"}, []string{p.Status.ContainerStatuses[0].Name, p.Status.ContainerStatuses[1].Name})
	for _, c := range p.Status.Conditions {
		assert.Equal(t, corev1.ConditionTrue, c.Status, c.Type)
	}
	assert.Equal(t, "kubelet", statusManager(p), "the kubelet's field manager")
}

// The kubelet records the image manager's and runtime's events for each
// container, as the kubelet of the pod's node.
func TestPodEvents(t *testing.T) {
	t.Parallel()
	e := start(t)
	pod := simplePod("web")
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "latest", Image: "busybox"}) // pulled: Always
	e.waitPod(t, e.createPod(t, pod), ready)
	events := e.events(t, "default", "web", "Pulled", "Pulling", "Created", "Started")
	byMessage := map[string]corev1.Event{}
	for _, ev := range events {
		byMessage[ev.Reason+": "+ev.Message] = ev
	}
	present, ok := byMessage[`Pulled: Container image "nginx:1.27" already present on machine and can be accessed by the pod`]
	require.True(t, ok, "events: %v", byMessage)
	assert.Equal(t, "spec.containers{app}", present.InvolvedObject.FieldPath)
	assert.Equal(t, corev1.EventSource{Component: "kubelet", Host: "node-0"}, present.Source)
	assert.Equal(t, "kubelet", present.ReportingController)
	assert.Equal(t, "node-0", present.ReportingInstance)
	assert.Contains(t, byMessage, `Pulling: Pulling image "busybox"`)
	assert.Contains(t, byMessage, "Created: Container created")
	assert.Contains(t, byMessage, "Started: Container started")
}

// Init containers run to completion in order, then the others start; a
// sidecar (restartPolicy Always) keeps running beside them.
func TestInitContainersRunInOrder(t *testing.T) {
	t.Parallel()
	e := start(t)
	pod := simplePod("init")
	pod.Spec.InitContainers = []corev1.Container{{Name: "migrate", Image: "busybox:1"}, {Name: "proxy", Image: "envoy:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
		{Name: "seed", Image: "busybox:1"}}
	pending := e.waitPod(t, e.createPod(t, pod), func(p *corev1.Pod) bool { return p.Status.HostIP != "" })
	assert.Equal(t, "PodInitializing", status(pending, "app").State.Waiting.Reason)
	assert.Equal(t, "ContainersNotInitialized", condition(pending, corev1.PodInitialized).Reason)
	assert.Equal(t, "containers with incomplete status: [migrate proxy seed]", condition(pending, corev1.PodInitialized).Message)

	p := e.waitPod(t, pending, ready)
	for _, name := range []string{"migrate", "seed"} {
		s := status(p, name)
		require.NotNil(t, s.State.Terminated, name)
		assert.Equal(t, "Completed", s.State.Terminated.Reason)
		assert.True(t, s.Ready, "a completed init container is ready")
	}
	assert.NotNil(t, status(p, "proxy").State.Running)
	assert.Equal(t, []string{"migrate", "proxy", "seed"}, names(p.Status.InitContainerStatuses), "in spec order")
	assert.Equal(t, corev1.ConditionTrue, condition(p, corev1.PodInitialized).Status)
}

// Pods get distinct addresses of their node's pod CIDR, reused once a
// pod is gone; a host network pod has its node's.
func TestPodIPs(t *testing.T) {
	t.Parallel()
	e := start(t, controllers.Nodes(2)...)
	seen := map[string]string{}
	for i, node := range []string{"node-0", "node-0", "node-1"} {
		pod := simplePod(podName(i))
		pod.Spec.NodeName = node
		p := e.waitPod(t, e.createPod(t, pod), ready)
		require.NotContains(t, seen, p.Status.PodIP)
		seen[p.Status.PodIP] = node
	}
	for ip, node := range seen {
		cidr := map[string]string{"node-0": "10.244.0.0/24", "node-1": "10.244.1.0/24"}[node]
		assert.True(t, netip.MustParsePrefix(cidr).Contains(netip.MustParseAddr(ip)), "%s of %s", ip, node)
	}
	host := simplePod("host")
	host.Spec.HostNetwork = true
	first := e.waitPod(t, e.createPod(t, host), func(p *corev1.Pod) bool { return p.Status.StartTime != nil })
	assert.Equal(t, "172.18.0.2", first.Status.PodIP, "from the kubelet's first status")
	assert.Equal(t, "172.18.0.2", e.waitPod(t, first, ready).Status.PodIP)
}

// A pod bound to a node the kubelet does not simulate is left alone.
func TestPodOfAnotherNodeIsLeftAlone(t *testing.T) {
	t.Parallel()
	e := start(t)
	_, err := e.client.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "real"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	pod := simplePod("elsewhere")
	pod.Spec.NodeName = "real"
	e.createPod(t, pod)
	apiservertest.WaitIdle(t, e.srv)
	got, err := e.client.CoreV1().Pods("default").Get(t.Context(), "elsewhere", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, got.Status.Conditions)
	assert.Equal(t, corev1.PodPending, got.Status.Phase)
}

func podName(i int) string { return "pod-" + string(rune('a'+i)) }

func names(statuses []corev1.ContainerStatus) []string {
	var out []string
	for _, s := range statuses {
		out = append(out, s.Name)
	}
	return out
}

// statusManager is the field manager of the pod's status.
func statusManager(p *corev1.Pod) string {
	for _, m := range p.ManagedFields {
		if m.Subresource == "status" {
			return m.Manager
		}
	}
	return ""
}

// An ephemeral container (kubectl debug) added to a running pod is
// reported waiting, then runs, as the kubelet reports one: not ready, no
// started field, events of spec.ephemeralContainers{name}; its exit is
// not restarted and leaves the pod Ready.
func TestEphemeralContainerRuns(t *testing.T) {
	t.Parallel()
	e := start(t)
	p := e.runningPod(t, simplePod("debugged"))
	p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: "dbg", Image: "busybox:1.36", TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent}}}
	p, err := e.client.CoreV1().Pods("default").UpdateEphemeralContainers(t.Context(), "debugged", p, metav1.UpdateOptions{})
	require.NoError(t, err)

	waiting := e.waitPod(t, p, func(p *corev1.Pod) bool { return len(p.Status.EphemeralContainerStatuses) == 1 })
	assert.Equal(t, corev1.ContainerStatus{Name: "dbg", Image: "busybox:1.36",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}},
		waiting.Status.EphemeralContainerStatuses[0], "first reported as the kubelet read it, before it starts it")

	p = e.waitPod(t, waiting, dbgRunning)
	s := p.Status.EphemeralContainerStatuses[0]
	assert.Equal(t, "docker.io/library/busybox:1.36", s.Image)
	assert.Regexp(t, `^containerd://[0-9a-f]{64}$`, s.ContainerID)
	assert.Nil(t, s.Started, "the prober reports no ephemeral container")
	assert.False(t, s.Ready)
	assert.Equal(t, &corev1.ResourceRequirements{}, s.Resources)
	assert.True(t, ready(p), "an ephemeral container does not change the pod's readiness")
	var messages []string
	for _, ev := range e.eventsOf(t, "default", "debugged", "spec.ephemeralContainers{dbg}", "Pulled", "Created", "Started") {
		messages = append(messages, ev.Reason+": "+ev.Message)
	}
	assert.ElementsMatch(t, []string{`Pulled: Container image "busybox:1.36" already present on machine and can be accessed by the pod`,
		"Created: Container created", "Started: Container started"}, messages)

	require.NoError(t, e.k.Exit(t.Context(), "default", "debugged", "dbg", 1))
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return p.Status.EphemeralContainerStatuses[0].State.Terminated != nil })
	s = p.Status.EphemeralContainerStatuses[0]
	assert.Equal(t, int32(1), s.State.Terminated.ExitCode)
	assert.Equal(t, "Error", s.State.Terminated.Reason)
	assert.Zero(t, s.RestartCount, "never restarted, whatever the pod's restartPolicy")
	assert.True(t, ready(p))
	assert.Equal(t, corev1.PodRunning, p.Status.Phase)
}

// A read-only mount that asks for recursive read-only is reported
// enabled (the simulated runtime supports it), one that does not disabled;
// a writable one has no such field.
func TestVolumeMountStatus(t *testing.T) {
	t.Parallel()
	e := start(t)
	pod := simplePod("mounts")
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
		{Name: "data", MountPath: "/rro", ReadOnly: true, RecursiveReadOnly: ptr.To(corev1.RecursiveReadOnlyIfPossible)},
		{Name: "data", MountPath: "/ro", ReadOnly: true},
		{Name: "data", MountPath: "/rw"}}
	p := e.waitPod(t, e.createPod(t, pod), ready)
	var got []string
	for _, m := range status(p, "app").VolumeMounts {
		got = append(got, fmt.Sprintf("%s %v %s", m.MountPath, m.ReadOnly, ptr.Deref(m.RecursiveReadOnly, "-")))
	}
	assert.Equal(t, []string{"/rro true Enabled", "/ro true Disabled", "/rw false -",
		"/var/run/secrets/kubernetes.io/serviceaccount true Disabled"}, got)
}

// A container's status carries its spec's resources once the runtime has
// it (convertContainerStatusResources), none while it waits to be
// created.
func TestContainerStatusResources(t *testing.T) {
	t.Parallel()
	e := start(t)
	pod := simplePod("sized")
	requests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	limits := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: requests, Limits: limits}
	created := e.createPod(t, pod)
	pending := e.waitPod(t, created, func(p *corev1.Pod) bool { return len(p.Status.ContainerStatuses) == 1 })
	assert.Nil(t, pending.Status.ContainerStatuses[0].Resources)
	assert.Nil(t, pending.Status.ContainerStatuses[0].AllocatedResources)
	p := e.waitPod(t, pending, ready)
	s := status(p, "app")
	require.NotNil(t, s.Resources)
	assert.True(t, s.Resources.Requests.Cpu().Equal(resource.MustParse("100m")), "%v", s.Resources)
	assert.True(t, s.Resources.Limits.Memory().Equal(resource.MustParse("64Mi")), "%v", s.Resources)
	assert.True(t, s.AllocatedResources.Cpu().Equal(resource.MustParse("100m")), "%v", s.AllocatedResources)
	// The pod's: what its containers add up to.
	require.NotNil(t, p.Status.Resources)
	assert.Equal(t, "100m", p.Status.Resources.Requests.Cpu().String())
	assert.Equal(t, "64Mi", p.Status.Resources.Limits.Memory().String())
	_, cpuLimit := p.Status.Resources.Limits[corev1.ResourceCPU]
	assert.False(t, cpuLimit, "no container has a CPU limit")
}

// dbgRunning: the ephemeral container dbg runs.
func dbgRunning(p *corev1.Pod) bool { return status(p, "dbg").State.Running != nil }

// addDebugContainer adds the ephemeral container dbg to the pod.
func (e env) addDebugContainer(t *testing.T, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	p = p.DeepCopy()
	p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: "dbg", Image: "busybox:1.36", TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent}})
	p, err := e.client.CoreV1().Pods(p.Namespace).UpdateEphemeralContainers(t.Context(), p.Name, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	return p
}

// A pod whose containers are done stops what still runs in it, an
// ephemeral container too (killPod); an ephemeral container added to a
// finished pod is never reported, as a finished pod's worker takes no more
// updates.
func TestEphemeralContainerEndsWithThePod(t *testing.T) {
	t.Parallel()
	e := start(t)
	pod := simplePod("job")
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	p := e.addDebugContainer(t, e.runningPod(t, pod))
	p = e.waitPod(t, p, dbgRunning)
	require.NoError(t, e.k.Exit(t.Context(), "default", "job", "app", 0))
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	term := p.Status.EphemeralContainerStatuses[0].State.Terminated
	require.NotNil(t, term, "stopped with the pod: %+v", p.Status.EphemeralContainerStatuses[0].State)
	assert.Equal(t, int32(143), term.ExitCode, "ended by the kubelet's SIGTERM")
	e.eventsOf(t, "default", "job", "spec.ephemeralContainers{dbg}", "Killing")

	done := simplePod("done")
	done.Spec.RestartPolicy = corev1.RestartPolicyNever
	d := e.runningPod(t, done)
	require.NoError(t, e.k.Exit(t.Context(), "default", "done", "app", 0))
	d = e.waitPod(t, d, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	e.addDebugContainer(t, d)
	apiservertest.WaitIdle(t, e.srv)
	d, err := e.client.CoreV1().Pods("default").Get(t.Context(), "done", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, d.Status.EphemeralContainerStatuses)
}

// A test's rule for a pod's containers is for its regular ones: an
// ephemeral container added later runs on; it has no probes to set.
func TestRulesLeaveEphemeralContainersAlone(t *testing.T) {
	t.Parallel()
	e := start(t)
	p := e.runningPod(t, simplePod("p"))
	e.k.AddRule(kubelet.Rule{Namespace: "default", Exit: &kubelet.Exit{Code: 0}})
	p = e.addDebugContainer(t, p)
	p = e.waitPod(t, p, dbgRunning)
	apiservertest.WaitIdle(t, e.srv)
	p, err := e.client.CoreV1().Pods("default").Get(t.Context(), "p", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotNil(t, p.Status.EphemeralContainerStatuses[0].State.Running, "%+v", p.Status.EphemeralContainerStatuses[0].State)
	assert.ErrorContains(t, e.k.SetReady(t.Context(), "default", "p", "dbg", false), "ephemeral")
}

// A pod that ended keeps its containers stopped: a sidecar killed when
// the regular containers completed is not started again, however long
// the clock runs.
func TestFinishedPodStaysStopped(t *testing.T) {
	t.Parallel()
	e := start(t)
	pod := simplePod("job")
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.InitContainers = []corev1.Container{{Name: "proxy", Image: "envoy:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}
	p := e.runningPod(t, pod)
	require.NoError(t, e.k.Exit(t.Context(), "default", "job", "app", 0))
	p = e.waitPod(t, p, func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded && status(p, "proxy").State.Terminated != nil
	})
	assert.Equal(t, int32(143), status(p, "proxy").State.Terminated.ExitCode)
	apiservertest.StepClock(t, e.srv, e.clock, time.Minute)
	apiservertest.WaitIdle(t, e.srv)
	p, err := e.client.CoreV1().Pods("default").Get(t.Context(), "job", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Zero(t, status(p, "proxy").RestartCount)
	assert.NotNil(t, status(p, "proxy").State.Terminated)
}

// A finished pod's address goes back to the pool once: a pod that took it
// keeps it alone when the finished pod is deleted.
func TestFinishedPodReleasesItsIPOnce(t *testing.T) {
	t.Parallel()
	e := start(t)
	a := simplePod("a")
	a.Spec.RestartPolicy = corev1.RestartPolicyNever
	pa := e.runningPod(t, a)
	require.NoError(t, e.k.Exit(t.Context(), "default", "a", "app", 0))
	e.waitPod(t, pa, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	b := e.waitPod(t, e.createPod(t, simplePod("b")), ready)
	assert.Equal(t, pa.Status.PodIP, b.Status.PodIP, "a's address, released when it ended")
	require.NoError(t, e.client.CoreV1().Pods("default").Delete(t.Context(), "a", metav1.DeleteOptions{}))
	e.waitGone(t, pa)
	c := e.waitPod(t, e.createPod(t, simplePod("c")), ready)
	assert.NotEqual(t, b.Status.PodIP, c.Status.PodIP, "b still has it")
}
