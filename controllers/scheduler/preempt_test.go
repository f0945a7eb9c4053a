package scheduler_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/controllers/kubelet"
)

// priorities creates the classes low (10), mid (500) and high (1000).
func priorities(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	for name, value := range map[string]int32{"low": 10, "mid": 500, "high": 1000} {
		_, err := client.SchedulingV1().PriorityClasses().Create(t.Context(), &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name},
			Value: value}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
}

func priority(class string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.PriorityClassName = class }
}

func oneCPUNodes(names ...string) []controllers.Node {
	var nodes []controllers.Node
	for _, n := range names {
		nodes = append(nodes, controllers.Node{Name: n, Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}})
	}
	return nodes
}

func terminating(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }

// A pod that fits nowhere preempts the lowest priority pods that make room
// for it, as kube-scheduler's DefaultPreemption: the victim gets
// DisruptionTarget and is deleted, with a Preempted event; the pod is
// nominated to the node, then bound there.
func TestPreemption(t *testing.T) {
	t.Parallel()
	_, client := start(t, oneCPUNodes("a", "b")...)
	priorities(t, client)
	low := wait(t, client, create(t, client, pod("low", requests("600m"), priority("low"), onNode("a"))), scheduled)
	wait(t, client, create(t, client, pod("mid", requests("600m"), priority("mid"), onNode("b"))), scheduled)

	urgent := create(t, client, pod("urgent", requests("600m"), priority("high")))
	nominated := wait(t, client, urgent, func(p *corev1.Pod) bool { return p.Status.NominatedNodeName != "" })
	assert.Equal(t, "a", nominated.Status.NominatedNodeName)
	want := "0/2 nodes are available: 2 Insufficient cpu. preemption: found a potential placement for pod on node a, preempting 1 victims"
	assert.Equal(t, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: want,
		ObservedGeneration: 1, LastTransitionTime: podScheduled(nominated).LastTransitionTime}, podScheduled(nominated))

	victim := wait(t, client, low, terminating)
	i := slices.IndexFunc(victim.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.DisruptionTarget })
	require.GreaterOrEqual(t, i, 0, "conditions: %v", victim.Status.Conditions)
	assert.Equal(t, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "PreemptionByScheduler",
		Message: "default-scheduler: preempting to accommodate a higher priority pod", ObservedGeneration: 1,
		LastTransitionTime: victim.Status.Conditions[i].LastTransitionTime}, victim.Status.Conditions[i])
	ev := schedulerEvent(t, client, low, "Preempted")
	assert.Equal(t, "Preempted by pod "+string(urgent.UID)+" on node a", ev.Note)
	assert.Equal(t, corev1.EventTypeNormal, ev.Type)
	assert.Equal(t, "Preempting", ev.Action)
	assert.Nil(t, ev.Related, "as v1.37.2's")

	bound := wait(t, client, nominated, scheduled)
	assert.Equal(t, "a", bound.Spec.NodeName)
	assert.Empty(t, bound.Status.NominatedNodeName, "the binding clears it")
	mid, err := client.CoreV1().Pods("default").Get(t.Context(), "mid", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, mid.DeletionTimestamp, "a higher priority victim elsewhere is spared")
}

// Victims a PodDisruptionBudget protects are taken last: of two nodes
// whose victims are alike, the one whose victim the budget does not cover
// is chosen. Budgets are counted, not written: without the disruption
// controller this one allows no disruption.
func TestPreemptionAvoidsBudgetViolations(t *testing.T) {
	t.Parallel()
	_, client := start(t, oneCPUNodes("a", "b")...)
	priorities(t, client)
	_, err := client.PolicyV1().PodDisruptionBudgets("default").Create(t.Context(), &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	labelled := func(p *corev1.Pod) { p.Labels = map[string]string{"app": "db"} }
	wait(t, client, create(t, client, pod("db", requests("600m"), priority("low"), onNode("a"), labelled)), scheduled)
	cache := wait(t, client, create(t, client, pod("cache", requests("600m"), priority("low"), onNode("b"))), scheduled)

	urgent := wait(t, client, create(t, client, pod("urgent", requests("600m"), priority("high"))), scheduled)
	assert.Equal(t, "b", urgent.Spec.NodeName)
	wait(t, client, cache, terminating)
	db, err := client.CoreV1().Pods("default").Get(t.Context(), "db", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, db.DeletionTimestamp)
}

// A nominated pod holds its node's room against pods of no higher
// priority; once it is deleted, they are tried again.
func TestDeletedNomineeFreesItsRoom(t *testing.T) {
	t.Parallel()
	srv, client := start(t, oneCPUNodes("a")...)
	priorities(t, client)
	// The victim takes its grace period to stop: the nominee waits.
	srv.Kubelet().AddRule(kubelet.Rule{Selector: labels.SelectorFromSet(labels.Set{"app": "slow"}), StopAfter: time.Minute})
	slow := func(p *corev1.Pod) { p.Labels = map[string]string{"app": "slow"} }
	wait(t, client, create(t, client, pod("victim", requests("600m"), priority("low"), onNode("a"), slow)), scheduled)
	urgent := create(t, client, pod("urgent", requests("600m"), priority("high")))
	wait(t, client, urgent, func(p *corev1.Pod) bool { return p.Status.NominatedNodeName == "a" })

	small := wait(t, client, create(t, client, pod("small", requests("300m"))), unschedulable)
	assert.Equal(t, "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
		podScheduled(small).Message, "the nominee's room is taken")
	require.NoError(t, client.CoreV1().Pods("default").Delete(t.Context(), "urgent", metav1.DeleteOptions{}))
	small = wait(t, client, small, scheduled)
	assert.Equal(t, "a", small.Spec.NodeName)
}

// Of two victims alike, the one that started first is given back first:
// started in the same second (the status's precision), the one placed
// first on the node, as kube-scheduler's cache lists them.
func TestPreemptionSparesTheEarlierPlaced(t *testing.T) {
	t.Parallel()
	_, client := start(t, oneCPUNodes("a")...)
	priorities(t, client)
	running := func(p *corev1.Pod) bool { return p.Status.StartTime != nil }
	first := wait(t, client, create(t, client, pod("first", requests("400m"), priority("low"))), running)
	second := wait(t, client, create(t, client, pod("second", requests("400m"), priority("low"))), running)
	wait(t, client, create(t, client, pod("urgent", requests("500m"), priority("high"))), scheduled)
	wait(t, client, second, terminating)
	kept, err := client.CoreV1().Pods("default").Get(t.Context(), "first", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, first.UID, kept.UID)
	assert.Nil(t, kept.DeletionTimestamp)
}
