package core

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeembed/apiserver/providers/internal/validation"
)

// What kube-apiserver's validation knows of quota resource names and
// scopes.
var (
	standardQuotaResources = sets.New[corev1.ResourceName]("cpu", "memory", "ephemeral-storage",
		"requests.cpu", "requests.memory", "requests.storage", "requests.ephemeral-storage",
		"limits.cpu", "limits.memory", "limits.ephemeral-storage",
		"pods", "resourcequotas", "services", "replicationcontrollers", "secrets",
		"persistentvolumeclaims", "configmaps", "services.nodeports", "services.loadbalancers")
	// standardResources are the standard quota names and storage.
	standardResources   = standardQuotaResources.Union(sets.New[corev1.ResourceName]("storage"))
	podComputeResources = sets.New[corev1.ResourceName]("cpu", "memory", "limits.cpu", "limits.memory", "requests.cpu", "requests.memory")
	quotaScopes         = sets.New(corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating,
		corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeNotBestEffort, corev1.ResourceQuotaScopePriorityClass,
		corev1.ResourceQuotaScopeVolumeAttributesClass, corev1.ResourceQuotaScopeCrossNamespacePodAffinity)
	conflictingScopes = [][2]corev1.ResourceQuotaScope{
		{corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeNotBestEffort},
		{corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating},
	}
)

func hugePages(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) ||
		strings.HasPrefix(string(name), corev1.ResourceRequestsHugePagesPrefix)
}

func standardQuotaResource(name corev1.ResourceName) bool {
	return standardQuotaResources.Has(name) || hugePages(name)
}

// validateQuotaSpec checks a quota's hard limits, scopes and scope selector
// as kube-apiserver does.
func validateQuotaSpec(spec *corev1.ResourceQuotaSpec) field.ErrorList {
	p := field.NewPath("spec")
	errs := validateQuotaList(spec.Hard, p.Child("hard"))
	errs = append(errs, validateQuotaScopes(spec, p.Child("scopes"))...)
	if spec.ScopeSelector != nil {
		errs = append(errs, validateScopeSelector(spec, p.Child("scopeSelector", "matchExpressions"))...)
	}
	return errs
}

// validateQuotaList checks resource names and amounts of a quota's spec or
// status.
func validateQuotaList(list corev1.ResourceList, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for name, v := range list {
		errs = append(errs, validateQuotaResourceName(name, p.Key(string(name)))...)
		errs = append(errs, validation.ResourceQuantity(name, v, p.Key(string(name)))...)
	}
	return errs
}

func validateQuotaResourceName(name corev1.ResourceName, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsQualifiedName(string(name)) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	if len(errs) == 0 && !strings.Contains(string(name), "/") && !standardResources.Has(name) && !hugePages(name) {
		errs = append(errs, field.Invalid(p, name, "must be a standard resource type or fully qualified"))
	}
	if !strings.Contains(string(name), "/") && !standardQuotaResource(name) {
		errs = append(errs, field.Invalid(p, name, "must be a standard resource for quota"))
	}
	return errs
}

// scopeFits reports whether resource can be limited under scope.
func scopeFits(scope corev1.ResourceQuotaScope, name corev1.ResourceName) bool {
	switch scope {
	case corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeNotTerminating, corev1.ResourceQuotaScopeNotBestEffort,
		corev1.ResourceQuotaScopePriorityClass, corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		return name == corev1.ResourcePods || podComputeResources.Has(name)
	case corev1.ResourceQuotaScopeBestEffort:
		return name == corev1.ResourcePods
	case corev1.ResourceQuotaScopeVolumeAttributesClass:
		return name == corev1.ResourcePersistentVolumeClaims || name == corev1.ResourceRequestsStorage
	}
	return true
}

// misfits counts the standard hard limits scope cannot apply to.
func misfits(spec *corev1.ResourceQuotaSpec, scope corev1.ResourceQuotaScope) int {
	n := 0
	for name := range spec.Hard {
		if standardQuotaResource(name) && !scopeFits(scope, name) {
			n++
		}
	}
	return n
}

func validateQuotaScopes(spec *corev1.ResourceQuotaSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, scope := range spec.Scopes {
		if !quotaScopes.Has(scope) {
			errs = append(errs, field.Invalid(p, spec.Scopes, "unsupported scope"))
		}
		for range misfits(spec, scope) {
			errs = append(errs, field.Invalid(p, spec.Scopes, "unsupported scope applied to resource"))
		}
	}
	if conflicting(sets.New(spec.Scopes...)) {
		errs = append(errs, field.Invalid(p, spec.Scopes, "conflicting scopes"))
	}
	return errs
}

func validateScopeSelector(spec *corev1.ResourceQuotaSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	scopes := sets.New[corev1.ResourceQuotaScope]()
	for _, req := range spec.ScopeSelector.MatchExpressions {
		if !quotaScopes.Has(req.ScopeName) {
			errs = append(errs, field.Invalid(p.Child("scopeName"), req.ScopeName, "unsupported scope"))
		}
		for range misfits(spec, req.ScopeName) {
			errs = append(errs, field.Invalid(p, spec.ScopeSelector, "unsupported scope applied to resource"))
		}
		errs = append(errs, validateScopeOperator(req, p)...)
		scopes.Insert(req.ScopeName)
	}
	if conflicting(scopes) {
		errs = append(errs, field.Invalid(p, spec.Scopes, "conflicting scopes"))
	}
	return errs
}

// conflicting: scopes holds a scope and its negation. kube-apiserver
// reports it once however many pairs conflict (measured with parity/).
func conflicting(scopes sets.Set[corev1.ResourceQuotaScope]) bool {
	for _, pair := range conflictingScopes {
		if scopes.HasAll(pair[0], pair[1]) {
			return true
		}
	}
	return false
}

func validateScopeOperator(req corev1.ScopedResourceSelectorRequirement, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch req.ScopeName {
	case corev1.ResourceQuotaScopeBestEffort, corev1.ResourceQuotaScopeNotBestEffort, corev1.ResourceQuotaScopeTerminating,
		corev1.ResourceQuotaScopeNotTerminating, corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		if req.Operator != corev1.ScopeSelectorOpExists {
			errs = append(errs, field.Invalid(p.Child("operator"), req.Operator,
				"must be 'Exists' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity"))
		}
	}
	switch req.Operator {
	case corev1.ScopeSelectorOpIn, corev1.ScopeSelectorOpNotIn:
		if len(req.Values) == 0 {
			errs = append(errs, field.Required(p.Child("values"), "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"))
		}
	case corev1.ScopeSelectorOpExists, corev1.ScopeSelectorOpDoesNotExist:
		if len(req.Values) != 0 {
			errs = append(errs, field.Invalid(p.Child("values"), req.Values, "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector"))
		}
	default:
		errs = append(errs, field.Invalid(p.Child("operator"), req.Operator, "not a valid selector operator"))
	}
	return errs
}

// validateQuotaUpdate: scopes are immutable.
func validateQuotaUpdate(q, old *corev1.ResourceQuota) field.ErrorList {
	if !sets.New(q.Spec.Scopes...).Equal(sets.New(old.Spec.Scopes...)) {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "scopes"), q.Spec.Scopes, "field is immutable")}
	}
	return nil
}

// validateQuotaStatus checks the status a status update writes.
func validateQuotaStatus(q, _ *corev1.ResourceQuota) field.ErrorList {
	p := field.NewPath("status")
	return append(validateQuotaList(q.Status.Hard, p.Child("hard")), validateQuotaList(q.Status.Used, p.Child("used"))...)
}
