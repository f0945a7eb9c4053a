package kubelet_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/controllers/kubelet"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// A simulated node is registered as a kubelet registers one: its labels,
// annotations, capacity less the default reservations, addresses, node
// info and the four conditions, Ready last; and its Lease, owned by it.
func TestNodeRegistered(t *testing.T) {
	t.Parallel()
	e := start(t, controllers.Node{Name: "worker", Zone: "zone-a", Labels: map[string]string{"pool": "blue"},
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		Taints:   []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}})
	n, err := e.client.CoreV1().Nodes().Get(t.Context(), "worker", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"kubernetes.io/hostname": "worker", "kubernetes.io/os": "linux", "kubernetes.io/arch": runtime.GOARCH,
		"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": runtime.GOARCH, "topology.kubernetes.io/zone": "zone-a", "pool": "blue"}, n.Labels)
	assert.Equal(t, map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true", controllers.SimulatedAnnotation: "true"}, n.Annotations)
	assert.Equal(t, "10.244.0.0/24", n.Spec.PodCIDR)
	assert.Contains(t, n.Spec.Taints, corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule})
	assert.Equal(t, "2", n.Status.Capacity.Cpu().String())
	assert.Equal(t, "16Gi", n.Status.Capacity.Memory().String())
	assert.Equal(t, "16284Mi", n.Status.Allocatable.Memory().String(), "less 100Mi")
	assert.Equal(t, "110", n.Status.Allocatable.Pods().String())
	assert.Equal(t, []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.18.0.2"}, {Type: corev1.NodeHostName, Address: "worker"}}, n.Status.Addresses)
	assert.Equal(t, int32(10250), n.Status.DaemonEndpoints.KubeletEndpoint.Port)
	assert.Equal(t, "v1.37.2", n.Status.NodeInfo.KubeletVersion)
	assert.Equal(t, "containerd://2.1.4-kubeembed", n.Status.NodeInfo.ContainerRuntimeVersion)
	assert.Empty(t, cmp.Diff([]corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"},
	}, n.Status.Conditions, cmpopts.IgnoreFields(corev1.NodeCondition{}, "LastHeartbeatTime", "LastTransitionTime")))

	lease, err := e.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(t.Context(), "worker", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "worker", UID: n.UID}}, lease.OwnerReferences)
	assert.Equal(t, ptr.To("worker"), lease.Spec.HolderIdentity)
	assert.Equal(t, ptr.To[int32](40), lease.Spec.LeaseDurationSeconds)

	events := e.events(t, "default", "worker", "Starting", "NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID", "NodeAllocatableEnforced")
	for _, ev := range events {
		if ev.Reason == "NodeHasSufficientMemory" {
			assert.Equal(t, "Node worker status is now: NodeHasSufficientMemory", ev.Message)
			assert.Equal(t, corev1.EventSource{Component: "kubelet", Host: "worker"}, ev.Source)
		}
	}

	renewed := lease.Spec.RenewTime.Time
	e.clock.Step(10 * time.Second)
	e.watch(t, "leases", "worker", lease.ResourceVersion, func(ev watch.Event) bool { return ev.Type == watch.Modified }, func() string { return "not renewed" })
	lease, err = e.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(t.Context(), "worker", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, lease.Spec.RenewTime.After(renewed), "renewed every 10 s of the server's clock")
}

// A test makes a node not Ready and Ready again; the kubelet reports it
// with its reason and the events of the change.
func TestNodeNotReady(t *testing.T) {
	t.Parallel()
	e := start(t)
	require.NoError(t, e.k.SetNodeReady(t.Context(), "node-0", false, ""))
	n, err := e.client.CoreV1().Nodes().Get(t.Context(), "node-0", metav1.GetOptions{})
	require.NoError(t, err)
	ready := n.Status.Conditions[3]
	assert.Equal(t, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: "container runtime is down",
		LastHeartbeatTime: ready.LastHeartbeatTime, LastTransitionTime: ready.LastTransitionTime}, ready)
	e.events(t, "default", "node-0", "NodeNotReady")
	require.NoError(t, e.k.SetNodeReady(t.Context(), "node-0", true, ""))
	e.events(t, "default", "node-0", "NodeReady")
	assert.ErrorIs(t, e.k.SetNodeReady(t.Context(), "nope", true, ""), kubelet.ErrNoSuchNode)
}

