package admission

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/admission"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// topologyLabels are the node labels PodTopologyLabels copies.
var topologyLabels = []string{corev1.LabelTopologyZone, corev1.LabelTopologyRegion}

// PodTopologyLabels is kube-apiserver's PodTopologyLabels plugin (its
// feature PodTopologyLabelsAdmission is on in v1.37): a pod bound to a
// node gets the node's topology.kubernetes.io/zone and region labels,
// overwriting its own. A binding (pods/binding) carries them to the pod;
// a pod created with spec.nodeName gets them at once. A node the server
// does not know (yet) gives none, as upstream.
type PodTopologyLabels struct {
	*admission.Handler
	nodes corev1listers.NodeLister
}

var _ admission.MutationInterface = (*PodTopologyLabels)(nil)

// NewPodTopologyLabels returns the plugin; nodes is the server's node
// lister.
func NewPodTopologyLabels(nodes corev1listers.NodeLister) *PodTopologyLabels {
	return &PodTopologyLabels{Handler: admission.NewHandler(admission.Create), nodes: nodes}
}

// Admit implements admission.MutationInterface.
func (p *PodTopologyLabels) Admit(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != corev1.Resource("pods") {
		return nil
	}
	var (
		node   string
		labels *map[string]string
	)
	switch obj := a.GetObject().(type) {
	case *corev1.Pod:
		if a.GetSubresource() != "" {
			return nil
		}
		node, labels = obj.Spec.NodeName, &obj.Labels
	case *corev1.Binding:
		if a.GetSubresource() != "binding" || obj.Target.Kind != "Node" {
			return nil
		}
		node, labels = obj.Target.Name, &obj.Labels
	default:
		return nil
	}
	if node == "" {
		return nil
	}
	copied, err := p.labelsOf(node)
	if err != nil || len(copied) == 0 {
		return err
	}
	if *labels == nil {
		*labels = map[string]string{}
	}
	maps.Copy(*labels, copied)
	return nil
}

// labelsOf returns the node's topology labels.
func (p *PodTopologyLabels) labelsOf(name string) (map[string]string, error) {
	n, err := p.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return NodeTopologyLabels(n), nil
}

// NodeTopologyLabels returns the labels of n that a pod bound to it gets
// (the simulated scheduler counts its own bindings with them).
func NodeTopologyLabels(n *corev1.Node) map[string]string {
	out := map[string]string{}
	for _, k := range topologyLabels {
		if v, ok := n.Labels[k]; ok {
			out[k] = v
		}
	}
	return out
}
