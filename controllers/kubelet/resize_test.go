package kubelet_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sizedPod is a pod whose container app requests cpu and memory and is
// limited in memory (Burstable).
func sizedPod(name, cpu string) *corev1.Pod {
	p := simplePod(name)
	p.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}}
	return p
}

// resizeCPU asks for cpu for the pod's container app through pods/resize.
func (e env) resizeCPU(t *testing.T, p *corev1.Pod, cpu string) *corev1.Pod {
	t.Helper()
	p = p.DeepCopy()
	p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	p, err := e.client.CoreV1().Pods(p.Namespace).UpdateResize(t.Context(), p.Name, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	return p
}

func hasCondition(p *corev1.Pod, t corev1.PodConditionType) bool { return condition(p, t).Type == t }

// A resize the node has room for is allocated (PodResizeInProgress, the
// new requests allocated, the old ones still applied), then actuated
// (the condition gone, the new resources applied), with the kubelet's
// ResizeStarted and ResizeCompleted events; the container runs on.
func TestResizeInPlace(t *testing.T) {
	t.Parallel()
	e := start(t)
	p := e.runningPod(t, sizedPod("sized", "100m"))
	p = e.resizeCPU(t, p, "500m")
	require.Equal(t, int64(2), p.Generation)

	inProgress := e.waitPod(t, p, func(p *corev1.Pod) bool { return hasCondition(p, corev1.PodResizeInProgress) })
	c := condition(inProgress, corev1.PodResizeInProgress)
	assert.Equal(t, corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue, ObservedGeneration: 2,
		LastProbeTime: c.LastProbeTime, LastTransitionTime: c.LastTransitionTime}, c)
	s := status(inProgress, "app")
	assert.Equal(t, "500m", s.AllocatedResources.Cpu().String(), "allocated")
	assert.Equal(t, "100m", s.Resources.Requests.Cpu().String(), "not actuated yet")
	assert.Equal(t, int64(2), inProgress.Status.ObservedGeneration)

	done := e.waitPod(t, inProgress, func(p *corev1.Pod) bool { return !hasCondition(p, corev1.PodResizeInProgress) })
	s = status(done, "app")
	assert.Equal(t, "500m", s.Resources.Requests.Cpu().String(), "actuated")
	assert.Zero(t, s.RestartCount)
	assert.Equal(t, "500m", done.Status.AllocatedResources.Cpu().String(), "the pod's allocated requests")
	var messages []string
	for _, ev := range e.events(t, "default", "sized", "ResizeStarted", "ResizeCompleted") {
		if ev.Reason == "ResizeStarted" || ev.Reason == "ResizeCompleted" {
			assert.Empty(t, ev.InvolvedObject.FieldPath)
			messages = append(messages, ev.Message)
		}
	}
	want := `{"containers":[{"name":"app","resources":{"limits":{"memory":"128Mi"},"requests":{"cpu":"500m","memory":"64Mi"}}}],"generation":2}`
	assert.ElementsMatch(t, []string{"Pod resize started: " + want, "Pod resize completed: " + want}, messages)
}

// A resize whose resource has the policy RestartContainer restarts the
// container when it is actuated.
func TestResizeRestartsContainer(t *testing.T) {
	t.Parallel()
	e := start(t)
	pod := sizedPod("restarted", "100m")
	pod.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.RestartContainer}}
	p := e.resizeCPU(t, e.runningPod(t, pod), "200m")
	p = e.waitPod(t, p, func(p *corev1.Pod) bool {
		return status(p, "app").RestartCount == 1 && !hasCondition(p, corev1.PodResizeInProgress)
	})
	s := status(p, "app")
	require.NotNil(t, s.LastTerminationState.Terminated)
	assert.Equal(t, int32(143), s.LastTerminationState.Terminated.ExitCode, "stopped as the kubelet stops a container")
	assert.NotNil(t, s.State.Running)
	assert.Equal(t, "200m", s.Resources.Requests.Cpu().String())
	var killing []string
	for _, ev := range e.eventsOf(t, "default", "restarted", "spec.containers{app}", "Killing") {
		if ev.Reason == "Killing" {
			killing = append(killing, ev.Message)
		}
	}
	assert.Equal(t, []string{"Container app resize requires restart"}, killing)
}

