package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/component-helpers/resource"
)

// PodResizeValidator is kube-apiserver's plugin of that name (on by
// default in v1.37): a resize (pods/resize) of a pod bound to a node is
// refused when the node is not Linux, or when the pod's new requests are
// more than the node's allocatable, 403 with the cause
// UnsupportedPlatform or NodeCapacity. What fits the allocatable but not
// what the node's other pods leave is the kubelet's to defer.
type PodResizeValidator struct {
	*admission.Handler
	nodes Nodes
}

var _ admission.ValidationInterface = (*PodResizeValidator)(nil)

// NewPodResizeValidator returns the plugin; nodes reads the server's
// nodes.
func NewPodResizeValidator(nodes Nodes) *PodResizeValidator {
	return &PodResizeValidator{Handler: admission.NewHandler(admission.Update), nodes: nodes}
}

// Validate implements admission.ValidationInterface.
func (p *PodResizeValidator) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != corev1.Resource("pods") || a.GetSubresource() != "resize" {
		return nil
	}
	pod, ok := a.GetObject().(*corev1.Pod)
	old, oldOK := a.GetOldObject().(*corev1.Pod)
	if !ok || !oldOK {
		return apierrors.NewBadRequest(fmt.Sprintf("expected a pod but got a %T", a.GetObject()))
	}
	if pod.Spec.NodeName == "" || pod.Generation == old.Generation {
		return nil
	}
	node, err := p.nodes.forPod(ctx, a, pod.Spec.NodeName)
	if err != nil {
		return err
	}
	if os, ok := node.Labels[corev1.LabelOSStable]; ok && os != "linux" {
		return resizeRefused(a, fmt.Errorf("pod resize is only supported on linux nodes, node %q is %q", node.Name, os), "UnsupportedPlatform")
	}
	if err := withinAllocatable(pod, node.Status.Allocatable); err != nil {
		return resizeRefused(a, err, "NodeCapacity")
	}
	return nil
}

// withinAllocatable refuses requests of CPU or memory over allocatable.
func withinAllocatable(pod *corev1.Pod, allocatable corev1.ResourceList) error {
	requests := resource.PodRequests(pod, resource.PodResourcesOptions{})
	cpu, mem := requests[corev1.ResourceCPU], requests[corev1.ResourceMemory]
	var msg []string
	if cpu.Cmp(*allocatable.Cpu()) > 0 {
		msg = append(msg, fmt.Sprintf("cpu, requested: %d, allocatable: %d", cpu.MilliValue(), allocatable.Cpu().MilliValue()))
	}
	if mem.Cmp(*allocatable.Memory()) > 0 {
		msg = append(msg, fmt.Sprintf("memory, requested: %d, allocatable: %d", mem.Value(), allocatable.Memory().Value()))
	}
	if len(msg) > 0 {
		return fmt.Errorf("node didn't have enough allocatable resources: %s", strings.Join(msg, "; "))
	}
	return nil
}

// resizeRefused is a 403 with the cause of type reason.
func resizeRefused(a admission.Attributes, err error, reason metav1.CauseType) error {
	forbidden := admission.NewForbidden(a, err)
	var status *apierrors.StatusError
	if errors.As(forbidden, &status) {
		status.ErrStatus.Details.Causes = append(status.ErrStatus.Details.Causes, metav1.StatusCause{Type: reason})
	}
	return forbidden
}
