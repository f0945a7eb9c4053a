package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// start starts a server with nodes whose pods are scheduled and run.
func start(t *testing.T, nodes ...controllers.Node) (*apiserver.Server, kubernetes.Interface) {
	t.Helper()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Nodes: append([]controllers.Node{}, nodes...),
		Controllers: []controllers.Name{controllers.ServiceAccount, controllers.Kubelet, controllers.Scheduler, controllers.NodeLifecycle}}))
	client, err := srv.Clientset()
	require.NoError(t, err)
	return srv, client
}

func pod(name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}}}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func requests(cpu string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	}
}

func create(t *testing.T, client kubernetes.Interface, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	created, err := client.CoreV1().Pods(p.Namespace).Create(t.Context(), p, metav1.CreateOptions{})
	require.NoError(t, err)
	return created
}

// wait watches the pod from from until cond holds.
func wait(t *testing.T, client kubernetes.Interface, from *corev1.Pod, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	if cond(from) {
		return from
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	w, err := client.CoreV1().Pods(from.Namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: from.ResourceVersion,
		FieldSelector: fields.OneTermEqualSelector("metadata.name", from.Name).String()})
	require.NoError(t, err)
	defer w.Stop()
	last := from
	for {
		select {
		case ev, ok := <-w.ResultChan():
			require.True(t, ok)
			if p, isPod := ev.Object.(*corev1.Pod); isPod && ev.Type != watch.Deleted {
				if last = p; cond(p) {
					return p
				}
			}
		case <-ctx.Done():
			out, _ := yaml.Marshal(last.Status)
			t.Fatalf("pod %s: condition not met; last status:\n%s", from.Name, out)
		}
	}
}

func scheduled(p *corev1.Pod) bool { return p.Spec.NodeName != "" }

func unschedulable(p *corev1.Pod) bool {
	c := podScheduled(p)
	return c.Status == corev1.ConditionFalse && c.Reason != ""
}

func podScheduled(p *corev1.Pod) corev1.PodCondition {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c
		}
	}
	return corev1.PodCondition{}
}

// schedulerEvents waits for an events.k8s.io event of reason about the
// pod, and returns it.
func schedulerEvent(t *testing.T, client kubernetes.Interface, p *corev1.Pod, reason string) eventsv1.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for {
		list, err := client.EventsV1().Events(p.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + p.Name})
		require.NoError(t, err)
		for _, e := range list.Items {
			if e.Reason == reason {
				return e
			}
		}
		w, err := client.EventsV1().Events(p.Namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, FieldSelector: "regarding.name=" + p.Name})
		require.NoError(t, err)
		select {
		case <-w.ResultChan():
		case <-ctx.Done():
			t.Fatalf("no %s event for pod %s", reason, p.Name)
		}
		w.Stop()
	}
}

// A pod is bound to a node as kube-scheduler binds it, with its Scheduled
// event; the node's kubelet then runs it.
func TestPodScheduledAndRun(t *testing.T) {
	t.Parallel()
	_, client := start(t, controllers.Nodes(2)...)
	p := wait(t, client, create(t, client, pod("web")), func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	assert.Contains(t, []string{"node-0", "node-1"}, p.Spec.NodeName)
	assert.Equal(t, corev1.ConditionTrue, podScheduled(p).Status)
	ev := schedulerEvent(t, client, p, "Scheduled")
	assert.Equal(t, "Successfully assigned default/web to "+p.Spec.NodeName, ev.Note)
	assert.Equal(t, "Binding", ev.Action)
	assert.Equal(t, "default-scheduler", ev.ReportingController)
	assert.Regexp(t, `^default-scheduler-`, ev.ReportingInstance)
	assert.Equal(t, corev1.EventTypeNormal, ev.Type)
}

// A node filled exactly takes every pod that fits: a bound pod is counted
// on its node once, also when the informer shows its binding before the
// scheduler records it as assumed (it was counted twice, so a later pod
// was refused with "Insufficient cpu" on a node with room).
func TestFullNodeCountsEachPodOnce(t *testing.T) {
	t.Parallel()
	srv, client := start(t, controllers.Node{Name: "a", Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}})
	for i := range 10 {
		create(t, client, pod(fmt.Sprintf("p%d", i), requests("100m")))
	}
	apiservertest.WaitIdle(t, srv)
	pods, err := client.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	for _, p := range pods.Items {
		assert.Equal(t, "a", p.Spec.NodeName, "%s: %+v", p.Name, podScheduled(&p))
	}
}

