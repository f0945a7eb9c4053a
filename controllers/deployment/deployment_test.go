package deployment_test

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

func start(t *testing.T) (*apiserver.Server, kubernetes.Interface) {
	t.Helper()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Nodes: controllers.Nodes(2),
		Controllers: []controllers.Name{controllers.ServiceAccount, controllers.Kubelet, controllers.Scheduler, controllers.NodeLifecycle,
			controllers.GarbageCollector, controllers.Deployment, controllers.ReplicaSet}}))
	client, err := srv.Clientset()
	require.NoError(t, err)
	return srv, client
}

var nginx = map[string]string{"app": "nginx"}

// The Deployment of Kubernetes' documentation.
func deployment(replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "nginx-deployment", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: nginx},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: nginx}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "nginx", Image: "nginx:1.14.2", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}}}}}
}

func replicaSets(t *testing.T, c kubernetes.Interface) []appsv1.ReplicaSet {
	t.Helper()
	list, err := c.AppsV1().ReplicaSets("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	sort.Slice(list.Items, func(i, j int) bool {
		return list.Items[i].Annotations["deployment.kubernetes.io/revision"] < list.Items[j].Annotations["deployment.kubernetes.io/revision"]
	})
	return list.Items
}

func get(t *testing.T, c kubernetes.Interface) *appsv1.Deployment {
	t.Helper()
	d, err := c.AppsV1().Deployments("default").Get(t.Context(), "nginx-deployment", metav1.GetOptions{})
	require.NoError(t, err)
	return d
}

func conditions(d *appsv1.Deployment) map[appsv1.DeploymentConditionType]string {
	out := map[appsv1.DeploymentConditionType]string{}
	for _, c := range d.Status.Conditions {
		out[c.Type] = string(c.Status) + "/" + c.Reason + "/" + c.Message
	}
	return out
}

// A Deployment gets a ReplicaSet named by upstream's template hash (the
// name kube-controller-manager v1.37.2 gives this template), its pods run,
// and it reports itself Available and complete.
func TestDeploymentBecomesAvailable(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	_, err := c.AppsV1().Deployments("default").Create(t.Context(), deployment(3), metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)

	rss := replicaSets(t, c)
	require.Len(t, rss, 1)
	rs := rss[0]
	assert.Equal(t, "nginx-deployment-54fd4d6d4c", rs.Name)
	assert.Equal(t, map[string]string{"app": "nginx", "pod-template-hash": "54fd4d6d4c"}, rs.Labels)
	assert.Equal(t, map[string]string{"deployment.kubernetes.io/revision": "1", "deployment.kubernetes.io/desired-replicas": "3",
		"deployment.kubernetes.io/max-replicas": "4"}, rs.Annotations)
	assert.Equal(t, int32(3), rs.Status.AvailableReplicas)

	d := get(t, c)
	assert.Equal(t, "1", d.Annotations["deployment.kubernetes.io/revision"])
	assert.Equal(t, int32(3), d.Status.AvailableReplicas)
	assert.Equal(t, int32(3), d.Status.UpdatedReplicas)
	assert.Equal(t, int64(1), d.Status.ObservedGeneration)
	assert.Equal(t, map[appsv1.DeploymentConditionType]string{
		appsv1.DeploymentAvailable:   "True/MinimumReplicasAvailable/Deployment has minimum availability.",
		appsv1.DeploymentProgressing: `True/NewReplicaSetAvailable/ReplicaSet "nginx-deployment-54fd4d6d4c" has successfully progressed.`,
	}, conditions(d))
}

// A new template rolls out: a second ReplicaSet (revision 2) gets the
// replicas, the first is scaled to zero; rolling back to the first
// template reuses its ReplicaSet as revision 3.
func TestDeploymentRollsOutAndBack(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	_, err := c.AppsV1().Deployments("default").Create(t.Context(), deployment(3), metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	setImage := func(image string) {
		d := get(t, c)
		d.Spec.Template.Spec.Containers[0].Image = image
		_, err := c.AppsV1().Deployments("default").Update(t.Context(), d, metav1.UpdateOptions{})
		require.NoError(t, err)
		apiservertest.WaitIdle(t, srv)
	}
	setImage("nginx:1.16.1")
	rss := replicaSets(t, c)
	require.Len(t, rss, 2)
	assert.Equal(t, int32(0), *rss[0].Spec.Replicas)
	assert.Equal(t, int32(3), *rss[1].Spec.Replicas)
	assert.Equal(t, "2", rss[1].Annotations["deployment.kubernetes.io/revision"])
	d := get(t, c)
	assert.Equal(t, int32(3), d.Status.UpdatedReplicas)
	assert.Equal(t, int32(3), d.Status.AvailableReplicas)

	setImage("nginx:1.14.2")
	rss = replicaSets(t, c)
	require.Len(t, rss, 2)
	assert.Equal(t, "nginx-deployment-54fd4d6d4c", rss[1].Name, "the first ReplicaSet, reused")
	assert.Equal(t, "3", rss[1].Annotations["deployment.kubernetes.io/revision"])
	assert.Equal(t, "1", rss[1].Annotations["deployment.kubernetes.io/revision-history"])
	assert.Equal(t, int32(3), *rss[1].Spec.Replicas)
	assert.Equal(t, int32(0), *rss[0].Spec.Replicas)

	list, err := c.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("reason", "ScalingReplicaSet").String()})
	require.NoError(t, err)
	var messages []string
	for _, e := range list.Items {
		messages = append(messages, e.Message)
	}
	assert.Contains(t, messages, "Scaled up replica set nginx-deployment-54fd4d6d4c from 0 to 3")
}

// Recreate scales the old ReplicaSet to zero before the new one gets any
// replica; scaling the Deployment scales its ReplicaSet; old ones beyond
// revisionHistoryLimit are deleted.
func TestDeploymentRecreateScaleAndHistory(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	d := deployment(2)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	d.Spec.RevisionHistoryLimit = ptr.To(int32(1))
	_, err := c.AppsV1().Deployments("default").Create(t.Context(), d, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	for _, image := range []string{"nginx:1.16.1", "nginx:1.17"} {
		d = get(t, c)
		d.Spec.Template.Spec.Containers[0].Image = image
		_, err = c.AppsV1().Deployments("default").Update(t.Context(), d, metav1.UpdateOptions{})
		require.NoError(t, err)
		apiservertest.WaitIdle(t, srv)
	}
	rss := replicaSets(t, c)
	require.Len(t, rss, 2, "one old ReplicaSet kept")
	assert.Equal(t, "3", rss[1].Annotations["deployment.kubernetes.io/revision"])
	assert.Equal(t, int32(2), *rss[1].Spec.Replicas)

	d = get(t, c)
	d.Spec.Replicas = ptr.To(int32(4))
	_, err = c.AppsV1().Deployments("default").Update(t.Context(), d, metav1.UpdateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	assert.Equal(t, int32(4), *replicaSets(t, c)[1].Spec.Replicas)
	assert.Equal(t, int32(4), get(t, c).Status.AvailableReplicas)
}
