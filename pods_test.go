package apiserver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeembed/apiserver/testing/apiservertest"
)

func TestPods(t *testing.T) {
	srv := apiservertest.Start(t)
	pods := clientset(t, srv).CoreV1().Pods("default")
	ctx := t.Context()

	pod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}}},
		}}
	}
	p, err := pods.Create(ctx, pod("scheduled", "node-1"), metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.PodPending, p.Status.Phase)
	assert.Equal(t, corev1.PodQOSGuaranteed, p.Status.QOSClass, "requests default to limits")
	assert.Equal(t, resource.MustParse("100m"), p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU])
	assert.Equal(t, corev1.PullIfNotPresent, p.Spec.Containers[0].ImagePullPolicy)
	assert.EqualValues(t, 30, *p.Spec.TerminationGracePeriodSeconds)

	// Only images (and a few other fields) may change.
	p.Spec.Containers[0].Image = "registry.example/app:v2"
	p, err = pods.Update(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	p.Spec.Containers[0].Name = "renamed"
	_, err = pods.Update(ctx, p, metav1.UpdateOptions{})
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	assert.Contains(t, err.Error(), "pod updates may not change fields other than")

	// The kubelet's view arrives through /status.
	p, err = pods.Get(ctx, "scheduled", metav1.GetOptions{})
	require.NoError(t, err)
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP = "10.244.0.7"
	_, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	running, err := pods.List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Running,spec.nodeName=node-1"})
	require.NoError(t, err)
	require.Len(t, running.Items, 1)

	// A pod on a node is deleted gracefully and waits for its kubelet; an
	// unscheduled one goes at once.
	require.NoError(t, pods.Delete(ctx, "scheduled", metav1.DeleteOptions{}))
	p, err = pods.Get(ctx, "scheduled", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, p.DeletionTimestamp)
	assert.EqualValues(t, 30, *p.DeletionGracePeriodSeconds)
	zero := int64(0)
	require.NoError(t, pods.Delete(ctx, "scheduled", metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	_, err = pods.Get(ctx, "scheduled", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "%v", err)

	_, err = pods.Create(ctx, pod("pending", ""), metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, pods.Delete(ctx, "pending", metav1.DeleteOptions{}))
	_, err = pods.Get(ctx, "pending", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "%v", err)

	bad := pod("bad", "")
	bad.Spec.Containers = append(bad.Spec.Containers, bad.Spec.Containers[0])
	_, err = pods.Create(ctx, bad, metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	assert.Contains(t, err.Error(), `spec.containers[1].name: Duplicate value: "app"`)
}
