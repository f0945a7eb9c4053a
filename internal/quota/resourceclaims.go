package quota

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	corev1listers "k8s.io/client-go/listers/core/v1"
	resourcev1listers "k8s.io/client-go/listers/resource/v1"
	"k8s.io/utils/clock"
)

var (
	resourceClaimsResource = resourcev1.Resource("resourceclaims")
	resourceClaimCount     = generic.ObjectCountQuotaResourceNameFor(resourceClaimsResource)
)

// DRA is what the resource claim evaluator reads besides the claims
// themselves, from informers (kube-apiserver's admission and
// kube-controller-manager alike): the device classes, whose extended
// resource names a quota can limit claims by, and the pods and claims
// that tell which claim the scheduler made for a pod's extended resources
// (the pod is charged for those already). A nil lister reads as empty.
type DRA struct {
	Classes resourcev1listers.DeviceClassLister
	Pods    corev1listers.PodLister
	Claims  resourcev1listers.ResourceClaimLister
}

// resourceClaims evaluates DRA resource claims: a count, and the devices
// each requests per device class (<class>.deviceclass.resource.k8s.io/devices),
// also as the class's extended resources (requests.<extended resource>,
// requests.deviceclass.resource.kubernetes.io/<class>). Claims have no
// scopes.
type resourceClaims struct {
	list  generic.ListFuncByNamespace
	dra   DRA
	clock clock.PassiveClock
}

var _ quota.Evaluator = &resourceClaims{}

func (*resourceClaims) GroupResource() schema.GroupResource { return resourceClaimsResource }

func (*resourceClaims) Constraints([]corev1.ResourceName, runtime.Object) error { return nil }

// Handles: claims are charged when written (their spec is immutable, and
// their status changes nothing they use).
func (*resourceClaims) Handles(a admission.Attributes) bool {
	return a.GetSubresource() == "" && (a.GetOperation() == admission.Create || a.GetOperation() == admission.Update)
}

func (r *resourceClaims) Matches(q *corev1.ResourceQuota, item runtime.Object) (bool, error) {
	return generic.Matches(q, item, r.MatchingResources, generic.MatchesNoScopeFunc)
}

func (*resourceClaims) MatchingScopes(runtime.Object, []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return []corev1.ScopedResourceSelectorRequirement{}, nil
}

func (*resourceClaims) UncoveredQuotaScopes(_, _ []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return []corev1.ScopedResourceSelectorRequirement{}, nil
}

// MatchingResources are the count, the devices of any class, and the
// extended resource requests of the device classes that exist (their
// implicit requests.deviceclass.resource.kubernetes.io/<class> and the
// requests.<name> of the extended resource a class names).
func (r *resourceClaims) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	out := []corev1.ResourceName{}
	for _, name := range input {
		switch {
		case name == resourceClaimCount || strings.HasSuffix(string(name), corev1.ResourceClaimsPerClass):
			out = append(out, name)
		case strings.HasPrefix(string(name), corev1.ResourceImplicitExtendedClaimsPerClass) &&
			r.extendedResource(strings.TrimPrefix(string(name), corev1.ResourceImplicitExtendedClaimsPerClass)) != "":
			out = append(out, name)
		case extendedRequest(name) && r.classExists(corev1.ResourceName(strings.TrimPrefix(string(name), corev1.DefaultResourceRequestsPrefix))):
			out = append(out, name)
		}
	}
	return out
}

// Usage is one claim and the devices it may be allocated per device class:
// a request's count (32, the most an allocation holds, for all devices),
// or of a prioritized list the most any of its choices takes of a class.
// The devices count as the class's extended resources too, less what the
// pod a claim was made for is charged for them.
func (r *resourceClaims) Usage(item runtime.Object) (corev1.ResourceList, error) {
	claim, ok := item.(*resourcev1.ResourceClaim)
	if !ok {
		return corev1.ResourceList{}, fmt.Errorf("expect %T, got %T", &resourcev1.ResourceClaim{}, item)
	}
	out := corev1.ResourceList{resourceClaimCount: *resource.NewQuantity(1, resource.DecimalSI)}
	add := func(class string, n int64) {
		name := corev1.ResourceName(class + corev1.ResourceClaimsPerClass)
		q := out[name]
		q.Add(*resource.NewQuantity(n, resource.DecimalSI))
		out[name] = q
	}
	for _, req := range claim.Spec.Devices.Requests {
		switch {
		case len(req.FirstAvailable) > 0:
			most := map[string]int64{}
			for _, sub := range req.FirstAvailable {
				if n := devices(sub.AllocationMode, sub.Count); n > most[sub.DeviceClassName] {
					most[sub.DeviceClassName] = n
				}
			}
			for class, n := range most {
				add(class, n)
			}
		case req.Exactly != nil:
			add(req.Exactly.DeviceClassName, devices(req.Exactly.AllocationMode, req.Exactly.Count))
		}
	}
	r.addExtendedResources(out, r.podUsage(claim))
	return out, nil
}