// The scheduler keeps its snapshot between cycles while only status
// writes and its own bindings happen; a placed pod that ends, or is
// deleted at once, frees its room for the next cycle all the same.
func TestRoomFreedByAPlacedPod(t *testing.T) {
	t.Parallel()
	srv, client := start(t, controllers.Node{Name: "a", Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}})
	fill := wait(t, client, create(t, client, pod("fill", requests("600m"), func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever })), func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	first := wait(t, client, create(t, client, pod("first", requests("600m"))), unschedulable)
	require.NoError(t, srv.Kubelet().Complete(t.Context(), "default", fill.Name))
	first = wait(t, client, first, scheduled)
	assert.Equal(t, "a", first.Spec.NodeName)

	second := wait(t, client, create(t, client, pod("second", requests("600m"))), unschedulable)
	require.NoError(t, client.CoreV1().Pods("default").Delete(t.Context(), first.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	second = wait(t, client, second, scheduled)
	assert.Equal(t, "a", second.Spec.NodeName)
}

// A placed pod resized down frees the room it gave back once the kubelet
// has actuated the resize: the status write that reports it (the spec is
// unchanged by then) is counted as a change of the pod's requests.
func TestRoomFreedByAResize(t *testing.T) {
	t.Parallel()
	_, client := start(t, controllers.Node{Name: "a", Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}})
	big := wait(t, client, create(t, client, pod("big", requests("600m"))), func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	waiting := wait(t, client, create(t, client, pod("waiting", requests("600m"))), unschedulable)

	// The kubelet may still be writing big's status (Ready): read, change,
	// retry on a conflict, as a client does.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		latest, err := client.CoreV1().Pods("default").Get(t.Context(), big.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		latest.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("200m")
		_, err = client.CoreV1().Pods("default").UpdateResize(t.Context(), big.Name, latest, metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, err)
	assert.Equal(t, "a", wait(t, client, waiting, scheduled).Spec.NodeName)
}

// A pod that fits nowhere gets kube-scheduler's condition and event, with
// its message; it is scheduled once a node that fits joins.
func TestUnschedulablePodWaitsForANode(t *testing.T) {
	t.Parallel()
	small := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	srv, client := start(t, controllers.Node{Name: "a", Capacity: small}, controllers.Node{Name: "b", Capacity: small},
		controllers.Node{Name: "c", Taints: []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}})
	for _, node := range []string{"a", "b"} {
		wait(t, client, create(t, client, pod("fill-"+node, requests("600m"), func(p *corev1.Pod) { p.Spec.NodeName = node })), scheduled)
	}
	p := wait(t, client, create(t, client, pod("big", requests("600m"))), unschedulable)
	want := "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu. " +
		"preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims found for incoming pod."
	assert.Equal(t, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: want,
		ObservedGeneration: 1, LastTransitionTime: podScheduled(p).LastTransitionTime}, podScheduled(p))
	ev := schedulerEvent(t, client, p, "FailedScheduling")
	assert.Equal(t, want, ev.Note)
	assert.Equal(t, corev1.EventTypeWarning, ev.Type)
	assert.Equal(t, "Scheduling", ev.Action)

	_, err := srv.Kubelet().AddNode(t.Context(), controllers.Node{Name: "d"})
	require.NoError(t, err)
	p = wait(t, client, p, scheduled)
	assert.Equal(t, "d", p.Spec.NodeName)
}