// A resize the node has no room for yet is deferred, with the kubelet's
// message and event, and allocated once another pod of the node goes.
func TestResizeDeferredUntilRoom(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.runningPod(t, sizedPod("big", "3"))
	p := e.resizeCPU(t, e.runningPod(t, sizedPod("growing", "500m")), "2")

	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return hasCondition(p, corev1.PodResizePending) })
	c := condition(p, corev1.PodResizePending)
	assert.Equal(t, corev1.PodReasonDeferred, c.Reason)
	msg := "Node didn't have enough resource: cpu, requested: 2000, used: 3000, capacity: 4000"
	assert.Equal(t, msg, c.Message)
	assert.Equal(t, int64(2), c.ObservedGeneration)
	allocated := status(p, "app").AllocatedResources
	assert.Equal(t, "500m", allocated.Cpu().String(), "not allocated")
	for _, ev := range e.events(t, "default", "growing", "ResizeDeferred") {
		if ev.Reason == "ResizeDeferred" {
			assert.Equal(t, corev1.EventTypeWarning, ev.Type)
			assert.Equal(t, `Pod resize OutOfcpu: {"containers":[{"name":"app","resources":{"limits":{"memory":"128Mi"},"requests":{"cpu":"2","memory":"64Mi"}}}],"generation":2,"error":"`+msg+`"}`, ev.Message)
		}
	}

	require.NoError(t, e.client.CoreV1().Pods("default").Delete(t.Context(), "big", metav1.DeleteOptions{}))
	p = e.waitPod(t, p, func(p *corev1.Pod) bool {
		return !hasCondition(p, corev1.PodResizePending) && !hasCondition(p, corev1.PodResizeInProgress) && status(p, "app").Resources.Requests.Cpu().String() == "2"
	})
	allocated = status(p, "app").AllocatedResources
	assert.Equal(t, "2", allocated.Cpu().String())
}

// A resize asking more than the node's allocatable is refused by the API
// server (PodResizeValidator): 403, cause NodeCapacity; the pod is
// unchanged.
func TestResizeOverAllocatableRefused(t *testing.T) {
	t.Parallel()
	e := start(t)
	p := e.runningPod(t, sizedPod("huge", "100m"))
	p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("5")
	_, err := e.client.CoreV1().Pods("default").UpdateResize(t.Context(), "huge", p, metav1.UpdateOptions{})
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err), "%v", err)
	assert.Equal(t, `pods "huge" is forbidden: node didn't have enough allocatable resources: cpu, requested: 5000, allocatable: 4000`, err.Error())
	var status apierrors.APIStatus
	require.ErrorAs(t, err, &status)
	require.NotNil(t, status.Status().Details)
	assert.Equal(t, []metav1.StatusCause{{Type: "NodeCapacity"}}, status.Status().Details.Causes)
	got, err := e.client.CoreV1().Pods("default").Get(t.Context(), "huge", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int64(1), got.Generation)
}

// A resize of a container that is not running (crash-looping) has nothing
// to apply it to: started and completed in one sync, no condition
// written, the status shows what is allocated.
func TestResizeOfAContainerNotRunning(t *testing.T) {
	t.Parallel()
	e := start(t)
	p := e.runningPod(t, sizedPod("crashing", "100m"))
	require.NoError(t, e.k.Exit(t.Context(), "default", "crashing", "app", 1)) // restarted at once
	p = e.waitPod(t, p, func(p *corev1.Pod) bool {
		return status(p, "app").RestartCount == 1 && status(p, "app").State.Running != nil
	})
	require.NoError(t, e.k.Exit(t.Context(), "default", "crashing", "app", 1)) // a back-off the fake clock never ends
	p = e.waitPod(t, p, func(p *corev1.Pod) bool {
		w := status(p, "app").State.Waiting
		return w != nil && w.Reason == "CrashLoopBackOff"
	})
	p = e.resizeCPU(t, p, "300m")
	var reasons []string
	for _, ev := range e.events(t, "default", "crashing", "ResizeStarted", "ResizeCompleted") {
		if ev.Reason == "ResizeStarted" || ev.Reason == "ResizeCompleted" {
			reasons = append(reasons, ev.Reason)
		}
	}
	assert.ElementsMatch(t, []string{"ResizeStarted", "ResizeCompleted"}, reasons)
	var inProgress bool
	e.waitPod(t, p, func(p *corev1.Pod) bool { // every version from the resize on
		inProgress = inProgress || hasCondition(p, corev1.PodResizeInProgress)
		return status(p, "app").Resources.Requests.Cpu().String() == "300m"
	})
	assert.False(t, inProgress, "no version said PodResizeInProgress")
}

