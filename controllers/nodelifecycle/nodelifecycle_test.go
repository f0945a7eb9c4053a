package nodelifecycle_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

type env struct {
	srv    *apiserver.Server
	client kubernetes.Interface
	clock  *clocktesting.FakeClock
}

func start(t *testing.T, nodes int) env {
	t.Helper()
	clock := clocktesting.NewFakeClock(time.Now())
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Nodes: controllers.Nodes(nodes), Clock: clock,
		Controllers: []controllers.Name{controllers.ServiceAccount, controllers.Kubelet, controllers.NodeLifecycle}}))
	client, err := srv.Clientset()
	require.NoError(t, err)
	return env{srv, client, clock}
}

// waitNode waits until cond holds of the node.
func (e env) waitNode(t *testing.T, name string, cond func(*corev1.Node) bool) *corev1.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for {
		n, err := e.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		if cond(n) {
			return n
		}
		w, err := e.client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: n.ResourceVersion,
			FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
		require.NoError(t, err)
		select {
		case <-w.ResultChan():
		case <-ctx.Done():
			t.Fatalf("node %s: condition not met; taints %v, conditions %v", name, n.Spec.Taints, n.Status.Conditions)
		}
		w.Stop()
	}
}

func taintKeys(n *corev1.Node) []string {
	var out []string
	for _, t := range n.Spec.Taints {
		out = append(out, t.Key+":"+string(t.Effect))
	}
	slices.Sort(out)
	return out
}

func ready(n *corev1.Node) corev1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c
		}
	}
	return corev1.NodeCondition{}
}

// A new node's not-ready taint (given at creation) is gone by the time
// Start returns, once its kubelet reports it Ready.
func TestReadyNodeLosesNotReadyTaint(t *testing.T) {
	t.Parallel()
	e := start(t, 1)
	n, err := e.client.CoreV1().Nodes().Get(t.Context(), "node-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, n.Spec.Taints)
}

// A node reported not Ready is tainted not-ready NoSchedule and NoExecute
// (each with its timeAdded); its pods keep their Ready condition (the
// kubelet's to write: kube-controller-manager marks them only when it
// marks the node Unknown itself); Ready again, the taints go.
func TestNotReadyNodeIsTainted(t *testing.T) {
	t.Parallel()
	e := start(t, 2)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "node-0", Containers: []corev1.Container{{Name: "c", Image: "nginx:1"}}}}
	_, err := e.client.CoreV1().Pods("default").Create(t.Context(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, e.srv)

	require.NoError(t, e.srv.Kubelet().SetNodeReady(t.Context(), "node-0", false, ""))
	n := e.waitNode(t, "node-0", func(n *corev1.Node) bool { return len(n.Spec.Taints) == 2 })
	assert.Equal(t, []string{"node.kubernetes.io/not-ready:NoExecute", "node.kubernetes.io/not-ready:NoSchedule"}, taintKeys(n))
	for _, taint := range n.Spec.Taints {
		assert.NotNil(t, taint.TimeAdded, taint.Key)
	}
	apiservertest.WaitIdle(t, e.srv)
	p, err := e.client.CoreV1().Pods("default").Get(t.Context(), "p", metav1.GetOptions{})
	require.NoError(t, err)
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			assert.Equal(t, corev1.ConditionTrue, c.Status, "not marked by the node controller")
		}
	}

	require.NoError(t, e.srv.Kubelet().SetNodeReady(t.Context(), "node-0", true, ""))
	e.waitNode(t, "node-0", func(n *corev1.Node) bool { return len(n.Spec.Taints) == 0 })
}

// A node whose kubelet stops is Unknown once the grace period (50 s of the
// server's clock) is over, and tainted unreachable; with every node down,
// no NoExecute taint (nothing to gain from evicting).
func TestStoppedKubeletMakesNodeUnknown(t *testing.T) {
	t.Parallel()
	e := start(t, 2)
	require.NoError(t, e.srv.Kubelet().StopNode("node-0"))
	apiservertest.StepClock(t, e.srv, e.clock, 51*time.Second)
	n := e.waitNode(t, "node-0", func(n *corev1.Node) bool { return ready(n).Status == corev1.ConditionUnknown })
	assert.Equal(t, "NodeStatusUnknown", ready(n).Reason)
	assert.Equal(t, "Kubelet stopped posting node status.", ready(n).Message)
	for _, c := range n.Status.Conditions {
		assert.Equal(t, corev1.ConditionUnknown, c.Status, c.Type)
	}
	n = e.waitNode(t, "node-0", func(n *corev1.Node) bool { return len(n.Spec.Taints) == 2 })
	assert.Equal(t, []string{"node.kubernetes.io/unreachable:NoExecute", "node.kubernetes.io/unreachable:NoSchedule"}, taintKeys(n))
	other, err := e.client.CoreV1().Nodes().Get(t.Context(), "node-1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.ConditionTrue, ready(other).Status, "its kubelet renewed its lease")

	require.NoError(t, e.srv.Kubelet().StopNode("node-1"))
	apiservertest.StepClock(t, e.srv, e.clock, 51*time.Second)
	e.waitNode(t, "node-0", func(n *corev1.Node) bool {
		return slices.Equal(taintKeys(n), []string{"node.kubernetes.io/unreachable:NoSchedule"})
	})
	require.NoError(t, e.srv.Kubelet().StartNode(t.Context(), "node-0"))
	e.waitNode(t, "node-0", func(n *corev1.Node) bool { return ready(n).Status == corev1.ConditionTrue && len(n.Spec.Taints) == 0 })
}
