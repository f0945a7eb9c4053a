package daemonset_test

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// start starts a server whose pods run on nodes, with the DaemonSet
// controller.
func start(t *testing.T, nodes []controllers.Node) (*apiserver.Server, kubernetes.Interface) {
	t.Helper()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Nodes: nodes,
		Controllers: []controllers.Name{controllers.ServiceAccount, controllers.Kubelet, controllers.Scheduler, controllers.NodeLifecycle,
			controllers.GarbageCollector, controllers.PodGC, controllers.DaemonSet}}))
	client, err := srv.Clientset()
	require.NoError(t, err)
	return srv, client
}

var agent = map[string]string{"app": "agent"}

func daemonSet(name string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: agent},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: agent, Annotations: map[string]string{"note": "x"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}}}}}
}

func create(t *testing.T, c kubernetes.Interface, ds *appsv1.DaemonSet) *appsv1.DaemonSet {
	t.Helper()
	out, err := c.AppsV1().DaemonSets("default").Create(t.Context(), ds, metav1.CreateOptions{})
	require.NoError(t, err)
	return out
}

func get(t *testing.T, c kubernetes.Interface, name string) *appsv1.DaemonSet {
	t.Helper()
	ds, err := c.AppsV1().DaemonSets("default").Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return ds
}

// podsByNode lists the pods of the namespace by the node they are bound
// to (the ones not being deleted).
func podsByNode(t *testing.T, c kubernetes.Interface) map[string]corev1.Pod {
	t.Helper()
	list, err := c.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]corev1.Pod{}
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		_, dup := out[p.Spec.NodeName]
		require.False(t, dup, "two pods on node %q", p.Spec.NodeName)
		out[p.Spec.NodeName] = p
	}
	return out
}

func nodeNames(pods map[string]corev1.Pod) []string {
	var out []string
	for n := range pods {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func events(t *testing.T, c kubernetes.Interface, name string) []corev1.Event {
	t.Helper()
	list, err := c.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String()})
	require.NoError(t, err)
	return list.Items
}

func reasons(evs []corev1.Event) []string {
	var out []string
	for _, e := range evs {
		for range e.Count {
			out = append(out, e.Reason)
		}
	}
	sort.Strings(out)
	return out
}

func patchNode(t *testing.T, c kubernetes.Interface, name, body string) {
	t.Helper()
	_, err := c.CoreV1().Nodes().Patch(t.Context(), name, types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{})
	require.NoError(t, err)
}

func status(desired, current, misscheduled, ready, updated, available int32, generation int64) appsv1.DaemonSetStatus {
	return appsv1.DaemonSetStatus{DesiredNumberScheduled: desired, CurrentNumberScheduled: current, NumberMisscheduled: misscheduled,
		NumberReady: ready, UpdatedNumberScheduled: updated, NumberAvailable: available, NumberUnavailable: desired - available,
		ObservedGeneration: generation}
}

// A DaemonSet runs one pod per node: each made from the template with the
// daemon tolerations, a node affinity on the node's name (the scheduler
// binds it), the revision's hash and the template generation as labels;
// its revision and status are written, and its events say what it did.
func TestOnePodPerNode(t *testing.T) {
	t.Parallel()
	srv, c := start(t, controllers.Nodes(2))
	ds := create(t, c, daemonSet("agent"))
	apiservertest.WaitIdle(t, srv)

	crs, err := c.AppsV1().ControllerRevisions("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, crs.Items, 1)
	cr := crs.Items[0]
	hash := cr.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]
	require.NotEmpty(t, hash)
	assert.Equal(t, "agent-"+hash, cr.Name)
	assert.Equal(t, int64(1), cr.Revision)
	assert.Equal(t, map[string]string{"app": "agent", "controller-revision-hash": hash}, cr.Labels)
	assert.Equal(t, ds.UID, metav1.GetControllerOf(&cr).UID)
	assert.Contains(t, string(cr.Data.Raw), `"$patch":"replace"`)

	pods := podsByNode(t, c)
	require.Equal(t, []string{"node-0", "node-1"}, nodeNames(pods))
	for node, p := range pods {
		assert.Equal(t, "agent-", p.GenerateName)
		assert.Equal(t, map[string]string{"app": "agent", "controller-revision-hash": hash, "pod-template-generation": "1"}, p.Labels)
		assert.Equal(t, map[string]string{"note": "x"}, p.Annotations)
		assert.Equal(t, []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: ds.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}, p.OwnerReferences)
		assert.Equal(t, &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
				Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}}, p.Spec.Affinity)
		var tolerations []string
		for _, tol := range p.Spec.Tolerations {
			tolerations = append(tolerations, fmt.Sprintf("%s:%s:%s", tol.Key, tol.Operator, tol.Effect))
		}
		assert.Equal(t, []string{"node.kubernetes.io/not-ready:Exists:NoExecute", "node.kubernetes.io/unreachable:Exists:NoExecute",
			"node.kubernetes.io/disk-pressure:Exists:NoSchedule", "node.kubernetes.io/memory-pressure:Exists:NoSchedule",
			"node.kubernetes.io/pid-pressure:Exists:NoSchedule", "node.kubernetes.io/unschedulable:Exists:NoSchedule"}, tolerations)
		assert.Equal(t, corev1.PodRunning, p.Status.Phase)
		assert.Equal(t, "kube-controller-manager", p.ManagedFields[0].Manager)
	}
	assert.Equal(t, status(2, 2, 0, 2, 2, 2, 1), get(t, c, "agent").Status)
	evs := events(t, c, "agent")
	assert.Equal(t, []string{"SuccessfulCreate", "SuccessfulCreate"}, reasons(evs))
	assert.Equal(t, "daemonset-controller", evs[0].Source.Component)
	assert.Regexp(t, `^Created pod: agent-[a-z0-9]{5}$`, evs[0].Message)
}

