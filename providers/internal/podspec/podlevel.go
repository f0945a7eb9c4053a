package podspec

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
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
// limit of name.
func everyContainerLimits(p *corev1.Pod, name corev1.ResourceName) bool {
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		if _, ok := c.Resources.Limits[name]; !ok {
			return false
		}
	}
	return true
}