// Nodes come and go at run time; a Node a test creates with the simulated
// annotation is taken over by the kubelet.
func TestNodesAddedRemovedAndAdopted(t *testing.T) {
	t.Parallel()
	e := start(t, []controllers.Node{}...)
	added, err := e.k.AddNode(t.Context(), controllers.Node{Name: "late"})
	require.NoError(t, err)
	assert.Equal(t, "KubeletReady", added.Status.Conditions[3].Reason)
	_, err = e.k.AddNode(t.Context(), controllers.Node{Name: "late"})
	assert.ErrorContains(t, err, "already simulated")
	_, err = e.k.AddNode(t.Context(), controllers.Node{Name: "Not_A_Name"})
	assert.Error(t, err)

	_, err = e.client.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "mine",
		Annotations: map[string]string{controllers.SimulatedAnnotation: "true"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	e.watch(t, "nodes", "mine", "", func(ev watch.Event) bool {
		n := ev.Object.(*corev1.Node)
		return len(n.Status.Conditions) == 4 && n.Status.Conditions[3].Status == corev1.ConditionTrue
	}, func() string { return "not adopted" })
	assert.Equal(t, []string{"late", "mine"}, e.k.Nodes())

	require.NoError(t, e.k.RemoveNode(t.Context(), "late"))
	_, err = e.client.CoreV1().Nodes().Get(t.Context(), "late", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err))
	assert.Equal(t, []string{"mine"}, e.k.Nodes())
}

// A stopped node's kubelet neither renews its Lease nor acts on its pods;
// started again, it catches up.
func TestStoppedNode(t *testing.T) {
	t.Parallel()
	e := start(t)
	require.NoError(t, e.k.StopNode("node-0"))
	p := e.createPod(t, simplePod("waits"))
	apiservertest.WaitIdle(t, e.srv)
	got, err := e.client.CoreV1().Pods("default").Get(t.Context(), "waits", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, got.Status.HostIP, "no kubelet acts on it")
	require.NoError(t, e.k.StartNode(t.Context(), "node-0"))
	e.waitPod(t, p, ready)
}

// A node whose conditions someone else changed (the node lifecycle
// controller marks it Unknown when a clock that jumps runs its check
// before the kubelet's heartbeat) gets its kubelet's status back at the
// next beat, as a kubelet's node status loop reports a status that
// differs from the server's, with the event of the change.
func TestNodeStatusRestoredAtNextBeat(t *testing.T) {
	t.Parallel()
	e := start(t)
	n, err := e.client.CoreV1().Nodes().Get(t.Context(), "node-0", metav1.GetOptions{})
	require.NoError(t, err)
	for i := range n.Status.Conditions {
		c := &n.Status.Conditions[i]
		c.Status, c.Reason, c.Message = corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status."
	}
	n, err = e.client.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{})
	require.NoError(t, err)
	apiservertest.StepClock(t, e.srv, e.clock, 10*time.Second)
	e.watch(t, "nodes", "node-0", n.ResourceVersion, func(ev watch.Event) bool {
		n := ev.Object.(*corev1.Node)
		return n.Status.Conditions[3].Status == corev1.ConditionTrue && n.Status.Conditions[0].Status == corev1.ConditionFalse
	}, func() string { return "not reported" })
	e.events(t, "default", "node-0", "NodeReady")
}

// A node whose declared features and runtime handlers someone else
// changed gets its kubelet's back at the next beat, as a kubelet's
// setNodeStatus sets them at every status sync. The handlers are
// containerd's with runc: runc, then the default (""), each with
// recursive read-only mounts and user namespaces.
func TestNodeDeclaredFeaturesRestoredAtNextBeat(t *testing.T) {
	t.Parallel()
	e := start(t)
	registered, err := e.client.CoreV1().Nodes().Get(t.Context(), "node-0", metav1.GetOptions{})
	require.NoError(t, err)
	handlers := registered.Status.RuntimeHandlers
	require.Len(t, handlers, 2)
	assert.Equal(t, []string{"runc", ""}, []string{handlers[0].Name, handlers[1].Name})
	assert.Equal(t, &corev1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: ptr.To(true), UserNamespaces: ptr.To(true)}, handlers[1].Features)

	n, err := e.client.CoreV1().Nodes().PatchStatus(t.Context(), "node-0", []byte(`{"status":{"declaredFeatures":null,"runtimeHandlers":null}}`))
	require.NoError(t, err)
	require.Empty(t, n.Status.DeclaredFeatures)
	apiservertest.StepClock(t, e.srv, e.clock, 10*time.Second)
	e.watch(t, "nodes", "node-0", n.ResourceVersion, func(ev watch.Event) bool {
		st := ev.Object.(*corev1.Node).Status
		return len(st.DeclaredFeatures) > 0 && len(st.RuntimeHandlers) == 2
	}, func() string { return "not declared again" })
}