// The node selector picks the nodes; a node relabelled into it gets a
// pod, one relabelled out of it loses its pod.
func TestNodeSelector(t *testing.T) {
	t.Parallel()
	srv, c := start(t, []controllers.Node{{Name: "a", Labels: map[string]string{"role": "edge"}}, {Name: "b"}})
	ds := daemonSet("agent")
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"role": "edge"}
	create(t, c, ds)
	apiservertest.WaitIdle(t, srv)
	assert.Equal(t, []string{"a"}, nodeNames(podsByNode(t, c)))
	assert.Equal(t, status(1, 1, 0, 1, 1, 1, 1), get(t, c, "agent").Status)

	patchNode(t, c, "b", `{"metadata":{"labels":{"role":"edge"}}}`)
	apiservertest.WaitIdle(t, srv)
	assert.Equal(t, []string{"a", "b"}, nodeNames(podsByNode(t, c)))

	patchNode(t, c, "a", `{"metadata":{"labels":{"role":null}}}`)
	apiservertest.WaitIdle(t, srv)
	assert.Equal(t, []string{"b"}, nodeNames(podsByNode(t, c)))
	assert.Equal(t, status(1, 1, 0, 1, 1, 1, 1), get(t, c, "agent").Status)
	assert.Contains(t, reasons(events(t, c, "agent")), "SuccessfulDelete")
}

// A node tainted NoSchedule gets no pod unless the template tolerates
// the taint; a cordoned node gets one (the daemon pods tolerate
// unschedulable). A NoExecute taint added later evicts the pod.
func TestTaints(t *testing.T) {
	t.Parallel()
	srv, c := start(t, []controllers.Node{{Name: "a"}, {Name: "b", Taints: []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}},
		{Name: "c", Unschedulable: true}})
	create(t, c, daemonSet("plain"))
	tolerant := daemonSet("tolerant")
	tolerant.Spec.Selector.MatchLabels = map[string]string{"app": "tolerant"}
	tolerant.Spec.Template.Labels = map[string]string{"app": "tolerant"}
	tolerant.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db",
		Effect: corev1.TaintEffectNoSchedule}}
	create(t, c, tolerant)
	apiservertest.WaitIdle(t, srv)

	list, err := c.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	on := map[string][]string{}
	for _, p := range list.Items {
		on[p.OwnerReferences[0].Name] = append(on[p.OwnerReferences[0].Name], p.Spec.NodeName)
	}
	sort.Strings(on["plain"])
	sort.Strings(on["tolerant"])
	assert.Equal(t, []string{"a", "c"}, on["plain"])
	assert.Equal(t, []string{"a", "b", "c"}, on["tolerant"])
	assert.Equal(t, status(2, 2, 0, 2, 2, 2, 1), get(t, c, "plain").Status)

	patchNode(t, c, "a", `{"spec":{"taints":[{"key":"drain","effect":"NoExecute"}]}}`)
	apiservertest.WaitIdle(t, srv)
	assert.Equal(t, status(1, 1, 0, 1, 1, 1, 1), get(t, c, "plain").Status)
	assert.Equal(t, status(2, 2, 0, 2, 2, 2, 1), get(t, c, "tolerant").Status)
}

