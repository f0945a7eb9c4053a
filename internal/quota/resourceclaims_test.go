package quota

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"
	corev1listers "k8s.io/client-go/listers/core/v1"
	resourcev1listers "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

// draOf is a DRA whose listers hold objs.
func draOf(t *testing.T, objs ...any) DRA {
	t.Helper()
	classes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	claims := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		switch o.(type) {
		case *resourcev1.DeviceClass:
			require.NoError(t, classes.Add(o))
		case *corev1.Pod:
			require.NoError(t, pods.Add(o))
		case *resourcev1.ResourceClaim:
			require.NoError(t, claims.Add(o))
		}
	}
	return DRA{Classes: resourcev1listers.NewDeviceClassLister(classes), Pods: corev1listers.NewPodLister(pods),
		Claims: resourcev1listers.NewResourceClaimLister(claims)}
}

func deviceClass(name, extended string) *resourcev1.DeviceClass {
	c := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if extended != "" {
		c.Spec.ExtendedResourceName = &extended
	}
	return c
}

func exactly(name, class string, mode resourcev1.DeviceAllocationMode, count int64) resourcev1.DeviceRequest {
	return resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: mode, Count: count}}
}

func TestResourceClaimUsage(t *testing.T) {
	r := &resourceClaims{dra: draOf(t, deviceClass("gpu", "example.com/gpu"), deviceClass("fpga", "")), clock: clocktesting.NewFakePassiveClock(time.Now())}
	claim := &resourcev1.ResourceClaim{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
		exactly("a", "gpu", resourcev1.DeviceAllocationModeExactCount, 2),
		{Name: "b", FirstAvailable: []resourcev1.DeviceSubRequest{
			{Name: "one", DeviceClassName: "gpu", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1},
			{Name: "three", DeviceClassName: "gpu", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 3},
			{Name: "all", DeviceClassName: "fpga", AllocationMode: resourcev1.DeviceAllocationModeAll},
		}},
		exactly("c", "nic", "Future", 1),
	}}}}
	assert.Equal(t, map[corev1.ResourceName]string{
		"count/resourceclaims.resource.k8s.io":    "1",
		"gpu.deviceclass.resource.k8s.io/devices": "5", "fpga.deviceclass.resource.k8s.io/devices": "32",
		"nic.deviceclass.resource.k8s.io/devices":         "0",
		"requests.deviceclass.resource.kubernetes.io/gpu": "5", "requests.example.com/gpu": "5",
		"requests.deviceclass.resource.kubernetes.io/fpga": "32",
	}, usage(r.Usage(claim)), "a prioritized list counts the most it takes of each class; All counts 32; an unknown mode none")
}

func TestResourceClaimMatchingResources(t *testing.T) {
	r := &resourceClaims{dra: draOf(t, deviceClass("gpu", "example.com/gpu"), deviceClass("fpga", ""))}
	assert.Equal(t, []corev1.ResourceName{
		"count/resourceclaims.resource.k8s.io", "any.deviceclass.resource.k8s.io/devices",
		"requests.deviceclass.resource.kubernetes.io/gpu", "requests.deviceclass.resource.kubernetes.io/fpga", "requests.example.com/gpu",
	}, r.MatchingResources([]corev1.ResourceName{
		"count/resourceclaims.resource.k8s.io", "any.deviceclass.resource.k8s.io/devices",
		"requests.deviceclass.resource.kubernetes.io/gpu", "requests.deviceclass.resource.kubernetes.io/fpga",
		"requests.deviceclass.resource.kubernetes.io/none", "requests.example.com/gpu", "requests.example.com/other",
		"requests.cpu", "pods", "count/resourceclaimtemplates.resource.k8s.io",
	}))
	assert.Empty(t, (&resourceClaims{}).MatchingResources([]corev1.ResourceName{"requests.example.com/gpu"}), "no device classes known")
}

// TestResourceClaimOfPodsExtendedResources: the claim the scheduler makes
// for a pod's extended resources is charged only for what the pod is not.
func TestResourceClaimOfPodsExtendedResources(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: types.UID("uid")},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"example.com/gpu": q("2")}, Limits: corev1.ResourceList{"example.com/gpu": q("2")}}}}}}
	yes := true
	owned := func(name string, created time.Time) *resourcev1.ResourceClaim {
		return &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", CreationTimestamp: metav1.NewTime(created),
			Annotations:     map[string]string{resourcev1.ExtendedResourceClaimAnnotation: "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "uid", Controller: &yes}}},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
				exactly("container-0-request-0", "gpu", resourcev1.DeviceAllocationModeExactCount, 3)}}}}
	}
	now := time.Now()
	first, second := owned("first", now), owned("second", now.Add(time.Second))
	r := &resourceClaims{dra: draOf(t, deviceClass("gpu", "example.com/gpu"), pod, first, second), clock: clocktesting.NewFakePassiveClock(now)}
	assert.Equal(t, map[corev1.ResourceName]string{
		"count/resourceclaims.resource.k8s.io": "1", "gpu.deviceclass.resource.k8s.io/devices": "3",
		"requests.deviceclass.resource.kubernetes.io/gpu": "3", "requests.example.com/gpu": "1",
	}, usage(r.Usage(first)), "the pod is charged 2 of the 3")
	assert.Equal(t, "3", usage(r.Usage(second))["requests.example.com/gpu"], "only the pod's first claim")

	delete(first.Annotations, resourcev1.ExtendedResourceClaimAnnotation)
	assert.Equal(t, "3", usage(r.Usage(first))["requests.example.com/gpu"], "a claim not made for the pod's extended resources")
}

func TestResourceClaimHandles(t *testing.T) {
	r := &resourceClaims{}
	assert.False(t, r.Handles(attributes("status", "UPDATE")))
	assert.True(t, r.Handles(attributes("", "CREATE")))
	assert.True(t, r.Handles(attributes("", "UPDATE")))
	assert.False(t, r.Handles(attributes("", "DELETE")))
}

func attributes(subresource string, op admission.Operation) admission.Attributes {
	claim := &resourcev1.ResourceClaim{}
	return admission.NewAttributesRecord(claim, claim.DeepCopy(), resourcev1.SchemeGroupVersion.WithKind("ResourceClaim"), "ns", "c",
		resourcev1.SchemeGroupVersion.WithResource("resourceclaims"), subresource, op, nil, false, nil)
}
