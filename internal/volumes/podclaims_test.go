package volumes

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodClaims(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "pg"}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}}}
	keys, err := PodClaims(pod)
	assert.NoError(t, err)
	assert.Equal(t, []string{"ns/pg", "ns/db-scratch"}, keys)
	assert.Empty(t, ClaimName(pod, &pod.Spec.Volumes[2]))
	keys, err = PodClaims("not a pod")
	assert.NoError(t, err)
	assert.Empty(t, keys)
}