// podLevelPod is a pod whose pod-level resources request cpu and memory
// and limit memory (Burstable); its container app sets none.
func podLevelPod(name, cpu string) *corev1.Pod {
	p := simplePod(name)
	p.Spec.Resources = &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}}
	return p
}

// resize changes the pod through pods/resize.
func (e env) resize(t *testing.T, p *corev1.Pod, change func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	p = p.DeepCopy()
	change(p)
	p, err := e.client.CoreV1().Pods(p.Namespace).UpdateResize(t.Context(), p.Name, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	return p
}

// A pod-level resize is allocated (PodResizeInProgress, the pod's
// allocated requests changed, its cgroup's not yet: status.resources),
// then actuated (status.resources changed), with the kubelet's events,
// whose JSON names the containers' resources only.
func TestPodLevelResizeInPlace(t *testing.T) {
	t.Parallel()
	e := start(t)
	p := e.runningPod(t, podLevelPod("pod-level", "200m"))
	require.Equal(t, "200m", p.Status.Resources.Requests.Cpu().String())
	p = e.resize(t, p, func(p *corev1.Pod) { p.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("500m") })
	require.Equal(t, int64(2), p.Generation)

	inProgress := e.waitPod(t, p, func(p *corev1.Pod) bool { return hasCondition(p, corev1.PodResizeInProgress) })
	c := condition(inProgress, corev1.PodResizeInProgress)
	assert.Equal(t, corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue, ObservedGeneration: 2,
		LastProbeTime: c.LastProbeTime, LastTransitionTime: c.LastTransitionTime}, c)
	assert.Equal(t, "500m", inProgress.Status.AllocatedResources.Cpu().String(), "allocated")
	assert.Equal(t, "200m", inProgress.Status.Resources.Requests.Cpu().String(), "not actuated yet")
	assert.Equal(t, "64Mi", inProgress.Status.Resources.Requests.Memory().String())
	assert.Equal(t, "128Mi", inProgress.Status.Resources.Limits.Memory().String())

	done := e.waitPod(t, inProgress, func(p *corev1.Pod) bool { return !hasCondition(p, corev1.PodResizeInProgress) })
	assert.Equal(t, "500m", done.Status.Resources.Requests.Cpu().String(), "actuated")
	assert.Equal(t, "500m", done.Status.AllocatedResources.Cpu().String())
	assert.Zero(t, status(done, "app").RestartCount)
	var messages []string
	for _, ev := range e.events(t, "default", "pod-level", "ResizeStarted", "ResizeCompleted") {
		if ev.Reason == "ResizeStarted" || ev.Reason == "ResizeCompleted" {
			assert.Equal(t, corev1.EventTypeNormal, ev.Type)
			messages = append(messages, ev.Message)
		}
	}
	want := `{"containers":[{"name":"app","resources":{}}],"generation":2}`
	assert.ElementsMatch(t, []string{"Pod resize started: " + want, "Pod resize completed: " + want}, messages)
}

