package controllers

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// SimulatedAnnotation marks a Node object as simulated: the server's
// simulated kubelet keeps it and runs its pods, as kwok does for nodes
// annotated kwok.x-k8s.io/node: fake. Nodes of Options.Nodes carry it; a
// Node a test creates without it is left alone (as a real node whose
// kubelet never reports).
const SimulatedAnnotation = "kubeembed.io/simulated-node"

// Node describes a simulated node. Only Name is required; the rest has
// the defaults documented per field.
type Node struct {
	// Name is the node's name and its kubernetes.io/hostname label.
	Name string
	// Labels are added to the kubelet's well-known ones
	// (kubernetes.io/hostname, kubernetes.io/os, kubernetes.io/arch and
	// their beta forms), as kubelet's --node-labels.
	Labels map[string]string
	// Zone, when not empty, is the node's topology.kubernetes.io/zone
	// label, as a cloud provider sets it.
	Zone string
	// Taints are registered with the node (kubelet's
	// --register-with-taints).
	Taints []corev1.Taint
	// Capacity overrides the default capacity per resource: cpu 4, memory
	// 16Gi, pods 110, ephemeral-storage 100Gi (hugepages 0). Allocatable
	// is capacity less the kubelet's default reservations: 100Mi of
	// memory, 10% of ephemeral storage.
	Capacity corev1.ResourceList
	// Unschedulable registers the node cordoned.
	Unschedulable bool
}

// Nodes returns n simulated nodes of the defaults, named node-0 to
// node-<n-1>.
func Nodes(n int) []Node {
	out := make([]Node, n)
	for i := range out {
		out[i].Name = fmt.Sprintf("node-%d", i)
	}
	return out
}

// DefaultCapacity is a simulated node's capacity where Node.Capacity does
// not say.
func DefaultCapacity() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("4"),
		corev1.ResourceMemory:           resource.MustParse("16Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		"hugepages-1Gi":                 resource.MustParse("0"),
		"hugepages-2Mi":                 resource.MustParse("0"),
	}
}
