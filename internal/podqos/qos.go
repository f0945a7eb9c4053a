// Package podqos computes a pod's quality of service class, which the pod
// strategy sets in its status and quota's BestEffort scopes read.
package podqos

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// Class computes the pod's quality of service class from its requests
// and limits, as the kubelet and kube-apiserver do.
func Class(p *corev1.Pod) corev1.PodQOSClass {
	if resourcehelper.IsPodLevelResourcesSet(p) {
		// Pod-level resources, when set, decide (PodLevelResources and
		// PodLevelResourcesFixKubeletQOSClass, on in v1.37).
		return requirementsClass(p.Spec.Resources)
	}
	requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
	guaranteed := true
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		for name, q := range c.Resources.Requests {
			if name == corev1.ResourceCPU || name == corev1.ResourceMemory {
				if !q.IsZero() {
					add(requests, name, q)
				}
			}
		}
		seen := map[corev1.ResourceName]bool{}
		for name, q := range c.Resources.Limits {
			if name == corev1.ResourceCPU || name == corev1.ResourceMemory {
				if !q.IsZero() {
					seen[name] = true
					add(limits, name, q)
				}
			}
		}
		if !seen[corev1.ResourceCPU] || !seen[corev1.ResourceMemory] {
			guaranteed = false
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	if guaranteed {
		for name, r := range requests {
			if l, ok := limits[name]; !ok || l.Cmp(r) != 0 {
				guaranteed = false
			}
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

// requirementsClass is the class of one set of requirements: BestEffort
// when cpu and memory have neither request nor limit, Guaranteed when
// both have equal non-zero ones, else Burstable.
func requirementsClass(r *corev1.ResourceRequirements) corev1.PodQOSClass {
	var class corev1.PodQOSClass
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, limit := r.Requests[name], r.Limits[name]
		this := corev1.PodQOSGuaranteed
		switch {
		case !req.Equal(limit):
			return corev1.PodQOSBurstable
		case req.IsZero():
			this = corev1.PodQOSBestEffort
		}
		if class != "" && class != this {
			return corev1.PodQOSBurstable
		}
		class = this
	}
	return class
}

func add(list corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	if cur, ok := list[name]; ok {
		cur.Add(q)
		list[name] = cur
		return
	}
	list[name] = q.DeepCopy()
}
