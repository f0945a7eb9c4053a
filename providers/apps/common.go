package apps

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeembed/apiserver/providers/core"
	"github.com/kubeembed/apiserver/providers/registry"
)

// validateSelectorAndTemplate checks what every apps/v1 workload requires of
// its selector and pod template.
func validateSelectorAndTemplate(selector *metav1.LabelSelector, template *corev1.PodTemplateSpec, kind string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if selector == nil {
		errs = append(errs, field.Required(p.Child("selector"), ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(selector, metav1validation.LabelSelectorValidationOptions{}, p.Child("selector"))...)
		if len(selector.MatchLabels)+len(selector.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(p.Child("selector"), selector, "empty selector is invalid for "+kind))
		}
	}
	if sel, err := metav1.LabelSelectorAsSelector(selector); err == nil && selector != nil && !sel.Empty() {
		if !sel.Matches(labels.Set(template.Labels)) {
			errs = append(errs, field.Invalid(p.Child("template", "metadata", "labels"), template.Labels, "`selector` does not match template `labels`"))
		}
	}
	errs = append(errs, core.ValidatePodTemplateSpec(template, p.Child("template"))...)
	if template.Spec.RestartPolicy != "" && template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(p.Child("template", "spec", "restartPolicy"), template.Spec.RestartPolicy, []string{string(corev1.RestartPolicyAlways)}))
	}
	if template.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(p.Child("template", "spec", "activeDeadlineSeconds"), "activeDeadlineSeconds in ReplicaSet is not Supported"))
	}
	return errs
}

func nonNegative(p *field.Path, fields map[string]int32) field.ErrorList {
	var errs field.ErrorList
	for _, name := range sortedKeys(fields) {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(fields[name]), p.Child(name))...)
	}
	return errs
}

func sortedKeys(m map[string]int32) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// Column helpers shared by the workload tables.
func column[T any](name, typ, desc string, priority int32, f func(T) any) registry.Column {
	return registry.Column{
		TableColumnDefinition: metav1.TableColumnDefinition{Name: name, Type: typ, Description: desc, Priority: priority},
		Value:                 func(o runtime.Object) any { return f(any(o).(T)) },
	}
}

func containersColumns[T any](template func(T) *corev1.PodTemplateSpec) []registry.Column {
	return []registry.Column{
		column("Containers", "string", "Names of each container in the template.", 1, func(o T) any {
			var n []string
			for _, c := range template(o).Spec.Containers {
				n = append(n, c.Name)
			}
			return strings.Join(n, ",")
		}),
		column("Images", "string", "Images referenced by each container in the template.", 1, func(o T) any {
			var n []string
			for _, c := range template(o).Spec.Containers {
				n = append(n, c.Image)
			}
			return strings.Join(n, ",")
		}),
	}
}

func selectorColumn[T any](selector func(T) *metav1.LabelSelector) registry.Column {
	return column("Selector", "string", "Label selector for pods.", 1, func(o T) any {
		return metav1.FormatLabelSelector(selector(o))
	})
}
