package podspec

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/kubeembed/apiserver/providers/internal/validation"
)

// DefaultPodLevelResources completes a pod's pod-level resources from its
// containers', as kube-apiserver v1.37 does when a pod is created or
// resized with any (PodLevelResourcesFixDefaulting): hugepage limits the
// containers add up to, requests of cpu and memory from what the
// containers request (else from the pod-level limit), and limits of the
// requested resources every container limits, never below the pod-level
// request. A pod without pod-level resources is left alone.
func DefaultPodLevelResources(p *corev1.Pod) {
	r := p.Spec.Resources
	if r == nil || len(r.Requests) == 0 && len(r.Limits) == 0 {
		return
	}
	containers := &corev1.Pod{Spec: corev1.PodSpec{Containers: p.Spec.Containers, InitContainers: p.Spec.InitContainers}}
	limits := resourcehelper.AggregateContainerLimits(containers, resourcehelper.PodResourcesOptions{})
	for name, q := range limits {
		_, requested := r.Requests[name]
		if _, limited := r.Limits[name]; hugePages(name) && !requested && !limited {
			r.Limits = set(r.Limits, name, q)
		}
	}
	for name, q := range resourcehelper.AggregateContainerRequests(containers, resourcehelper.PodResourcesOptions{}) {
		if _, ok := r.Requests[name]; !ok && resourcehelper.IsSupportedPodLevelResource(name) && !hugePages(name) {
			r.Requests = set(r.Requests, name, q)
		}
	}
	for name, q := range r.Limits {
		if _, ok := r.Requests[name]; !ok && resourcehelper.IsSupportedPodLevelResource(name) {
			r.Requests = set(r.Requests, name, q)
		}
	}
	for name, req := range r.Requests {
		if _, ok := r.Limits[name]; ok || !resourcehelper.IsSupportedPodLevelResource(name) || !everyContainerLimits(p, name) {
			continue
		}
		if limit, ok := limits[name]; ok {
			if req.Cmp(limit) > 0 {
				limit = req
			}
			r.Limits = set(r.Limits, name, limit)
		}
	}
}

func hugePages(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// set is list with q as name's, list made if nil.
func set(list corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) corev1.ResourceList {
	if list == nil {
		list = corev1.ResourceList{}
	}
	list[name] = q.DeepCopy()
	return list
}

// everyContainerLimits: every container, init and sidecar ones too, has a
// limit of name; never with an ephemeral container, which has none.
func everyContainerLimits(p *corev1.Pod, name corev1.ResourceName) bool {
	if len(p.Spec.EphemeralContainers) > 0 {
		return false
	}
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		if _, ok := c.Resources.Limits[name]; !ok {
			return false
		}
	}
	return true
}

// validatePodLevel checks a spec's pod-level resources as kube-apiserver
// v1.37 does (PodLevelResources): not on a Windows pod, no claims, only
// cpu, memory and hugepages, requests within limits, requests covering
// what the containers request and limits covering each container's.
func validatePodLevel(s *corev1.PodSpec, claims sets.Set[string], p *field.Path) field.ErrorList {
	r := s.Resources
	if r == nil {
		return nil
	}
	path := p.Child("resources")
	if s.OS != nil && s.OS.Name == corev1.Windows {
		return field.ErrorList{field.Forbidden(path, "may not be set for a windows pod")}
	}
	var errs field.ErrorList
	if r.Claims != nil {
		errs = append(errs, field.Forbidden(path.Child("claims"), "claims may not be set for Resources at pod-level"))
		errs = append(errs, validateClaimNames(r.Claims, claims, path.Child("claims"))...)
	}
	errs = append(errs, validateRequirements(r, podResourceName, path)...)
	return append(errs, validatePodLevelConsistency(s, path)...)
}

// overcommitAllowed: a native resource other than hugepages, whose request
// may be below its limit.
func overcommitAllowed(name corev1.ResourceName) bool {
	return validation.NativeResource(name) && !hugePages(name)
}

// validatePodLevelConsistency: pod-level requests cover what the
// containers request together, hugepage limits what they limit together,
// and a container's limit is within the pod's.
func validatePodLevelConsistency(s *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	pod := &corev1.Pod{Spec: *s}
	requests := resourcehelper.AggregateContainerRequests(pod, resourcehelper.PodResourcesOptions{})
	for _, name := range slices.Sorted(maps.Keys(requests)) {
		sum := requests[name]
		if q, ok := s.Resources.Requests[name]; ok && sum.Cmp(q) > 0 {
			errs = append(errs, field.Invalid(path.Child("requests").Key(string(name)), q.String(),
				fmt.Sprintf("must be greater than or equal to aggregate container requests of %s", sum.String())))
		}
	}
	limits := resourcehelper.AggregateContainerLimits(pod, resourcehelper.PodResourcesOptions{})
	for _, name := range slices.Sorted(maps.Keys(limits)) {
		sum := limits[name]
		if q, ok := s.Resources.Limits[name]; ok && hugePages(name) && sum.Cmp(q) > 0 {
			errs = append(errs, field.Invalid(path.Child("limits").Key(string(name)), q.String(),
				fmt.Sprintf("must be greater than or equal to aggregate container limits of %s", sum.String())))
		}
	}
	for i, c := range s.Containers {
		for _, name := range slices.Sorted(maps.Keys(c.Resources.Limits)) {
			limit := c.Resources.Limits[name]
			if q, ok := s.Resources.Limits[name]; ok && limit.Cmp(q) > 0 {
				errs = append(errs, field.Invalid(path.Child("containers").Index(i).Key(string(name)).Child("limits"),
					limit.String(), fmt.Sprintf("must be less than or equal to pod limits of %s", q.String())))
			}
		}
	}
	return errs
}

// standardResources are the standard resource names (k8s.io/kubernetes'
// helper.IsStandardResourceName, hugepages aside).
var standardResources = sets.New[corev1.ResourceName](
	corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage,
	corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceRequestsEphemeralStorage,
	corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourceLimitsEphemeralStorage,
	corev1.ResourcePods, corev1.ResourceQuotas, corev1.ResourceServices, corev1.ResourceReplicationControllers,
	corev1.ResourceSecrets, corev1.ResourceConfigMaps, corev1.ResourcePersistentVolumeClaims, corev1.ResourceStorage,
	corev1.ResourceRequestsStorage, corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers,
)
