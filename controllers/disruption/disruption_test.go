package disruption_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

func start(t *testing.T) (*apiserver.Server, kubernetes.Interface) {
	t.Helper()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Nodes: controllers.Nodes(1),
		Controllers: []controllers.Name{controllers.ServiceAccount, controllers.Kubelet, controllers.Scheduler, controllers.NodeLifecycle,
			controllers.GarbageCollector, controllers.ReplicaSet, controllers.Disruption}}))
	client, err := srv.Clientset()
	require.NoError(t, err)
	return srv, client
}

var web = map[string]string{"app": "web"}

func replicaSet(t *testing.T, c kubernetes.Interface, replicas int32) {
	t.Helper()
	_, err := c.AppsV1().ReplicaSets("default").Create(t.Context(), &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: web},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: web},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func budget(t *testing.T, c kubernetes.Interface, spec policyv1.PodDisruptionBudgetSpec) {
	t.Helper()
	if spec.Selector == nil {
		spec.Selector = &metav1.LabelSelector{MatchLabels: web}
	}
	_, err := c.PolicyV1().PodDisruptionBudgets("default").Create(t.Context(), &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: spec}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func status(t *testing.T, c kubernetes.Interface) policyv1.PodDisruptionBudgetStatus {
	t.Helper()
	pdb, err := c.PolicyV1().PodDisruptionBudgets("default").Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	return pdb.Status
}

func evict(c kubernetes.Interface, t *testing.T, pod string) error {
	return c.PolicyV1().Evictions("default").Evict(t.Context(), &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: "default"}})
}

func eventReasons(t *testing.T, c kubernetes.Interface, kind string) []string {
	t.Helper()
	list, err := c.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.kind", kind).String()})
	require.NoError(t, err)
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Reason)
	}
	return out
}

// A budget's status counts its ready pods; evictions use it: one allowed,
// the next refused until the evicted pod is replaced and Ready. Bare pods:
// a ReplicaSet's replacement could be Ready before the second eviction.
func TestBudgetAllowsEvictions(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	pod := func(name string) {
		_, err := c.CoreV1().Pods("default").Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: web},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for _, name := range []string{"web-0", "web-1", "web-2"} {
		pod(name)
	}
	budget(t, c, policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2))})
	apiservertest.WaitIdle(t, srv)
	s := status(t, c)
	assert.Equal(t, int32(3), s.CurrentHealthy)
	assert.Equal(t, int32(2), s.DesiredHealthy)
	assert.Equal(t, int32(3), s.ExpectedPods)
	assert.Equal(t, int32(1), s.DisruptionsAllowed)
	assert.Equal(t, int64(1), s.ObservedGeneration)
	cond := apimeta.FindStatusCondition(s.Conditions, policyv1.DisruptionAllowedCondition)
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionTrue, cond.Status)
	assert.Equal(t, policyv1.SufficientPodsReason, cond.Reason)

	pods, err := c.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, pods.Items, 3)
	require.NoError(t, evict(c, t, pods.Items[0].Name))
	err = evict(c, t, pods.Items[1].Name)
	assert.True(t, apierrors.IsTooManyRequests(err), "%v", err)
	pod("web-3")                   // the evicted pod's replacement
	apiservertest.WaitIdle(t, srv) // the evicted pod is gone, its replacement Ready
	assert.Equal(t, int32(1), status(t, c).DisruptionsAllowed)
	require.NoError(t, evict(c, t, pods.Items[1].Name))
}

// maxUnavailable counts the pods the controllers want, from their scale:
// here a ReplicaSet's replicas.
func TestBudgetMaxUnavailable(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	replicaSet(t, c, 2)
	budget(t, c, policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromString("50%"))})
	apiservertest.WaitIdle(t, srv)
	s := status(t, c)
	assert.Equal(t, int32(2), s.ExpectedPods)
	assert.Equal(t, int32(1), s.DesiredHealthy)
	assert.Equal(t, int32(1), s.DisruptionsAllowed)
}

// Pods whose controller has no scale make the sync fail safe: nothing may
// be disrupted, and the condition says why.
func TestBudgetSyncFailed(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	job, err := c.BatchV1().Jobs("default").Create(t.Context(), &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "batch"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.CoreV1().Pods("default").Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "batch-0", Labels: web,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "batch", UID: job.UID, Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	budget(t, c, policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))})
	// Idle first: a sync that ran before the controller saw the pod wrote
	// InsufficientPods (CI read that one).
	apiservertest.WaitIdle(t, srv)
	cond := apimeta.FindStatusCondition(status(t, c).Conditions, policyv1.DisruptionAllowedCondition)
	require.NotNil(t, cond)
	assert.Equal(t, policyv1.SyncFailedReason, cond.Reason)
	assert.Equal(t, "jobs.batch does not implement the scale subresource", cond.Message)
	assert.Contains(t, eventReasons(t, c, "PodDisruptionBudget"), "CalculateExpectedPodCountFailed")
}

// A budget that covers no pod says so, and allows nothing.
func TestBudgetWithoutPods(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	budget(t, c, policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1))})
	apiservertest.WaitIdle(t, srv)
	s := status(t, c)
	assert.Equal(t, int32(0), s.DisruptionsAllowed)
	assert.Equal(t, int32(1), s.DesiredHealthy)
	cond := apimeta.FindStatusCondition(s.Conditions, policyv1.DisruptionAllowedCondition)
	require.NotNil(t, cond)
	assert.Equal(t, policyv1.InsufficientPodsReason, cond.Reason)
	assert.Contains(t, eventReasons(t, c, "PodDisruptionBudget"), "NoPods")
}
