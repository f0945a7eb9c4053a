package replicaset_test

import (
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// start starts a server whose pods run, with the ReplicaSet controllers.
func start(t *testing.T) (*apiserver.Server, kubernetes.Interface) {
	t.Helper()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Nodes: controllers.Nodes(2),
		Controllers: []controllers.Name{controllers.ServiceAccount, controllers.Kubelet, controllers.Scheduler, controllers.NodeLifecycle,
			controllers.GarbageCollector, controllers.ResourceQuota, controllers.ReplicaSet, controllers.ReplicationController}}))
	client, err := srv.Clientset()
	require.NoError(t, err)
	return srv, client
}

var web = map[string]string{"app": "web"}

func replicaSet(name string, replicas int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: appsv1.ReplicaSetSpec{
		Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: web},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: web, Annotations: map[string]string{"note": "x"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}}}}}
}

func pods(t *testing.T, c kubernetes.Interface) []corev1.Pod {
	t.Helper()
	list, err := c.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

func reasons(t *testing.T, c kubernetes.Interface, name string) []string {
	t.Helper()
	list, err := c.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String()})
	require.NoError(t, err)
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Reason)
	}
	sort.Strings(out)
	return out
}

// A ReplicaSet gets its pods, named, labelled and owned as upstream makes
// them; they run, and its status counts them; scaled down, it deletes the
// surplus and says so.
func TestReplicaSetCreatesAndDeletesPods(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	rs, err := c.AppsV1().ReplicaSets("default").Create(t.Context(), replicaSet("web", 3), metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)

	ps := pods(t, c)
	require.Len(t, ps, 3)
	for _, p := range ps {
		assert.Equal(t, "web-", p.GenerateName)
		assert.Equal(t, web, p.Labels)
		assert.Equal(t, map[string]string{"note": "x"}, p.Annotations)
		assert.Equal(t, []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: rs.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}, p.OwnerReferences)
		assert.Equal(t, corev1.PodRunning, p.Status.Phase)
		assert.Equal(t, "kube-controller-manager", p.ManagedFields[0].Manager)
	}
	rs, err = c.AppsV1().ReplicaSets("default").Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, appsv1.ReplicaSetStatus{Replicas: 3, FullyLabeledReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3,
		TerminatingReplicas: ptr.To(int32(0)), ObservedGeneration: 1}, rs.Status)
	assert.Equal(t, []string{"SuccessfulCreate", "SuccessfulCreate", "SuccessfulCreate"}, reasons(t, c, "web"))

	rs.Spec.Replicas = ptr.To(int32(1))
	_, err = c.AppsV1().ReplicaSets("default").Update(t.Context(), rs, metav1.UpdateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	assert.Len(t, pods(t, c), 1)
	rs, err = c.AppsV1().ReplicaSets("default").Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(1), rs.Status.Replicas)
	assert.Equal(t, int64(2), rs.Status.ObservedGeneration)
	assert.Contains(t, reasons(t, c, "web"), "SuccessfulDelete")
}

