package podgc_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// start starts a server running podgc (and serviceaccount, which gives
// namespace default the ServiceAccount pods need) on a fake clock, with no
// simulated node, and returns it with a client and the clock.
func start(t *testing.T) (*apiserver.Server, kubernetes.Interface, *clocktesting.FakeClock) {
	t.Helper()
	clock := clocktesting.NewFakeClock(time.Now())
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Clock: clock,
		Controllers: []controllers.Name{controllers.PodGC, controllers.ServiceAccount}, Nodes: []controllers.Node{}}))
	c, err := srv.Clientset()
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv) // the first pass
	return srv, c, clock
}

// pass steps the clock to podgc's next pass and waits for it; first it
// waits until the controller has seen the test's writes (a pass made
// before the informer showed them would not act on them).
func pass(t *testing.T, srv *apiserver.Server, clock *clocktesting.FakeClock) {
	t.Helper()
	apiservertest.WaitIdle(t, srv)
	clock.Step(20 * time.Second)
	apiservertest.WaitIdle(t, srv)
}

func createNode(t *testing.T, c kubernetes.Interface, node *corev1.Node) {
	t.Helper()
	_, err := c.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{})
	require.NoError(t, err)
}

// runPod creates a pod bound to node (none if empty), Running if bound.
func runPod(t *testing.T, c kubernetes.Interface, name, node string, finalizers ...string) *corev1.Pod {
	t.Helper()
	pods := c.CoreV1().Pods("default")
	p, err := pods.Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: finalizers},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	if node == "" {
		return p
	}
	require.NoError(t, pods.Bind(t.Context(), &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Target: corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{}))
	p, err = pods.Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	p.Status.Phase = corev1.PodRunning
	p, err = pods.UpdateStatus(t.Context(), p, metav1.UpdateOptions{})
	require.NoError(t, err)
	return p
}

func podExists(t *testing.T, c kubernetes.Interface, name string) bool {
	t.Helper()
	_, err := c.CoreV1().Pods("default").Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(t, err)
	return true
}

// The pods of a deleted node are kept for the 40 s quarantine (the node may
// only be late in the informer), then marked Failed with a DisruptionTarget
// condition (DeletionByPodGC) and deleted; pods of other nodes stay.
func TestOrphanedPodsDeletedAfterQuarantine(t *testing.T) {
	t.Parallel()
	srv, c, clock := start(t)
	createNode(t, c, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}})
	createNode(t, c, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}})
	orphan := runPod(t, c, "orphan", "node-a")
	runPod(t, c, "kept", "node-b")
	require.NoError(t, c.CoreV1().Nodes().Delete(t.Context(), "node-a", metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv)

	pass(t, srv, clock) // node-a found missing: quarantined for 40 s
	quarantined := clock.Now()
	pass(t, srv, clock)
	assert.True(t, podExists(t, c, "orphan"), "20 s into the quarantine")

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	w, err := c.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=orphan", ResourceVersion: orphan.ResourceVersion})
	require.NoError(t, err)
	defer w.Stop()
	pass(t, srv, clock) // the quarantine is over
	assert.False(t, podExists(t, c, "orphan"))
	assert.True(t, podExists(t, c, "kept"))

	var last *corev1.Pod
	for e := range w.ResultChan() {
		if e.Type == watch.Deleted {
			break
		}
		last = e.Object.(*corev1.Pod)
	}
	require.NotNil(t, last, "the pod was marked before its deletion")
	assert.Equal(t, corev1.PodFailed, last.Status.Phase)
	assert.Equal(t, orphan.Generation, last.Status.ObservedGeneration)
	want := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByPodGC",
		Message: "PodGC: node no longer exists", ObservedGeneration: orphan.Generation,
		LastTransitionTime: metav1.NewTime(quarantined.Add(40 * time.Second).Truncate(time.Second))}
	var got *corev1.PodCondition
	for i := range last.Status.Conditions {
		if last.Status.Conditions[i].Type == corev1.DisruptionTarget {
			got = &last.Status.Conditions[i]
		}
	}
	require.NotNil(t, got, "conditions: %v", last.Status.Conditions)
	assert.Empty(t, cmp.Diff(want, *got), "condition (-want +got)")
	assert.True(t, slices.ContainsFunc(last.ManagedFields, func(f metav1.ManagedFieldsEntry) bool {
		return f.Manager == "kube-controller-manager" && f.Operation == metav1.ManagedFieldsOperationUpdate && f.Subresource == "status"
	}), "the status written by kube-controller-manager: %v", last.ManagedFields)
}

// A terminating pod bound to no node is marked Failed and deleted with no
// grace period (here a finalizer keeps it, to be seen).
func TestUnscheduledTerminatingPod(t *testing.T) {
	t.Parallel()
	srv, c, clock := start(t)
	runPod(t, c, "held", "", "example.com/hold")
	t.Cleanup(func() {
		_, _ = c.CoreV1().Pods("default").Patch(context.Background(), "held", types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	require.NoError(t, c.CoreV1().Pods("default").Delete(t.Context(), "held", metav1.DeleteOptions{}))
	pass(t, srv, clock)

	p, err := c.CoreV1().Pods("default").Get(t.Context(), "held", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.PodFailed, p.Status.Phase)
	for _, cond := range p.Status.Conditions {
		assert.NotEqual(t, corev1.DisruptionTarget, cond.Type, "only orphans get the condition")
	}
	require.NotNil(t, p.DeletionGracePeriodSeconds)
	assert.EqualValues(t, 0, *p.DeletionGracePeriodSeconds)
}

// A terminating pod of a node that is not Ready and tainted out-of-service
// is force-deleted; one of a node only not Ready waits for its kubelet.
func TestTerminatingPodsOfOutOfServiceNode(t *testing.T) {
	t.Parallel()
	srv, c, clock := start(t)
	outOfService := corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}
	for name, taints := range map[string][]corev1.Taint{"out": {outOfService}, "down": nil} {
		createNode(t, c, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Taints: taints}})
		node, err := c.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
		_, err = c.CoreV1().Nodes().UpdateStatus(t.Context(), node, metav1.UpdateOptions{})
		require.NoError(t, err)
		runPod(t, c, "on-"+name, name)
		runPod(t, c, "running-on-"+name, name)
		require.NoError(t, c.CoreV1().Pods("default").Delete(t.Context(), "on-"+name, metav1.DeleteOptions{}))
	}
	pass(t, srv, clock)

	assert.False(t, podExists(t, c, "on-out"))
	assert.True(t, podExists(t, c, "on-down"))
	assert.True(t, podExists(t, c, "running-on-out"), "only terminating pods")
}
