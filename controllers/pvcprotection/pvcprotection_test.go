package pvcprotection_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/controllers/pvcprotection"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

func TestClaimUsedByScheduledPodIsKept(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	ctx, claims, pods := t.Context(), c.CoreV1().PersistentVolumeClaims("default"), c.CoreV1().Pods("default")
	createClaim(t, c, "used")
	createClaim(t, c, "waited-for")
	apiservertest.WaitIdle(t, srv)
	createPod(t, c, "user", "used", "node-1")
	createPod(t, c, "unscheduled", "waited-for", "")
	apiservertest.WaitIdle(t, srv)

	require.NoError(t, claims.Delete(ctx, "used", metav1.DeleteOptions{}))
	require.NoError(t, claims.Delete(ctx, "waited-for", metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv)
	kept := getClaim(t, c, "used")
	assert.NotNil(t, kept.DeletionTimestamp)
	assert.Equal(t, []string{pvcprotection.Finalizer}, kept.Finalizers)
	_, err := claims.Get(ctx, "waited-for", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "a pod that is not scheduled does not keep its claim: %v", err)

	// Its phase does not matter: a finished pod still holds it.
	pod, err := pods.Get(ctx, "user", metav1.GetOptions{})
	require.NoError(t, err)
	pod.Status.Phase = corev1.PodSucceeded
	_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	assert.NotNil(t, getClaim(t, c, "used").DeletionTimestamp)

	require.NoError(t, pods.Delete(ctx, "user", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	apiservertest.WaitIdle(t, srv)
	_, err = claims.Get(ctx, "used", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the claim goes with its last pod: %v", err)
}

func TestFinalizerIsPutBack(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	createClaim(t, c, "data")
	apiservertest.WaitIdle(t, srv)
	got := getClaim(t, c, "data")
	got.Finalizers = nil
	_, err := c.CoreV1().PersistentVolumeClaims("default").Update(t.Context(), got, metav1.UpdateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	assert.Equal(t, []string{pvcprotection.Finalizer}, getClaim(t, c, "data").Finalizers)
}

func TestUnusedCondition(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	ctx, pods := t.Context(), c.CoreV1().Pods("default")
	createClaim(t, c, "data")
	apiservertest.WaitIdle(t, srv)
	ignoreTime := cmpopts.IgnoreFields(corev1.PersistentVolumeClaimCondition{}, "LastTransitionTime")
	unusedCond := corev1.PersistentVolumeClaimCondition{Type: corev1.PersistentVolumeClaimUnused, Status: corev1.ConditionTrue,
		Reason: "NoPodsUsingPVC", Message: "No pods are currently referencing this PVC"}
	first := unused(t, c, "data")
	assert.Empty(t, cmp.Diff(unusedCond, first, ignoreTime))
	assert.False(t, first.LastTransitionTime.IsZero())

	// Any pod that has not terminated uses it, scheduled or not.
	createPod(t, c, "reader", "data", "")
	apiservertest.WaitIdle(t, srv)
	usedCond := corev1.PersistentVolumeClaimCondition{Type: corev1.PersistentVolumeClaimUnused, Status: corev1.ConditionFalse,
		Reason: "PodUsingPVC", Message: "A pod is currently referencing this PVC"}
	assert.Empty(t, cmp.Diff(usedCond, unused(t, c, "data"), ignoreTime))

	pod, err := pods.Get(ctx, "reader", metav1.GetOptions{})
	require.NoError(t, err)
	pod.Status.Phase = corev1.PodFailed
	_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	assert.Empty(t, cmp.Diff(unusedCond, unused(t, c, "data"), ignoreTime))
	conditions := getClaim(t, c, "data").Status.Conditions
	assert.Len(t, conditions, 1, "one Unused condition, replaced as it flips")
}
