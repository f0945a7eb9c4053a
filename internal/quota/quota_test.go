package quota

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
)

func q(s string) resource.Quantity { return resource.MustParse(s) }

// usage renders a resource list as name=quantity strings for comparison
// (an error as the key "error", which no want has).
func usage(l corev1.ResourceList, err error) map[corev1.ResourceName]string {
	if err != nil {
		return map[corev1.ResourceName]string{"error": err.Error()}
	}
	out := map[corev1.ResourceName]string{}
	for k, v := range l {
		out[k] = v.String()
	}
	return out
}

func TestPodUsage(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	p := &pods{clock: clocktesting.NewFakePassiveClock(now)}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{"cpu": q("250m"), "memory": q("64Mi"), "hugepages-2Mi": q("2Mi"), "example.com/gpu": q("1")},
		Limits:   corev1.ResourceList{"cpu": q("500m"), "example.com/gpu": q("1")},
	}}}}}
	assert.Equal(t, map[corev1.ResourceName]string{
		"count/pods": "1", "pods": "1", "cpu": "250m", "requests.cpu": "250m", "limits.cpu": "500m",
		"memory": "64Mi", "requests.memory": "64Mi", "hugepages-2Mi": "2Mi", "requests.hugepages-2Mi": "2Mi",
		"requests.example.com/gpu": "1",
	}, usage(p.Usage(pod)))

	done := pod.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	assert.Equal(t, map[corev1.ResourceName]string{"count/pods": "1"}, usage(p.Usage(done)), "a finished pod is counted, not charged")

	deleted := pod.DeepCopy()
	grace := int64(30)
	deleted.DeletionTimestamp, deleted.DeletionGracePeriodSeconds = &metav1.Time{Time: now.Add(-time.Minute)}, &grace
	assert.Equal(t, map[corev1.ResourceName]string{"count/pods": "1"}, usage(p.Usage(deleted)), "past its grace period")
}

func TestPodScopes(t *testing.T) {
	deadline := int64(10)
	scope := func(name corev1.ResourceQuotaScope, op corev1.ScopeSelectorOperator, values ...string) corev1.ScopedResourceSelectorRequirement {
		return corev1.ScopedResourceSelectorRequirement{ScopeName: name, Operator: op, Values: values}
	}
	bestEffort := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	burstable := &corev1.Pod{Spec: corev1.PodSpec{ActiveDeadlineSeconds: &deadline, PriorityClassName: "high", Containers: []corev1.Container{{Name: "c",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("1")}}}}}}
	for _, tc := range []struct {
		scope      corev1.ScopedResourceSelectorRequirement
		best, burs bool
	}{
		{scope(corev1.ResourceQuotaScopeBestEffort, corev1.ScopeSelectorOpExists), true, false},
		{scope(corev1.ResourceQuotaScopeNotBestEffort, corev1.ScopeSelectorOpExists), false, true},
		{scope(corev1.ResourceQuotaScopeTerminating, corev1.ScopeSelectorOpExists), false, true},
		{scope(corev1.ResourceQuotaScopeNotTerminating, corev1.ScopeSelectorOpExists), true, false},
		{scope(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpExists), false, true},
		{scope(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpIn, "high"), false, true},
		{scope(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpNotIn, "high"), true, false},
		{scope(corev1.ResourceQuotaScopePriorityClass, corev1.ScopeSelectorOpDoesNotExist), true, false},
		{scope(corev1.ResourceQuotaScopeCrossNamespacePodAffinity, corev1.ScopeSelectorOpExists), false, false},
	} {
		for pod, want := range map[*corev1.Pod]bool{bestEffort: tc.best, burstable: tc.burs} {
			got, err := podMatchesScope(tc.scope, runtime.Object(pod))
			require.NoError(t, err)
			assert.Equal(t, want, got, "%s %s %v on %s", tc.scope.ScopeName, tc.scope.Operator, tc.scope.Values, podqosName(pod))
		}
	}
}

func podqosName(p *corev1.Pod) string {
	if bestEffort(p) {
		return "a BestEffort pod"
	}
	return "a Burstable pod"
}

func TestServiceAndClaimUsage(t *testing.T) {
	noAlloc := false
	lb := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, AllocateLoadBalancerNodePorts: &noAlloc,
		Ports: []corev1.ServicePort{{Port: 80, NodePort: 30000}, {Port: 81}}}}
	assert.Equal(t, map[corev1.ResourceName]string{"count/services": "1", "services": "1", "services.loadbalancers": "1", "services.nodeports": "1"},
		usage((&services{}).Usage(lb)))

	gold := "gold"
	pvc := &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &gold,
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{"storage": q("1500m")}}}}
	assert.Equal(t, map[corev1.ResourceName]string{
		"count/persistentvolumeclaims": "1", "persistentvolumeclaims": "1", "requests.storage": "2",
		"gold.storageclass.storage.k8s.io/persistentvolumeclaims": "1", "gold.storageclass.storage.k8s.io/requests.storage": "2",
	}, usage((&claims{}).Usage(pvc)), "storage is rounded up to a whole number")
}

func TestUsageChanged(t *testing.T) {
	pod := &corev1.Pod{}
	done := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}
	assert.True(t, UsageChanged(corev1.Resource("pods"), pod, done))
	assert.False(t, UsageChanged(corev1.Resource("pods"), done, pod), "a pod coming back is charged by admission, not given back")
	np := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort}}
	ip := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}}
	assert.True(t, UsageChanged(corev1.Resource("services"), np, ip))
	assert.False(t, UsageChanged(corev1.Resource("services"), ip, ip.DeepCopy()))
	assert.False(t, UsageChanged(corev1.Resource("configmaps"), &corev1.ConfigMap{}, &corev1.ConfigMap{}))
}