// An orphan pod that matches is adopted (the ReplicaSet creates fewer);
// a pod relabelled out of the selector is released and replaced.
func TestReplicaSetAdoptsAndReleases(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	orphan, err := c.CoreV1().Pods("default").Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Labels: web},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv) // the controller sees the orphan before the ReplicaSet (two informers)
	rs, err := c.AppsV1().ReplicaSets("default").Create(t.Context(), replicaSet("web", 2), metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	ps := pods(t, c)
	require.Len(t, ps, 2)
	orphan, err = c.CoreV1().Pods("default").Get(t.Context(), orphan.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, metav1.GetControllerOf(orphan))
	assert.Equal(t, rs.UID, metav1.GetControllerOf(orphan).UID)

	orphan.Labels = map[string]string{"app": "other"}
	_, err = c.CoreV1().Pods("default").Update(t.Context(), orphan, metav1.UpdateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	released, err := c.CoreV1().Pods("default").Get(t.Context(), "orphan", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, released.OwnerReferences)
	assert.Len(t, pods(t, c), 3, "released and replaced")
}

// Scaling down deletes the cheapest pods first: a pending one before
// running ones, the one with the lowest pod-deletion-cost next.
func TestReplicaSetDeletesCheapestFirst(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	_, err := c.AppsV1().ReplicaSets("default").Create(t.Context(), replicaSet("web", 3), metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	ps := pods(t, c)
	require.Len(t, ps, 3)
	cheap := ps[1]
	cheap.Annotations[corev1.PodDeletionCost] = "-10"
	_, err = c.CoreV1().Pods("default").Update(t.Context(), &cheap, metav1.UpdateOptions{})
	require.NoError(t, err)
	// The controller ranks the pods its informer holds, as
	// kube-controller-manager's does: the cost must have reached it before
	// the scale-down (two informers; CI once scaled down with the pod
	// informer a write behind, 19 times in 150 runs under load).
	apiservertest.WaitIdle(t, srv)
	rs, err := c.AppsV1().ReplicaSets("default").Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	rs.Spec.Replicas = ptr.To(int32(2))
	_, err = c.AppsV1().ReplicaSets("default").Update(t.Context(), rs, metav1.UpdateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	left := pods(t, c)
	require.Len(t, left, 2)
	for _, p := range left {
		assert.NotEqual(t, cheap.Name, p.Name)
	}
}

// A create refused by quota is a FailedCreate event and the ReplicaFailure
// condition, which goes once the pods can be made.
func TestReplicaSetFailureCondition(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	_, err := c.CoreV1().ResourceQuotas("default").Create(t.Context(), &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv) // the quota's status is computed: it is enforced
	_, err = c.AppsV1().ReplicaSets("default").Create(t.Context(), replicaSet("web", 1), metav1.CreateOptions{})
	require.NoError(t, err)
	var rs *appsv1.ReplicaSet
	require.Eventually(t, func() bool {
		rs, err = c.AppsV1().ReplicaSets("default").Get(t.Context(), "web", metav1.GetOptions{})
		return err == nil && len(rs.Status.Conditions) == 1
	}, apiservertest.WaitIdleTimeout, 10*time.Millisecond)
	cond := rs.Status.Conditions[0]
	assert.Equal(t, appsv1.ReplicaSetReplicaFailure, cond.Type)
	assert.Equal(t, "FailedCreate", cond.Reason)
	assert.Contains(t, cond.Message, `pods "web-`)
	assert.Contains(t, cond.Message, "exceeded quota: q")
	// The controller retries (never idle): its event is written beside
	// the status, waited for.
	assert.Eventually(t, func() bool { return slices.Contains(reasons(t, c, "web"), "FailedCreate") }, apiservertest.WaitIdleTimeout, 10*time.Millisecond)

	require.NoError(t, c.CoreV1().ResourceQuotas("default").Delete(t.Context(), "q", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		rs, err = c.AppsV1().ReplicaSets("default").Get(t.Context(), "web", metav1.GetOptions{})
		return err == nil && len(rs.Status.Conditions) == 0 && rs.Status.ReadyReplicas == 1
	}, apiservertest.WaitIdleTimeout, 10*time.Millisecond)
}

// A ReplicationController is run by the same code: its pods are owned by
// a v1 ReplicationController, and its status has no terminatingReplicas.
func TestReplicationController(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	rc, err := c.CoreV1().ReplicationControllers("default").Create(t.Context(), &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ReplicationControllerSpec{Replicas: ptr.To(int32(2)), Selector: web,
			Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: web},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	ps := pods(t, c)
	require.Len(t, ps, 2)
	assert.Equal(t, "v1", ps[0].OwnerReferences[0].APIVersion)
	assert.Equal(t, "ReplicationController", ps[0].OwnerReferences[0].Kind)
	assert.Equal(t, rc.UID, ps[0].OwnerReferences[0].UID)
	rc, err = c.CoreV1().ReplicationControllers("default").Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.ReplicationControllerStatus{Replicas: 2, FullyLabeledReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2,
		ObservedGeneration: 1}, rc.Status)
}

// minReadySeconds runs on the server's clock: with a fake one, a ready pod
// becomes available once the test steps it past them.
func TestReplicaSetMinReadySecondsOnTheServersClock(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Now())
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Nodes: controllers.Nodes(1), Clock: clk,
		Controllers: []controllers.Name{controllers.ServiceAccount, controllers.Kubelet, controllers.Scheduler, controllers.NodeLifecycle,
			controllers.ReplicaSet}}))
	c, err := srv.Clientset()
	require.NoError(t, err)
	rs := replicaSet("web", 1)
	rs.Spec.MinReadySeconds = 30
	_, err = c.AppsV1().ReplicaSets("default").Create(t.Context(), rs, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	got, err := c.AppsV1().ReplicaSets("default").Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(1), got.Status.ReadyReplicas)
	assert.Equal(t, int32(0), got.Status.AvailableReplicas)
	apiservertest.StepClock(t, srv, clk, 31*time.Second)
	got, err = c.AppsV1().ReplicaSets("default").Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(1), got.Status.AvailableReplicas)
}
