package admission

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/admission"
	ndf "k8s.io/component-helpers/nodedeclaredfeatures"

	"github.com/kubeembed/apiserver/internal/nodefeatures"
)

// NodeDeclaredFeatureValidator is kube-apiserver's plugin of that name (on
// by default in v1.37, NodeDeclaredFeatures being GA): an update of a
// bound pod, its spec's or a resize, that needs a feature its node does
// not declare in status.declaredFeatures (a pod-level resize on a node
// whose kubelet cannot do it) is refused, 403. Its ResourceSlice check is
// for DRANodeAllocatableResources, off in v1.37.
type NodeDeclaredFeatureValidator struct {
	*admission.Handler
	nodes Nodes
}

var _ admission.ValidationInterface = (*NodeDeclaredFeatureValidator)(nil)

// NewNodeDeclaredFeatureValidator returns the plugin; nodes reads the
// server's nodes.
func NewNodeDeclaredFeatureValidator(nodes Nodes) *NodeDeclaredFeatureValidator {
	return &NodeDeclaredFeatureValidator{Handler: admission.NewHandler(admission.Create, admission.Update), nodes: nodes}
}

// Validate implements admission.ValidationInterface.
func (p *NodeDeclaredFeatureValidator) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != corev1.Resource("pods") || a.GetOperation() != admission.Update {
		return nil
	}
	if sub := a.GetSubresource(); sub != "" && sub != "resize" {
		return nil
	}
	pod, ok := a.GetObject().(*corev1.Pod)
	if !ok {
		return apierrors.NewBadRequest(fmt.Sprintf("expected a pod but got a %T", a.GetObject()))
	}
	if pod.Spec.NodeName == "" {
		return nil
	}
	old, ok := a.GetOldObject().(*corev1.Pod)
	if !ok {
		return apierrors.NewBadRequest(fmt.Sprintf("expected an old pod but got a %T", a.GetOldObject()))
	}
	if old.Generation == pod.Generation {
		return nil // the spec did not change
	}
	return p.validateUpdate(ctx, a, pod, old)
}

// validateUpdate refuses the update if pod's node lacks a feature the
// change from old needs.
func (p *NodeDeclaredFeatureValidator) validateUpdate(ctx context.Context, a admission.Attributes, pod, old *corev1.Pod) error {
	reqs, err := ndf.DefaultFramework.InferForPodUpdate(&ndf.PodInfo{Spec: &old.Spec, Status: &old.Status},
		&ndf.PodInfo{Spec: &pod.Spec, Status: &pod.Status}, nodefeatures.Version())
	if err != nil {
		return admission.NewForbidden(a, fmt.Errorf("failed to infer pod capability requirements: %w", err))
	}
	if reqs.IsEmpty() {
		return nil
	}
	node, err := p.nodes.forPod(ctx, a, pod.Spec.NodeName)
	if err != nil {
		return err
	}
	result, err := ndf.DefaultFramework.MatchNode(reqs, node)
	if err != nil {
		return admission.NewForbidden(a, fmt.Errorf("failed to match pod requirements against node %q: %w", node.Name, err))
	}
	if !result.IsMatch {
		return admission.NewForbidden(a, fmt.Errorf("pod update requires features %s which are not available on node %q",
			strings.Join(result.UnsatisfiedRequirements, ", "), node.Name))
	}
	return nil
}
