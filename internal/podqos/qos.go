// Package podqos computes a pod's quality of service class, which the pod
// strategy sets in its status and quota's BestEffort scopes read.
package podqos

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Class computes the pod's quality of service class from its requests
// and limits, as the kubelet and kube-apiserver do.
func Class(p *corev1.Pod) corev1.PodQOSClass {
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

func add(list corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	if cur, ok := list[name]; ok {
		cur.Add(q)
		list[name] = cur
		return
	}
	list[name] = q.DeepCopy()
}