// A node added later gets its pod. A node removed keeps its pod until the
// pod garbage collector deletes it (40 s after the node left, on the
// server's clock): the DaemonSet counts it gone only then, as upstream,
// which does not watch node deletions.
func TestNodeAddedAndRemoved(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Now())
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Nodes: controllers.Nodes(1), Clock: clk,
		Controllers: []controllers.Name{controllers.ServiceAccount, controllers.Kubelet, controllers.Scheduler, controllers.NodeLifecycle,
			controllers.GarbageCollector, controllers.PodGC, controllers.DaemonSet}}))
	c, err := srv.Clientset()
	require.NoError(t, err)
	create(t, c, daemonSet("agent"))
	apiservertest.WaitIdle(t, srv)
	assert.Equal(t, []string{"node-0"}, nodeNames(podsByNode(t, c)))

	_, err = srv.Kubelet().AddNode(t.Context(), controllers.Node{Name: "late"})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	assert.Equal(t, []string{"late", "node-0"}, nodeNames(podsByNode(t, c)))
	assert.Equal(t, status(2, 2, 0, 2, 2, 2, 1), get(t, c, "agent").Status)

	require.NoError(t, srv.Kubelet().RemoveNode(t.Context(), "late"))
	apiservertest.WaitIdle(t, srv)
	assert.Equal(t, int32(2), get(t, c, "agent").Status.DesiredNumberScheduled, "not seen before the pod goes")
	for range 5 {
		apiservertest.StepClock(t, srv, clk, 20*time.Second)
	}
	assert.Equal(t, []string{"node-0"}, nodeNames(podsByNode(t, c)))
	assert.Equal(t, status(1, 1, 0, 1, 1, 1, 1), get(t, c, "agent").Status)
}

