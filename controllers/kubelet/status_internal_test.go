package kubelet

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

// A condition another writer added to the pod the patch is diffed against
// (newer than the informer's pod the status came from) is kept, first, as
// the status manager keeps the conditions it does not own; the kubelet's
// own are the status's.
func TestKeepOthers(t *testing.T) {
	t.Parallel()
	target := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByTaintManager"}
	base := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionFalse}, target}}}
	status := corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	got := keepOthers(base, status)
	assert.Equal(t, []corev1.PodCondition{target, {Type: corev1.PodReady, Status: corev1.ConditionTrue}}, got.Conditions)
	assert.Equal(t, corev1.PodRunning, got.Phase)

	// One the status has already is the status's.
	mine := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "TerminationByKubelet"}
	status.Conditions = []corev1.PodCondition{mine}
	assert.Equal(t, []corev1.PodCondition{mine}, keepOthers(base, status).Conditions)
}