// Each filter's reason, as kube-scheduler words it.
func TestFilterReasons(t *testing.T) {
	t.Parallel()
	_, client := start(t, controllers.Node{Name: "a", Labels: map[string]string{"disk": "ssd"}, Capacity: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("3")}})
	_, err := client.SchedulingV1().PriorityClasses().Create(t.Context(), &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "no-preemption"},
		Value: 10, PreemptionPolicy: ptrTo(corev1.PreemptNever)}, metav1.CreateOptions{})
	require.NoError(t, err)
	hostPort := func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
	}
	wait(t, client, create(t, client, pod("first", hostPort)), scheduled)
	for _, tc := range []struct {
		pod  *corev1.Pod
		want string
	}{
		{pod("selector", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"disk": "hdd"} }),
			"0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."},
		{pod("port", hostPort),
			"0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."},
		{pod("never", requests("100"), func(p *corev1.Pod) { p.Spec.PriorityClassName = "no-preemption" }),
			"0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never."},
	} {
		p := wait(t, client, create(t, client, tc.pod), unschedulable)
		assert.Equal(t, tc.want, podScheduled(p).Message, tc.pod.Name)
	}
	wait(t, client, create(t, client, pod("second")), scheduled)
	wait(t, client, create(t, client, pod("third")), scheduled)
	p := wait(t, client, create(t, client, pod("full")), unschedulable)
	assert.Equal(t, "0/1 nodes are available: 1 Too many pods. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
		podScheduled(p).Message)
}

// Required pod anti-affinity and topology spread place pods apart.
func TestAntiAffinityAndSpread(t *testing.T) {
	t.Parallel()
	_, client := start(t, controllers.Node{Name: "a", Zone: "z1"}, controllers.Node{Name: "b", Zone: "z2"})
	apart := func(p *corev1.Pod) {
		p.Labels = map[string]string{"app": "db"}
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}}}
	}
	one := wait(t, client, create(t, client, pod("db-0", apart)), scheduled)
	two := wait(t, client, create(t, client, pod("db-1", apart)), scheduled)
	assert.NotEqual(t, one.Spec.NodeName, two.Spec.NodeName)
	p := wait(t, client, create(t, client, pod("db-2", apart)), unschedulable)
	assert.Equal(t, "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.",
		podScheduled(p).Message)

	spread := func(p *corev1.Pod) {
		p.Labels = map[string]string{"app": "web"}
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	}
	zones := map[string]int{}
	for _, name := range []string{"web-0", "web-1", "web-2", "web-3"} {
		zones[wait(t, client, create(t, client, pod(name, spread)), scheduled).Spec.NodeName]++
	}
	assert.Equal(t, map[string]int{"a": 2, "b": 2}, zones)
}

// A pod of another scheduler, or with scheduling gates, is left alone;
// with no node at all, the message says so.
func TestPodsLeftAlone(t *testing.T) {
	t.Parallel()
	_, client := start(t)
	p := wait(t, client, create(t, client, pod("lonely")), unschedulable)
	assert.Equal(t, "no nodes available to schedule pods", podScheduled(p).Message)
	other := create(t, client, pod("mine", func(p *corev1.Pod) { p.Spec.SchedulerName = "my-scheduler" }))
	gated := create(t, client, pod("gated", func(p *corev1.Pod) { p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}} }))
	for _, p := range []*corev1.Pod{other, gated} {
		got, err := client.CoreV1().Pods("default").Get(t.Context(), p.Name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.NotEqual(t, "Unschedulable", podScheduled(got).Reason, p.Name)
	}
}

func ptrTo[T any](v T) *T { return &v }

// A gated pod says why it waits and is left alone; once its gates are
// gone it is bound, and the binding gives it its node's zone and region
// labels (kube-apiserver's PodTopologyLabels admission, on in v1.37).
func TestSchedulingGatesAndTopologyLabels(t *testing.T) {
	t.Parallel()
	_, client := start(t, controllers.Node{Name: "a", Zone: "z1"})
	p := create(t, client, pod("gated", func(p *corev1.Pod) {
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}}
	}))
	assert.Equal(t, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated,
		Message: "Scheduling is blocked due to non-empty scheduling gates", LastTransitionTime: podScheduled(p).LastTransitionTime}, podScheduled(p))
	err := client.CoreV1().Pods("default").Bind(t.Context(), &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "gated"},
		Target: corev1.ObjectReference{Kind: "Node", Name: "a"}}, metav1.CreateOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pod gated has non-empty .spec.schedulingGates")

	p.Spec.SchedulingGates = nil
	p, err = client.CoreV1().Pods("default").Update(t.Context(), p, metav1.UpdateOptions{})
	require.NoError(t, err)
	p = wait(t, client, p, func(p *corev1.Pod) bool { return scheduled(p) && p.Labels[corev1.LabelTopologyZone] != "" })
	assert.Equal(t, "z1", p.Labels[corev1.LabelTopologyZone])
}

