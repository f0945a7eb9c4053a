package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func readyPod(status corev1.ConditionStatus, since time.Time) *corev1.Pod {
	return &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Time{Time: since}},
	}}}
}

// A pod is available once it has been ready for minReadySeconds, the
// instant included (upstream's IsPodAvailable compares with <=).
func TestPodAvailable(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	for _, c := range []struct {
		name     string
		pod      *corev1.Pod
		minReady int32
		want     bool
	}{
		{"no conditions", &corev1.Pod{}, 0, false},
		{"not ready", readyPod(corev1.ConditionFalse, now.Add(-time.Hour)), 0, false},
		{"ready, no minReady", readyPod(corev1.ConditionTrue, now), 0, true},
		{"ready for minReady", readyPod(corev1.ConditionTrue, now.Add(-5*time.Second)), 5, true},
		{"ready for less", readyPod(corev1.ConditionTrue, now.Add(-4*time.Second)), 5, false},
		{"ready, no time", readyPod(corev1.ConditionTrue, time.Time{}), 5, false},
	} {
		assert.Equal(t, c.want, PodAvailable(c.pod, c.minReady, now), c.name)
	}
}

// NextAvailable is measured from the sync's now and the current time.
func TestNextAvailable(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	pods := []*corev1.Pod{
		readyPod(corev1.ConditionTrue, now.Add(-12*time.Second)), // available already
		readyPod(corev1.ConditionTrue, now.Add(-3*time.Second)),  // in 7 s
		readyPod(corev1.ConditionTrue, now.Add(-1*time.Second)),  // in 9 s
		readyPod(corev1.ConditionFalse, now),
	}
	assert.Equal(t, 7*time.Second, NextAvailable(pods, 10, now, now))
	assert.Equal(t, 5*time.Second, NextAvailable(pods, 10, now, now.Add(2*time.Second)))
	assert.Equal(t, time.Duration(0), NextAvailable(pods, 10, now, now.Add(time.Minute)))
	assert.Equal(t, 10*time.Second, NextAvailable(pods[3:], 10, now, now), "none waiting")
}