// devices is how many devices a request of mode may be allocated; none of
// a mode this version does not know.
func devices(mode resourcev1.DeviceAllocationMode, count int64) int64 {
	switch mode {
	case resourcev1.DeviceAllocationModeExactCount:
		return count
	case resourcev1.DeviceAllocationModeAll:
		return resourcev1.AllocationResultsMaxSize
	}
	return 0
}

func (r *resourceClaims) UsageStats(options quota.UsageStatsOptions) (quota.UsageStats, error) {
	return generic.CalculateUsageStats(options, r.list, generic.MatchesNoScopeFunc, r.Usage)
}

// addExtendedResources charges each class's devices as its implicit
// extended resource and the one it names, less what pod (the pod the
// claim was made for, or nil) is charged for them.
func (r *resourceClaims) addExtendedResources(out, pod corev1.ResourceList) {
	extended := corev1.ResourceList{}
	for name, q := range out {
		class, ok := strings.CutSuffix(string(name), corev1.ResourceClaimsPerClass)
		if !ok || class == "" {
			continue
		}
		extended[corev1.ResourceName(corev1.ResourceImplicitExtendedClaimsPerClass+class)] = q
		if er := r.extendedResource(class); er != "" {
			extended[corev1.ResourceName(corev1.DefaultResourceRequestsPrefix+er)] = q
		}
	}
	for name, q := range extended {
		if charged, ok := pod[name]; ok {
			q.Sub(charged)
		}
		if q.CmpInt64(0) > 0 {
			out[name] = q
		}
	}
}

// extendedResource is the extended resource a device class names, if it
// exists and names one.
func (r *resourceClaims) extendedResource(class string) string {
	if r.dra.Classes == nil {
		return ""
	}
	c, err := r.dra.Classes.Get(class)
	if err != nil || c.Spec.ExtendedResourceName == nil {
		return ""
	}
	return *c.Spec.ExtendedResourceName
}

// classExists: a device class answers to the extended resource name, its
// implicit deviceclass.resource.kubernetes.io/<class> or the one it names.
func (r *resourceClaims) classExists(name corev1.ResourceName) bool {
	if r.dra.Classes == nil {
		return false
	}
	if class, ok := strings.CutPrefix(string(name), resourcev1.ResourceDeviceClassPrefix); ok {
		_, err := r.dra.Classes.Get(class)
		return err == nil
	}
	all, err := r.dra.Classes.List(labels.Everything())
	if err != nil {
		return false
	}
	for _, c := range all {
		if c.Spec.ExtendedResourceName != nil && *c.Spec.ExtendedResourceName == string(name) {
			return true
		}
	}
	return false
}

// podUsage is what the pod that claim was made for is charged, when claim
// is the one the scheduler makes for a pod's extended resources backed by
// devices (and the pod's first such claim); nil otherwise. The pod is
// charged for those extended resources already.
func (r *resourceClaims) podUsage(claim *resourcev1.ResourceClaim) corev1.ResourceList {
	owner := podOwner(claim)
	if owner == nil || r.dra.Pods == nil {
		return nil
	}
	pod, err := r.dra.Pods.Pods(claim.Namespace).Get(owner.Name)
	if err != nil || pod.UID != owner.UID {
		return nil
	}
	if s := pod.Status.ExtendedResourceClaimStatus; s != nil && s.ResourceClaimName != claim.Name {
		return nil
	}
	if pod.Status.ExtendedResourceClaimStatus == nil && !r.firstOfPod(claim, owner) {
		return nil
	}
	usage, err := (&pods{clock: r.clock}).Usage(pod)
	if err != nil {
		return nil
	}
	return usage
}

// firstOfPod: no other extended resource claim of the pod was created
// before claim (nor at the same time under an earlier name).
func (r *resourceClaims) firstOfPod(claim *resourcev1.ResourceClaim, owner *metav1.OwnerReference) bool {
	if r.dra.Claims == nil {
		return false
	}
	all, err := r.dra.Claims.ResourceClaims(claim.Namespace).List(labels.Everything())
	if err != nil {
		return false
	}
	for _, other := range all {
		if o := podOwner(other); o == nil || o.UID != owner.UID {
			continue
		}
		switch other.CreationTimestamp.Compare(claim.CreationTimestamp.Time) {
		case -1:
			return false
		case 0:
			if other.Name < claim.Name {
				return false
			}
		}
	}
	return true
}

// podOwner is the pod controlling an extended resource claim (one the
// scheduler made, annotated so); nil for other claims.
func podOwner(claim *resourcev1.ResourceClaim) *metav1.OwnerReference {
	if claim.Annotations[resourcev1.ExtendedResourceClaimAnnotation] != "true" {
		return nil
	}
	ref := metav1.GetControllerOfNoCopy(claim)
	if ref == nil || ref.Kind != "Pod" || ref.APIVersion != "v1" {
		return nil
	}
	return ref
}
