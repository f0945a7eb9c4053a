package batch

import (
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// kube-apiserver's limits of a pod failure policy.
const (
	maxPodFailurePolicyRules   = 20
	maxOnExitCodesValues       = 255
	maxOnPodConditionsPatterns = 20
)

var (
	pfpActions   = []string{string(batchv1.PodFailurePolicyActionCount), string(batchv1.PodFailurePolicyActionFailIndex), string(batchv1.PodFailurePolicyActionFailJob), string(batchv1.PodFailurePolicyActionIgnore)}
	pfpOperators = []string{string(batchv1.PodFailurePolicyOnExitCodesOpIn), string(batchv1.PodFailurePolicyOnExitCodesOpNotIn)}
	pfpStatuses  = []string{string(corev1.ConditionFalse), string(corev1.ConditionTrue), string(corev1.ConditionUnknown)}
)

// validatePodFailurePolicy checks a Job's podFailurePolicy and
// podReplacementPolicy as kube-apiserver does, in its order.
func validatePodFailurePolicy(s *batchv1.JobSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if pfp := s.PodFailurePolicy; pfp != nil {
		rules := p.Child("podFailurePolicy", "rules")
		if len(pfp.Rules) > maxPodFailurePolicyRules {
			errs = append(errs, field.TooMany(rules, len(pfp.Rules), maxPodFailurePolicyRules))
		}
		var names []string
		for _, c := range s.Template.Spec.Containers {
			names = append(names, c.Name)
		}
		for _, c := range s.Template.Spec.InitContainers {
			names = append(names, c.Name)
		}
		for i := range pfp.Rules {
			errs = append(errs, validatePodFailurePolicyRule(s, &pfp.Rules[i], rules.Index(i), names)...)
		}
	}
	if r := s.PodReplacementPolicy; r != nil {
		switch {
		case s.PodFailurePolicy != nil && *r != batchv1.Failed:
			errs = append(errs, field.NotSupported(p.Child("podReplacementPolicy"), *r, []string{string(batchv1.Failed)}))
		case s.PodFailurePolicy == nil && *r != batchv1.Failed && *r != batchv1.TerminatingOrFailed:
			errs = append(errs, field.NotSupported(p.Child("podReplacementPolicy"), *r, []string{string(batchv1.Failed), string(batchv1.TerminatingOrFailed)}))
		}
	}
	return errs
}

func validatePodFailurePolicyRule(s *batchv1.JobSpec, r *batchv1.PodFailurePolicyRule, p *field.Path, containers []string) field.ErrorList {
	var errs field.ErrorList
	action := p.Child("action")
	switch {
	case r.Action == "":
		errs = append(errs, field.Required(action, fmt.Sprintf("valid values: %q", pfpActions)))
	case r.Action == batchv1.PodFailurePolicyActionFailIndex:
		if s.BackoffLimitPerIndex == nil {
			errs = append(errs, field.Invalid(action, r.Action, "requires the backoffLimitPerIndex to be set"))
		}
	case !slices.Contains(pfpActions, string(r.Action)):
		errs = append(errs, field.NotSupported(action, r.Action, pfpActions))
	}
	if r.OnExitCodes != nil {
		errs = append(errs, validateOnExitCodes(r.OnExitCodes, p.Child("onExitCodes"), containers)...)
	}
	if len(r.OnPodConditions) > 0 {
		errs = append(errs, validateOnPodConditions(r.OnPodConditions, p.Child("onPodConditions"))...)
	}
	if r.OnExitCodes != nil && len(r.OnPodConditions) > 0 {
		errs = append(errs, field.Invalid(p, field.OmitValueType{}, "specifying both OnExitCodes and OnPodConditions is not supported"))
	}
	if r.OnExitCodes == nil && len(r.OnPodConditions) == 0 {
		errs = append(errs, field.Invalid(p, field.OmitValueType{}, "specifying one of OnExitCodes and OnPodConditions is required"))
	}
	return errs
}

func validateOnPodConditions(patterns []batchv1.PodFailurePolicyOnPodConditionsPattern, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(patterns) > maxOnPodConditionsPatterns {
		errs = append(errs, field.TooMany(p, len(patterns), maxOnPodConditionsPatterns))
	}
	for j, c := range patterns {
		for _, msg := range validation.IsQualifiedName(string(c.Type)) {
			errs = append(errs, field.Invalid(p.Index(j).Child("type"), c.Type, msg))
		}
		status := p.Index(j).Child("status")
		switch {
		case c.Status == "":
			errs = append(errs, field.Required(status, fmt.Sprintf("valid values: %q", pfpStatuses)))
		case !slices.Contains(pfpStatuses, string(c.Status)):
			errs = append(errs, field.NotSupported(status, c.Status, pfpStatuses))
		}
	}
	return errs
}

func validateOnExitCodes(r *batchv1.PodFailurePolicyOnExitCodesRequirement, p *field.Path, containers []string) field.ErrorList {
	var errs field.ErrorList
	op := p.Child("operator")
	switch {
	case r.Operator == "":
		errs = append(errs, field.Required(op, fmt.Sprintf("valid values: %q", pfpOperators)))
	case !slices.Contains(pfpOperators, string(r.Operator)):
		errs = append(errs, field.NotSupported(op, r.Operator, pfpOperators))
	}
	if r.ContainerName != nil && !slices.Contains(containers, *r.ContainerName) {
		errs = append(errs, field.Invalid(p.Child("containerName"), *r.ContainerName, "must be one of the container or initContainer names in the pod template"))
	}
	values := p.Child("values")
	if len(r.Values) == 0 {
		errs = append(errs, field.Invalid(values, r.Values, "at least one value is required"))
	} else if len(r.Values) > maxOnExitCodesValues {
		errs = append(errs, field.TooMany(values, len(r.Values), maxOnExitCodesValues))
	}
	seen, ordered := map[int32]bool{}, true
	for j, v := range r.Values {
		if r.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && v == 0 {
			errs = append(errs, field.Invalid(values.Index(j), v, "must not be 0 for the In operator"))
		}
		if seen[v] {
			errs = append(errs, field.Duplicate(values.Index(j), v))
		}
		seen[v] = true
		if j > 0 && r.Values[j-1] > v {
			ordered = false
		}
	}
	if !ordered {
		errs = append(errs, field.Invalid(values, r.Values, "must be ordered"))
	}
	return errs
}