func setImage(t *testing.T, c kubernetes.Interface, name, image string) {
	t.Helper()
	body := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"agent","image":%q}]}}}}`, image)
	_, err := c.AppsV1().DaemonSets("default").Patch(t.Context(), name, types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{})
	require.NoError(t, err)
}

// maxUnavailable 1 replaces the pods one node at a time: no status ever
// counts two unavailable; at the end every pod runs the new template and
// both revisions are kept.
func TestRollingUpdateMaxUnavailable(t *testing.T) {
	t.Parallel()
	srv, c := start(t, controllers.Nodes(3))
	create(t, c, daemonSet("agent"))
	apiservertest.WaitIdle(t, srv)
	before := podsByNode(t, c)

	w, err := c.AppsV1().DaemonSets("default").Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=agent"})
	require.NoError(t, err)
	defer w.Stop()
	setImage(t, c, "agent", "agent:2")
	worst := int32(0)
	deadline := time.After(apiservertest.WaitIdleTimeout)
	for done := false; !done; {
		select {
		case ev := <-w.ResultChan():
			ds, ok := ev.Object.(*appsv1.DaemonSet)
			require.True(t, ok)
			worst = max(worst, ds.Status.DesiredNumberScheduled-ds.Status.NumberAvailable)
			done = ds.Status.ObservedGeneration == 2 && ds.Status.UpdatedNumberScheduled == 3 && ds.Status.NumberAvailable == 3
		case <-deadline:
			t.Fatal("the rollout did not end")
		}
	}
	assert.Equal(t, int32(1), worst, "one pod at a time")
	apiservertest.WaitIdle(t, srv)
	after := podsByNode(t, c)
	crs, err := c.AppsV1().ControllerRevisions("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, crs.Items, 2)
	latest := crs.Items[0]
	if crs.Items[1].Revision > latest.Revision {
		latest = crs.Items[1]
	}
	assert.Equal(t, int64(2), latest.Revision)
	for node, p := range after {
		assert.NotEqual(t, before[node].Name, p.Name)
		assert.Equal(t, "agent:2", p.Spec.Containers[0].Image)
		assert.Equal(t, latest.Labels[appsv1.DefaultDaemonSetUniqueLabelKey], p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey])
		assert.Equal(t, "2", p.Labels["pod-template-generation"])
	}
	assert.Equal(t, status(3, 3, 0, 3, 3, 3, 2), get(t, c, "agent").Status)
}

// maxSurge 1 (maxUnavailable 0) starts the new pod beside the old one,
// which goes once the new one is available: never less than all
// available.
func TestRollingUpdateMaxSurge(t *testing.T) {
	t.Parallel()
	srv, c := start(t, controllers.Nodes(2))
	ds := daemonSet("agent")
	ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}}
	create(t, c, ds)
	apiservertest.WaitIdle(t, srv)
	setImage(t, c, "agent", "agent:2")
	apiservertest.WaitIdle(t, srv)
	for _, p := range podsByNode(t, c) {
		assert.Equal(t, "agent:2", p.Spec.Containers[0].Image)
	}
	assert.Equal(t, status(2, 2, 0, 2, 2, 2, 2), get(t, c, "agent").Status)
}

// OnDelete leaves the old pods be; a pod deleted is replaced from the new
// template.
func TestOnDelete(t *testing.T) {
	t.Parallel()
	srv, c := start(t, controllers.Nodes(2))
	ds := daemonSet("agent")
	ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
	create(t, c, ds)
	apiservertest.WaitIdle(t, srv)
	before := podsByNode(t, c)
	setImage(t, c, "agent", "agent:2")
	apiservertest.WaitIdle(t, srv)
	assert.Equal(t, before["node-0"].Name, podsByNode(t, c)["node-0"].Name)
	assert.Equal(t, status(2, 2, 0, 2, 0, 2, 2), get(t, c, "agent").Status)

	require.NoError(t, c.CoreV1().Pods("default").Delete(t.Context(), before["node-0"].Name, metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv)
	require.Eventually(t, func() bool { return get(t, c, "agent").Status.NumberAvailable == 2 }, apiservertest.WaitIdleTimeout, 10*time.Millisecond)
	after := podsByNode(t, c)
	assert.Equal(t, "agent:2", after["node-0"].Spec.Containers[0].Image)
	assert.Equal(t, "agent:1", after["node-1"].Spec.Containers[0].Image)
	assert.Equal(t, status(2, 2, 0, 2, 1, 2, 2), get(t, c, "agent").Status)
}

// A failed daemon pod is deleted (a FailedDaemonPod event says so) and
// replaced on its node.
func TestFailedPodRecreated(t *testing.T) {
	t.Parallel()
	srv, c := start(t, controllers.Nodes(1))
	create(t, c, daemonSet("agent"))
	apiservertest.WaitIdle(t, srv)
	failed := podsByNode(t, c)["node-0"]
	failed.Status.Phase = corev1.PodFailed
	_, err := c.CoreV1().Pods("default").UpdateStatus(t.Context(), &failed, metav1.UpdateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	require.Eventually(t, func() bool { return get(t, c, "agent").Status.NumberAvailable == 1 }, apiservertest.WaitIdleTimeout, 10*time.Millisecond)

	now := podsByNode(t, c)
	require.Contains(t, now, "node-0")
	assert.NotEqual(t, failed.Name, now["node-0"].Name)
	var msgs []string
	for _, e := range events(t, c, "agent") {
		if e.Reason == "FailedDaemonPod" {
			msgs = append(msgs, e.Type+": "+e.Message)
		}
	}
	assert.Equal(t, []string{"Warning: Found failed daemon pod default/" + failed.Name + " on node node-0, will try to kill it"}, msgs)
	assert.Equal(t, []string{"FailedDaemonPod", "SuccessfulCreate", "SuccessfulCreate", "SuccessfulDelete"}, reasons(events(t, c, "agent")))
}

// An orphan pod on a node is adopted instead of a new one made.
func TestAdoptsOrphan(t *testing.T) {
	t.Parallel()
	srv, c := start(t, controllers.Nodes(1))
	_, err := c.CoreV1().Pods("default").Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Labels: agent},
		Spec: corev1.PodSpec{NodeName: "node-0", Containers: []corev1.Container{{Name: "agent", Image: "agent:0"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The controller must have seen the orphan before the DaemonSet: its
	// pod and DaemonSet informers are two watches, and one that sees the
	// DaemonSet first makes a pod of its own (kube-controller-manager's
	// does too).
	apiservertest.WaitIdle(t, srv)
	ds := daemonSet("agent")
	ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
	ds = create(t, c, ds)
	apiservertest.WaitIdle(t, srv)
	pods := podsByNode(t, c)
	require.Len(t, pods, 1)
	assert.Equal(t, "orphan", pods["node-0"].Name)
	assert.Equal(t, ds.UID, metav1.GetControllerOf(ptr.To(pods["node-0"])).UID)
	assert.Equal(t, status(1, 1, 0, 1, 0, 1, 1), get(t, c, "agent").Status)
}
