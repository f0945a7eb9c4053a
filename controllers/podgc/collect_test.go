package podgc

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Past the threshold, terminated pods (Succeeded, Failed, or no phase) are
// deleted, evicted ones first, then the oldest, then by name; pending,
// running and unknown ones are not counted.
func TestTerminatedToDelete(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := func(name string, phase corev1.PodPhase, reason string, age time.Duration) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(base.Add(-age))},
			Status: corev1.PodStatus{Phase: phase, Reason: reason}}
	}
	pods := []*corev1.Pod{
		pod("running", corev1.PodRunning, "", 10*time.Hour),
		pod("pending", corev1.PodPending, "", 10*time.Hour),
		pod("unknown", corev1.PodUnknown, "", 10*time.Hour),
		pod("done-new", corev1.PodSucceeded, "", time.Hour),
		pod("done-old", corev1.PodSucceeded, "", 5*time.Hour),
		pod("b-failed", corev1.PodFailed, "", 3*time.Hour),
		pod("a-failed", corev1.PodFailed, "", 3*time.Hour),
		pod("evicted", corev1.PodFailed, "Evicted", time.Minute),
		pod("no-phase", "", "", 2*time.Hour),
	}
	names := func(pods []*corev1.Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Name)
		}
		return out
	}
	assert.Empty(t, terminatedToDelete(pods, 6))
	assert.Equal(t, []string{"evicted"}, names(terminatedToDelete(pods, 5)))
	assert.Equal(t, []string{"evicted", "done-old", "a-failed", "b-failed", "no-phase", "done-new"}, names(terminatedToDelete(pods, 0)))
}
