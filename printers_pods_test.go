package apiserver_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// kubectl get pods prints READY, STATUS and RESTARTS as kube-apiserver
// v1.37's printPod: init containers first (Init:N/M, Init:<reason>,
// Init:ExitCode:N), sidecars counted, the first container's reason, a
// completed container beside a running one, deletion, and when the last
// restart was.
func TestPrintersPodStatus(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	waiting := func(reason string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
	}
	exited := func(code int32, reason string) corev1.ContainerState {
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}}
	}
	ready := []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	for _, tc := range []struct {
		name, status, ready string
		init, main          []corev1.ContainerStatus
		conditions          []corev1.PodCondition
	}{
		{name: "init-0", status: "Init:0/2", ready: "0/2",
			init: []corev1.ContainerStatus{{Name: "i0", State: running}, {Name: "i1", State: waiting("PodInitializing")}}},
		{name: "init-backoff", status: "Init:CrashLoopBackOff", ready: "0/2",
			init: []corev1.ContainerStatus{{Name: "i0", State: exited(0, "Completed")}, {Name: "i1", State: waiting("CrashLoopBackOff")}}},
		{name: "init-exit", status: "Init:ExitCode:3", ready: "0/2",
			init: []corev1.ContainerStatus{{Name: "i0", State: exited(3, "")}, {Name: "i1", State: waiting("PodInitializing")}}},
		{name: "first-wins", status: "ImagePullBackOff", ready: "0/2",
			init: initDone, main: []corev1.ContainerStatus{{Name: "a", State: waiting("ImagePullBackOff")}, {Name: "b", State: waiting("ContainerCreating")}}},
		{name: "completed-running", status: "Running", ready: "1/2", conditions: ready,
			init: initDone, main: []corev1.ContainerStatus{{Name: "a", State: exited(0, "Completed")}, {Name: "b", State: running, Ready: true}}},
		{name: "completed-not-ready", status: "NotReady", ready: "1/2",
			init: initDone, main: []corev1.ContainerStatus{{Name: "a", State: exited(0, "Completed")}, {Name: "b", State: running, Ready: true}}},
		{name: "exit-code", status: "ExitCode:2", ready: "0/2",
			init: initDone, main: []corev1.ContainerStatus{{Name: "a", State: exited(2, "")}, {Name: "b", State: running}}},
	} {
		pod := printedPod(t, c, tc.name, tc.init, tc.main, tc.conditions)
		row := tableCells(t, c, "/api/v1/namespaces/default/pods/"+pod.Name)[0]
		assert.Equal(t, tc.status, row["Status"], tc.name)
		assert.Equal(t, tc.ready, row["Ready"], tc.name)
	}
}

// initDone are the init containers of printedPod's pods, done.
var initDone = []corev1.ContainerStatus{
	{Name: "i0", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}},
	{Name: "i1", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}},
}

// printedPod creates a pod of init containers i0 and i1 and containers a
// and b, with the statuses given.
func printedPod(t *testing.T, c kubernetes.Interface, name string, init, main []corev1.ContainerStatus, conds []corev1.PodCondition) *corev1.Pod {
	t.Helper()
	spec := corev1.PodSpec{}
	for _, n := range []string{"i0", "i1"} {
		spec.InitContainers = append(spec.InitContainers, corev1.Container{Name: n, Image: "busybox"})
	}
	for _, n := range []string{"a", "b"} {
		spec.Containers = append(spec.Containers, corev1.Container{Name: n, Image: "nginx"})
	}
	pod, err := c.CoreV1().Pods("default").Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
	require.NoError(t, err)
	pod.Status.Phase = corev1.PodPending
	pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses = init, main
	pod.Status.Conditions = append(pod.Status.Conditions, conds...)
	pod, err = c.CoreV1().Pods("default").UpdateStatus(t.Context(), pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	return pod
}

// READY counts a started sidecar; RESTARTS says when the last restart
// was; IP is the first of podIPs.
func TestPrintersPodSidecarsAndRestarts(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	pod, err := c.CoreV1().Pods("default").Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "proxy", Image: "envoy", RestartPolicy: ptr(corev1.ContainerRestartPolicyAlways)}},
		Containers:     []corev1.Container{{Name: "app", Image: "nginx"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	ago := metav1.NewTime(time.Now().Add(-10*time.Hour - 30*time.Minute)) // "10h" for half an hour either way
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7", PodIPs: []corev1.PodIP{{IP: "10.0.0.7"}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		InitContainerStatuses: []corev1.ContainerStatus{{Name: "proxy", Started: ptr(true), Ready: true, RestartCount: 1,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, RestartCount: 2, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: ago}}}}}
	_, err = c.CoreV1().Pods("default").UpdateStatus(t.Context(), pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	row := tableCells(t, c, "/api/v1/namespaces/default/pods/p")[0]
	assert.Equal(t, "2/2", row["Ready"])
	assert.Equal(t, "Running", row["Status"])
	assert.Equal(t, "3 (10h ago)", row["Restarts"])
	assert.Equal(t, "10.0.0.7", row["IP"])
}

// A gated pod is SchedulingGated; a pod being deleted is Terminating
// unless its phase is over; a finished pod's row is marked Completed.
func TestPrintersPodGatedAndDeleted(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	ctx := t.Context()
	_, err := c.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gated"}, Spec: corev1.PodSpec{
		SchedulingGates: []corev1.PodSchedulingGate{{Name: "example.com/gate"}}, Containers: []corev1.Container{{Name: "a", Image: "nginx"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "SchedulingGated", tableCell(t, c, "/api/v1/namespaces/default/pods/gated", "Status"))

	for _, phase := range []corev1.PodPhase{corev1.PodRunning, corev1.PodSucceeded} {
		name := "kept-" + strings.ToLower(string(phase))
		pod, err := c.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{"example.com/keep"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "nginx"}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		pod.Status.Phase = phase
		_, err = c.CoreV1().Pods("default").UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		require.NoError(t, err)
		require.NoError(t, c.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}))
	}
	assert.Equal(t, "Terminating", tableCell(t, c, "/api/v1/namespaces/default/pods/kept-running", "Status"))
	assert.Equal(t, "Succeeded", tableCell(t, c, "/api/v1/namespaces/default/pods/kept-succeeded", "Status"))
	assert.Equal(t, []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: "Succeeded",
		Message: "The pod has completed successfully."}}, table(t, c, "/api/v1/namespaces/default/pods/kept-succeeded").Rows[0].Conditions)
	assert.Empty(t, table(t, c, "/api/v1/namespaces/default/pods/kept-running").Rows[0].Conditions)
}