// A binding's uid and resourceVersion are preconditions on the pod.
func TestBindingPreconditions(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Controllers: []controllers.Name{controllers.ServiceAccount}}))
	client, err := srv.Clientset()
	require.NoError(t, err)
	p := create(t, client, pod("a"))
	bind := func(uid, rv string) error {
		return client.CoreV1().Pods("default").Bind(t.Context(), &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: "a", UID: types.UID(uid), ResourceVersion: rv},
			Target:     corev1.ObjectReference{Kind: "Node", Name: "n"}}, metav1.CreateOptions{})
	}
	assert.True(t, apierrors.IsConflict(bind("00000000-0000-0000-0000-000000000000", "")), "wrong uid")
	assert.True(t, apierrors.IsConflict(bind(string(p.UID), "1")), "stale resourceVersion")
	require.NoError(t, bind(string(p.UID), p.ResourceVersion))
}

// onNode pins a pod to a node by its hostname label.
func onNode(node string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node} }
}

// awayFrom gives a pod required anti-affinity, per node, to pods whose
// key label is one of values.
func awayFrom(key string, values ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: key, Operator: metav1.LabelSelectorOpIn, Values: values}}}}}}}
	}
}

const antiAffinityMessage = "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) didn't match pod anti-affinity rules. " +
	"preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."

// The scheduler keeps its snapshot after its own bindings: the pod it
// counts there carries the zone label its binding gave it, as a rebuilt
// snapshot's would.
func TestKeptSnapshotCountsTheBindingsLabels(t *testing.T) {
	t.Parallel()
	_, client := start(t, controllers.Node{Name: "a", Zone: "z1"}, controllers.Node{Name: "b", Zone: "z2"})
	wait(t, client, create(t, client, pod("placed", onNode("a"))), func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	p := wait(t, client, create(t, client, pod("apart", onNode("a"), awayFrom(corev1.LabelTopologyZone, "z1"))), func(p *corev1.Pod) bool {
		return scheduled(p) || unschedulable(p)
	})
	assert.Equal(t, "", p.Spec.NodeName)
	assert.Equal(t, antiAffinityMessage, podScheduled(p).Message)
}

// A placed pod relabelled, and a node cordoned, change what the next
// cycle sees.
func TestKeptSnapshotSeesPlacedPodsAndNodesChange(t *testing.T) {
	t.Parallel()
	srv, client := start(t, controllers.Node{Name: "a"}, controllers.Node{Name: "b"})
	placed := wait(t, client, create(t, client, pod("placed", onNode("a"), func(p *corev1.Pod) { p.Labels = map[string]string{"app": "db"} })), func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	apart := wait(t, client, create(t, client, pod("apart", onNode("a"), awayFrom("app", "db"))), unschedulable)
	assert.Equal(t, antiAffinityMessage, podScheduled(apart).Message)
	_, err := client.CoreV1().Pods("default").Patch(t.Context(), placed.Name, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"app":"old"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	assert.Equal(t, "a", wait(t, client, apart, scheduled).Spec.NodeName)

	_, err = client.CoreV1().Nodes().Patch(t.Context(), "b", types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	// The scheduler's node and pod informers are two watches: the cordon
	// must reach it before the pod does.
	apiservertest.WaitIdle(t, srv)
	p := wait(t, client, create(t, client, pod("cordoned", onNode("b"))), func(p *corev1.Pod) bool { return scheduled(p) || unschedulable(p) })
	assert.Equal(t, "", p.Spec.NodeName)
}

// Pods whose claims wait for their first consumer are scheduled once, as
// kube-scheduler's PreBind waits for the provisioning: the claims' update
// the scheduler made itself is not mistaken for a failed provisioning
// while its informer has not shown it (it was, and each such pod got a
// FailedScheduling event and a second cycle).
func TestClaimsProvisionedWithoutAFailure(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Nodes: controllers.Nodes(3),
		Controllers: []controllers.Name{controllers.ServiceAccount, controllers.Kubelet, controllers.Scheduler, controllers.NodeLifecycle,
			controllers.PersistentVolumeBinder, controllers.VolumeProvisioner}}))
	client, err := srv.Clientset()
	require.NoError(t, err)
	for i := range 10 {
		_, err := client.CoreV1().PersistentVolumeClaims("default").Create(t.Context(), &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("db-%d", i)},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	// The scheduler's informer has the claims (a pod before its claim is
	// unschedulable until the claim comes, as upstream).
	require.NoError(t, srv.WaitIdle(t.Context()))
	var pods []*corev1.Pod
	for i := range 10 {
		name := fmt.Sprintf("db-%d", i)
		pods = append(pods, create(t, client, pod(name, func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}}
		})))
	}
	for _, p := range pods {
		wait(t, client, p, scheduled)
	}
	require.NoError(t, srv.WaitIdle(t.Context()))
	failures, err := client.EventsV1().Events("default").List(t.Context(), metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
	require.NoError(t, err)
	for _, e := range failures.Items {
		t.Errorf("%s: %s", e.Regarding.Name, e.Note)
	}
}

