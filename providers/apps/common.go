package apps

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeembed/apiserver/providers/internal/podspec"
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
	// A missing selector selects nothing, so no template matches it (and is
	// reported too, as kube-apiserver does); an empty one selects all.
	if sel, err := metav1.LabelSelectorAsSelector(selector); err == nil && !sel.Empty() {
		if !sel.Matches(labels.Set(template.Labels)) {
			errs = append(errs, field.Invalid(p.Child("template", "metadata", "labels"), template.Labels, "`selector` does not match template `labels`"))
		}
	}
	errs = append(errs, podspec.ValidateTemplate(template, p.Child("template"))...)
	if template.Spec.RestartPolicy != "" && template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(p.Child("template", "spec", "restartPolicy"), template.Spec.RestartPolicy, []string{string(corev1.RestartPolicyAlways)}))
	}
	if template.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(p.Child("template", "spec", "activeDeadlineSeconds"), "activeDeadlineSeconds in ReplicaSet is not Supported"))
	}
	return errs
}
