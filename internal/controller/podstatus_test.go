package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A condition of a type already there replaces it, keeping its transition
// time when its status is the same; the same condition again changes
// nothing; a new one is added, transitioning now.
func TestUpdatePodCondition(t *testing.T) {
	t.Parallel()
	then, now := metav1.NewTime(time.Unix(1000, 0)), metav1.NewTime(time.Unix(2000, 0))
	status := &corev1.PodStatus{Conditions: []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: then},
		{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "Old", LastTransitionTime: then}}}
	target := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByPodGC"}
	assert.True(t, UpdatePodCondition(status, target, now))
	require.Len(t, status.Conditions, 2)
	assert.Equal(t, "DeletionByPodGC", status.Conditions[1].Reason)
	assert.Equal(t, then, status.Conditions[1].LastTransitionTime)
	assert.False(t, UpdatePodCondition(status, target, now), "the same condition again")
	target.ObservedGeneration = 2
	assert.False(t, UpdatePodCondition(status, target, now), "its observed generation is not compared, as upstream's")

	target.Status = corev1.ConditionFalse
	assert.True(t, UpdatePodCondition(status, target, now))
	assert.Equal(t, now, status.Conditions[1].LastTransitionTime)

	status = &corev1.PodStatus{}
	assert.True(t, UpdatePodCondition(status, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}, now))
	require.Len(t, status.Conditions, 1)
	assert.Equal(t, now, status.Conditions[0].LastTransitionTime)
}
