package ephemeralvolume_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// start starts a server whose pods run and whose claims get volumes (of
// the default class, standard, WaitForFirstConsumer), with the ephemeral
// volume controller.
func start(t *testing.T) (*apiserver.Server, kubernetes.Interface) {
	t.Helper()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Nodes: controllers.Nodes(1),
		Controllers: []controllers.Name{controllers.ServiceAccount, controllers.Kubelet, controllers.Scheduler, controllers.NodeLifecycle, controllers.GarbageCollector,
			controllers.PersistentVolumeBinder, controllers.VolumeProvisioner, controllers.PVCProtection, controllers.PVProtection,
			controllers.EphemeralVolume}}))
	client, err := srv.Clientset()
	require.NoError(t, err)
	return srv, client
}

// podWithScratch is a pod "db" with a generic ephemeral volume "scratch".
func podWithScratch() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "postgres:17"}},
		Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
			VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"tier": "db"}, Annotations: map[string]string{"backup": "no"}},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
			}}}}}}}
}

func TestEphemeralVolumeClaimFollowsItsPod(t *testing.T) {
	t.Parallel()
	srv, client := start(t)
	ctx := t.Context()
	pod, err := client.CoreV1().Pods("default").Create(ctx, podWithScratch(), metav1.CreateOptions{})
	require.NoError(t, err)
	// Defaulted as a claim's spec, as kube-apiserver does.
	assert.Equal(t, new(corev1.PersistentVolumeFilesystem), pod.Spec.Volumes[0].Ephemeral.VolumeClaimTemplate.Spec.VolumeMode)
	require.NoError(t, srv.WaitIdle(ctx))

	pvc, err := client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "db-scratch", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "db", UID: pod.UID,
		Controller: new(true), BlockOwnerDeletion: new(true)}}, pvc.OwnerReferences)
	assert.Equal(t, "db", pvc.Labels["tier"])
	assert.Equal(t, "no", pvc.Annotations["backup"])
	assert.Equal(t, corev1.ClaimBound, pvc.Status.Phase)
	assert.True(t, slices.ContainsFunc(pvc.ManagedFields, func(f metav1.ManagedFieldsEntry) bool {
		return f.Manager == "kube-controller-manager" && f.Operation == metav1.ManagedFieldsOperationUpdate
	}), "created by kube-controller-manager: %v", pvc.ManagedFields)
	running, err := client.CoreV1().Pods("default").Get(ctx, "db", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.PodRunning, running.Status.Phase)

	// The claim is made again while its pod lives.
	require.NoError(t, client.CoreV1().PersistentVolumeClaims("default").Delete(ctx, "db-scratch", metav1.DeleteOptions{}))
	require.NoError(t, srv.WaitIdle(ctx))
	again, err := client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "db-scratch", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, pvc.UID, again.UID, "the claim in use is kept (pvc-protection), not made again")
	assert.NotNil(t, again.DeletionTimestamp)

	// Deleting the pod collects its claim.
	require.NoError(t, client.CoreV1().Pods("default").Delete(ctx, "db", metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}))
	require.NoError(t, srv.WaitIdle(ctx))
	_, err = client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "db-scratch", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "claim after its pod is deleted: %v", err)
}

func TestClaimThePodDoesNotOwnIsLeftAlone(t *testing.T) {
	t.Parallel()
	srv, client := start(t)
	ctx := t.Context()
	theirs := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "db-scratch"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}}}}
	theirs, err := client.CoreV1().PersistentVolumeClaims("default").Create(ctx, theirs, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.CoreV1().Pods("default").Create(ctx, podWithScratch(), metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, srv.WaitIdle(ctx))

	const notOwner = "PVC default/db-scratch was not created for pod default/db (pod is not owner)"
	pod, err := client.CoreV1().Pods("default").Get(ctx, "db", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, pod.Status.Conditions, 1)
	// ". not found": kube-scheduler v1.37.2's, whose dynamic resources
	// plugin finds no state of the PreFilter that did not run.
	assert.Equal(t, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/1 nodes are available: " + notOwner + ". not found", ObservedGeneration: 1,
		LastTransitionTime: pod.Status.Conditions[0].LastTransitionTime}, pod.Status.Conditions[0])
	events, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("reason", "FailedBinding").String()})
	require.NoError(t, err)
	require.NotEmpty(t, events.Items)
	e := events.Items[0]
	assert.Equal(t, corev1.EventTypeWarning, e.Type)
	assert.Equal(t, "ephemeral volume scratch: "+notOwner, e.Message)
	assert.Equal(t, corev1.EventSource{Component: "ephemeral_volume"}, e.Source)
	assert.Equal(t, corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "db", UID: pod.UID, APIVersion: "v1",
		ResourceVersion: e.InvolvedObject.ResourceVersion}, e.InvolvedObject)
	kept, err := client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "db-scratch", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, theirs.UID, kept.UID)
	assert.Empty(t, kept.OwnerReferences)

	// Once it is gone, the pod's own is made and the pod runs.
	require.NoError(t, client.CoreV1().PersistentVolumeClaims("default").Delete(ctx, "db-scratch", metav1.DeleteOptions{}))
	require.NoError(t, srv.WaitIdle(ctx))
	own, err := client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "db-scratch", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, pod.UID, own.OwnerReferences[0].UID)
	pod, err = client.CoreV1().Pods("default").Get(ctx, "db", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.PodRunning, pod.Status.Phase)
}
