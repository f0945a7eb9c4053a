package scheduler

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	helpers "k8s.io/component-helpers/resource"
)

func placedPod(uid types.UID, rv string, status ...corev1.ContainerStatus) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: uid, ResourceVersion: rv, Generation: 1},
		Spec: corev1.PodSpec{NodeName: "a", Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
		Status: corev1.PodStatus{ContainerStatuses: status}}
}

// A relist can show another pod of the name, as new as the first (the
// same generation), as an update: it is counted as a change.
func TestPlacedChangedByAnotherPodOfTheName(t *testing.T) {
	s := &Scheduler{requests: newRequestCache()}
	old, cur := placedPod("u1", "1"), placedPod("u2", "2")
	cur.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
	assert.True(t, s.placedChanged(old, cur))
	assert.False(t, s.placedChanged(old, placedPod("u1", "2")), "a status write")
}

// What the requests read of a status is what PodRequests reads: the first
// status of a container's name, one that reports nothing read as none.
func TestStatusRequestsAsPodRequestsReadsThem(t *testing.T) {
	allocated := corev1.ContainerStatus{Name: "c", AllocatedResources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
	cases := []struct {
		name string
		a, b *corev1.Pod
	}{
		{"no status, then one reporting nothing", placedPod("u", "1"), placedPod("u", "2", corev1.ContainerStatus{Name: "c"})},
		{"one reporting nothing first, then none", placedPod("u", "1", corev1.ContainerStatus{Name: "c"}, allocated), placedPod("u", "2", allocated)},
		{"allocated, then the same", placedPod("u", "1", allocated), placedPod("u", "2", allocated)},
		{"another container's status", placedPod("u", "1"), placedPod("u", "2", corev1.ContainerStatus{Name: "x", AllocatedResources: allocated.AllocatedResources})},
	}
	opts := helpers.PodResourcesOptions{UseStatusResources: true}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ra, rb := helpers.PodRequests(c.a, opts), helpers.PodRequests(c.b, opts)
			want := ra.Cpu().Equal(*rb.Cpu())
			assert.Equal(t, want, sameStatusRequests(c.a, c.b))
		})
	}
}
