package registry

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TemplateColumns are the CONTAINERS and IMAGES columns of kinds with a pod
// template: wide (priority 1) for workloads, the kind's own for pod
// templates (0).
func TemplateColumns[T any](priority int32, template func(T) *corev1.PodTemplateSpec) []Column {
	list := func(o T, f func(corev1.Container) string) any {
		t := template(o)
		if t == nil {
			return ""
		}
		var out []string
		for _, c := range t.Spec.Containers {
			out = append(out, f(c))
		}
		return strings.Join(out, ",")
	}
	return []Column{
		ColumnOf("Containers", "string", "Names of each container in the template.", priority, func(o T) any {
			return list(o, func(c corev1.Container) string { return c.Name })
		}),
		ColumnOf("Images", "string", "Images referenced by each container in the template.", priority, func(o T) any {
			return list(o, func(c corev1.Container) string { return c.Image })
		}),
	}
}

// SelectorColumn is the wide SELECTOR column; desc is the selector field's
// documentation, which kube-apiserver uses as the description.
func SelectorColumn[T any](desc string, selector func(T) *metav1.LabelSelector) Column {
	return ColumnOf("Selector", "string", desc, 1, func(o T) any {
		return metav1.FormatLabelSelector(selector(o))
	})
}
