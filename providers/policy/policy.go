// Package policy serves policy/v1 poddisruptionbudgets, with status.
package policy

import (
	"fmt"

	policyv1 "k8s.io/api/policy/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"

	"github.com/kubeembed/apiserver/providers/internal/validation"
)

// Provider serves policy.
func Provider() providers.Provider { return group }

var group = registry.Group{
	GroupVersion: policyv1.SchemeGroupVersion, AddToScheme: policyv1.AddToScheme,
	Served: []registry.Served{podDisruptionBudgets},
}

func validateIntOrPercent(v *intstr.IntOrString, p *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	if v.Type == intstr.Int {
		return apivalidation.ValidateNonnegativeField(int64(v.IntVal), p)
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, 100, false)
	if err != nil || n < 0 {
		return field.ErrorList{field.Invalid(p, v.StrVal, "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")}
	}
	if n > 100 {
		return field.ErrorList{field.Invalid(p, v.StrVal, "must not be greater than 100%")}
	}
	return nil
}

var podDisruptionBudgets = registry.Kind[*policyv1.PodDisruptionBudget]{
	Status: true, NoAge: true, Namespaced: true,
	NameValidation: registry.PathSegmentName,
	GroupVersion:   policyv1.SchemeGroupVersion,
	Resource:       "poddisruptionbudgets", Singular: "poddisruptionbudget", ShortNames: []string{"pdb"},
	NewObj:       func() runtime.Object { return &policyv1.PodDisruptionBudget{} },
	NewList:      func() runtime.Object { return &policyv1.PodDisruptionBudgetList{} },
	GenerationOf: func(p *policyv1.PodDisruptionBudget) any { return p.Spec },
	Validate: func(pdb *policyv1.PodDisruptionBudget) field.ErrorList {
		p := field.NewPath("spec")
		var errs field.ErrorList
		if pdb.Spec.MinAvailable != nil && pdb.Spec.MaxUnavailable != nil {
			errs = append(errs, field.Invalid(p, validation.AsInternal(pdb.Spec), "minAvailable and maxUnavailable cannot be both set"))
		}
		errs = append(errs, validateIntOrPercent(pdb.Spec.MinAvailable, p.Child("minAvailable"))...)
		errs = append(errs, validateIntOrPercent(pdb.Spec.MaxUnavailable, p.Child("maxUnavailable"))...)
		if pdb.Spec.Selector != nil {
			errs = append(errs, metav1validation.ValidateLabelSelector(pdb.Spec.Selector, metav1validation.LabelSelectorValidationOptions{}, p.Child("selector"))...)
		}
		if pol := pdb.Spec.UnhealthyPodEvictionPolicy; pol != nil && *pol != policyv1.IfHealthyBudget && *pol != policyv1.AlwaysAllow {
			errs = append(errs, field.NotSupported(p.Child("unhealthyPodEvictionPolicy"), *pol, []string{string(policyv1.IfHealthyBudget), string(policyv1.AlwaysAllow)}))
		}
		return errs
	},
	Columns: []registry.Column{
		registry.ColumnOf("Min Available", "string", "The minimum number of pods that must be available.", 0, func(p *policyv1.PodDisruptionBudget) any { return orNA(p.Spec.MinAvailable) }),
		registry.ColumnOf("Max Unavailable", "string", "The maximum number of pods that may be unavailable.", 0, func(p *policyv1.PodDisruptionBudget) any { return orNA(p.Spec.MaxUnavailable) }),
		registry.ColumnOf("Allowed Disruptions", "integer", "Calculated number of pods that may be disrupted at this time.", 0, func(p *policyv1.PodDisruptionBudget) any { return int64(p.Status.DisruptionsAllowed) }),
		registry.AgeColumn(),
	},
}

func orNA(v *intstr.IntOrString) string {
	if v == nil {
		return "N/A"
	}
	return fmt.Sprint(v.String())
}