// A pod-level resize the node has no room for yet is deferred, its
// pod-level requests counted as the node's admission counts them, and
// allocated once another pod of the node goes.
func TestPodLevelResizeDeferredUntilRoom(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.runningPod(t, sizedPod("big", "3"))
	p := e.runningPod(t, podLevelPod("growing", "500m"))
	p = e.resize(t, p, func(p *corev1.Pod) { p.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2") })

	p = e.waitPod(t, p, func(p *corev1.Pod) bool { return hasCondition(p, corev1.PodResizePending) })
	c := condition(p, corev1.PodResizePending)
	msg := "Node didn't have enough resource: cpu, requested: 2000, used: 3000, capacity: 4000"
	assert.Equal(t, corev1.PodReasonDeferred, c.Reason)
	assert.Equal(t, msg, c.Message)
	assert.Equal(t, int64(2), c.ObservedGeneration)
	assert.Equal(t, "500m", p.Status.AllocatedResources.Cpu().String(), "not allocated")
	assert.False(t, hasCondition(p, corev1.PodResizeInProgress))
	var deferred []string
	for _, ev := range e.events(t, "default", "growing", "ResizeDeferred") {
		if ev.Reason == "ResizeDeferred" {
			assert.Equal(t, corev1.EventTypeWarning, ev.Type)
			deferred = append(deferred, ev.Message)
		}
	}
	assert.Equal(t, []string{`Pod resize OutOfcpu: {"containers":[{"name":"app","resources":{}}],"generation":2,"error":"` + msg + `"}`}, deferred)

	require.NoError(t, e.client.CoreV1().Pods("default").Delete(t.Context(), "big", metav1.DeleteOptions{}))
	p = e.waitPod(t, p, func(p *corev1.Pod) bool {
		return !hasCondition(p, corev1.PodResizePending) && !hasCondition(p, corev1.PodResizeInProgress) && p.Status.Resources.Requests.Cpu().String() == "2"
	})
	assert.Equal(t, "2", p.Status.AllocatedResources.Cpu().String())
}

// A pod-level limit stands for the limit of a container that sets none:
// resizing it restarts that container where its resize policy says
// RestartContainer, not one with a limit of its own.
func TestPodLevelResizeRestartsInheritingContainer(t *testing.T) {
	t.Parallel()
	e := start(t)
	pod := simplePod("inherits", "inherits", "own")
	restart := []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.RestartContainer}}
	pod.Spec.Containers[0].ResizePolicy = restart
	pod.Spec.Containers[1].ResizePolicy = restart
	pod.Spec.Containers[1].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
	pod.Spec.Resources = &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("128Mi")}}
	p := e.runningPod(t, pod)
	p = e.resize(t, p, func(p *corev1.Pod) { p.Spec.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("2") })

	p = e.waitPod(t, p, func(p *corev1.Pod) bool {
		return status(p, "inherits").RestartCount == 1 && status(p, "inherits").State.Running != nil && !hasCondition(p, corev1.PodResizeInProgress)
	})
	assert.Equal(t, "2", p.Status.Resources.Limits.Cpu().String(), "actuated")
	assert.Zero(t, status(p, "own").RestartCount)
	var killing []string
	for _, ev := range e.events(t, "default", "inherits", "Killing", "ResizeCompleted") {
		if ev.Reason == "Killing" {
			killing = append(killing, ev.InvolvedObject.FieldPath+": "+ev.Message)
		}
	}
	assert.Equal(t, []string{"spec.containers{inherits}: Container inherits resize requires restart"}, killing)
}

// Pod-level resources added by a resize to a pod whose cgroup was given
// none are no resize in progress for the kubelet (no pod-level resources
// actuated to differ from, no container's limit changed): started and
// completed in one sync, no condition written, applied at once.
func TestPodLevelResourcesAddedAtResize(t *testing.T) {
	t.Parallel()
	e := start(t)
	p := e.runningPod(t, sizedPod("added", "100m"))
	p = e.resize(t, p, func(p *corev1.Pod) {
		p.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}
	})
	var reasons []string
	for _, ev := range e.events(t, "default", "added", "ResizeStarted", "ResizeCompleted") {
		if ev.Reason == "ResizeStarted" || ev.Reason == "ResizeCompleted" {
			reasons = append(reasons, ev.Reason)
		}
	}
	assert.ElementsMatch(t, []string{"ResizeStarted", "ResizeCompleted"}, reasons)
	var inProgress bool
	p = e.waitPod(t, p, func(p *corev1.Pod) bool { // every version from the resize on
		inProgress = inProgress || hasCondition(p, corev1.PodResizeInProgress)
		return p.Status.Resources != nil && p.Status.Resources.Requests.Cpu().String() == "500m"
	})
	assert.False(t, inProgress, "no version said PodResizeInProgress")
	assert.Equal(t, "500m", p.Status.AllocatedResources.Cpu().String())
	assert.Equal(t, "100m", status(p, "app").Resources.Requests.Cpu().String(), "the container's own request")
}