// Simulated nodes declare what a v1.37 kubelet does; a pod that needs a
// feature (a restart rule that restarts all containers) goes only to
// nodes that declare it, as kube-scheduler's NodeDeclaredFeatures filter
// decides.
func TestNodeDeclaredFeatures(t *testing.T) {
	t.Parallel()
	srv, client := start(t, controllers.Nodes(2)...)
	node, err := client.CoreV1().Nodes().Get(t.Context(), "node-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"ExtendWebSocketsToKubelet", "InPlacePodLevelResourcesVerticalScaling",
		"InPlacePodVerticalScalingInitContainers", "RestartAllContainersOnContainerExits"}, node.Status.DeclaredFeatures)
	// node-1 as an older kubelet's: stopped, its kubelet does not put its
	// features back at its next status report.
	require.NoError(t, srv.Kubelet().StopNode("node-1"))
	_, err = client.CoreV1().Nodes().PatchStatus(t.Context(), "node-1", []byte(`{"status":{"declaredFeatures":null}}`))
	require.NoError(t, err)
	// The scheduler must have seen the change before the pod comes, or it
	// may place the pod on node-1 as it was (as kube-scheduler would).
	require.NoError(t, srv.WaitIdle(t.Context()))

	restartsAll := func(p *corev1.Pod) {
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		p.Spec.Containers[0].RestartPolicy = ptrTo(corev1.ContainerRestartPolicyNever)
		p.Spec.Containers[0].RestartPolicyRules = []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestartAllContainers,
			ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
	}
	p := wait(t, client, create(t, client, pod("anywhere", restartsAll)), scheduled)
	assert.Equal(t, "node-0", p.Spec.NodeName)
	p = wait(t, client, create(t, client, pod("old", restartsAll, onNode("node-1"))), unschedulable)
	assert.Equal(t, "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) didn't match Pod's required features. "+
		"preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.", podScheduled(p).Message)
}

// WaitIdle returns once the scheduler's events are written: a test lists
// them after it, without watching (the server's own requests pass the
// fault rules: their writes cannot be slowed here; a loaded machine did).
func TestWaitIdleWaitsForSchedulerEvents(t *testing.T) {
	t.Parallel()
	srv, client := start(t, controllers.Node{Name: "small", Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}})
	for i := range 5 {
		create(t, client, pod(fmt.Sprintf("fits-%d", i), requests("100m")))
	}
	create(t, client, pod("too-big", requests("2")))
	apiservertest.WaitIdle(t, srv)
	list, err := client.EventsV1().Events("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	reasons := map[string]string{}
	for _, ev := range list.Items {
		if ev.ReportingController == "default-scheduler" {
			reasons[ev.Regarding.Name] = ev.Reason
		}
	}
	assert.Equal(t, map[string]string{"fits-0": "Scheduled", "fits-1": "Scheduled", "fits-2": "Scheduled", "fits-3": "Scheduled",
		"fits-4": "Scheduled", "too-big": "FailedScheduling"}, reasons)
}
