package core

import (
	"context"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeembed/apiserver/providers/registry"
)

// nodes are cluster-scoped, with /status (which may change labels, as the
// kubelet does); a node is created with its status, as the kubelet
// registers it.
var nodes = registry.Kind[*corev1.Node]{
	GroupVersion: corev1.SchemeGroupVersion, Resource: "nodes", Singular: "node", ShortNames: []string{"no"},
	NewObj:  func() runtime.Object { return &corev1.Node{} },
	NewList: func() runtime.Object { return &corev1.NodeList{} },
	Status:  true, StatusWritesLabels: true, StatusOnCreate: true,
	PrepareCreate: func(_ context.Context, n *corev1.Node) {
		// The TaintNodesByCondition admission plugin: a new node is not
		// ready until its kubelet says so.
		notReady := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
		if !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&notReady) }) {
			n.Spec.Taints = append(n.Spec.Taints, notReady)
		}
	},
	ValidateUpdate: func(n, old *corev1.Node) field.ErrorList {
		var errs field.ErrorList
		if old.Spec.PodCIDR != "" {
			errs = append(errs, apivalidation.ValidateImmutableField(n.Spec.PodCIDR, old.Spec.PodCIDR, field.NewPath("spec", "podCIDR"))...)
		}
		if old.Spec.ProviderID != "" {
			errs = append(errs, apivalidation.ValidateImmutableField(n.Spec.ProviderID, old.Spec.ProviderID, field.NewPath("spec", "providerID"))...)
		}
		return errs
	},
	NoAge: true,
	Columns: []registry.Column{
		registry.ColumnOf("Status", "string", "The status of the node", 0, func(n *corev1.Node) any { return nodeStatus(n) }),
		registry.ColumnOf("Roles", "string", "The roles of the node", 0, func(n *corev1.Node) any { return nodeRoles(n) }),
		registry.AgeColumn(),
		registry.ColumnOf("Version", "string", "Kubelet Version reported by the node.", 0, func(n *corev1.Node) any { return n.Status.NodeInfo.KubeletVersion }),
		nodeAddress("Internal-IP", corev1.NodeInternalIP),
		nodeAddress("External-IP", corev1.NodeExternalIP),
		registry.ColumnOf("OS-Image", "string", corev1.NodeSystemInfo{}.SwaggerDoc()["osImage"], 1, func(n *corev1.Node) any { return orUnknown(n.Status.NodeInfo.OSImage) }),
		registry.ColumnOf("Kernel-Version", "string", corev1.NodeSystemInfo{}.SwaggerDoc()["kernelVersion"], 1, kernelVersion),
		registry.ColumnOf("Container-Runtime", "string", corev1.NodeSystemInfo{}.SwaggerDoc()["containerRuntimeVersion"], 1, func(n *corev1.Node) any {
			return orUnknown(n.Status.NodeInfo.ContainerRuntimeVersion)
		}),
	},
	Fields: func(n *corev1.Node) fields.Set {
		return fields.Set{"spec.unschedulable": boolString(n.Spec.Unschedulable)}
	},
	FieldNames: []string{"spec.unschedulable"},
	Customize:  addNodeProxy,
}

func nodeStatus(n *corev1.Node) string {
	status := "Unknown"
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				status = "Ready"
			} else {
				status = "NotReady"
			}
		}
	}
	if n.Spec.Unschedulable {
		status += ",SchedulingDisabled"
	}
	return status
}

// nodeRoles are the roles the node's labels give it, sorted: the <role>
// of each node-role.kubernetes.io/<role> label and the value of
// kubernetes.io/role, as kubectl get nodes shows them.
func nodeRoles(n *corev1.Node) string {
	var roles []string
	for k, v := range n.Labels {
		role := ""
		switch {
		case strings.HasPrefix(k, "node-role.kubernetes.io/"):
			role = strings.TrimPrefix(k, "node-role.kubernetes.io/")
		case k == "kubernetes.io/role":
			role = v
		}
		if role != "" && !slices.Contains(roles, role) {
			roles = append(roles, role)
		}
	}
	if len(roles) == 0 {
		return "<none>"
	}
	slices.Sort(roles)
	return strings.Join(roles, ",")
}

// kernelVersion is the node's kernel version followed by its architecture
// in parentheses, when the kubelet reports one.
func kernelVersion(n *corev1.Node) any {
	v := orUnknown(n.Status.NodeInfo.KernelVersion)
	if arch := n.Status.NodeInfo.Architecture; arch != "" {
		v += " (" + arch + ")"
	}
	return v
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// nodeAddress is a wide column with the node's first address of a type.
func nodeAddress(name string, t corev1.NodeAddressType) registry.Column {
	return registry.ColumnOf(name, "string", corev1.NodeStatus{}.SwaggerDoc()["addresses"], 1, func(n *corev1.Node) any {
		for _, a := range n.Status.Addresses {
			if a.Type == t {
				return a.Address
			}
		}
		return "<none>"
	})
}

func orUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}
