package validation

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ResourceQuantity is kube-apiserver's ValidateResourceQuantityValue: q
// is not negative, and whole for a resource counted in units (pods,
// services, ... and extended resources).
func ResourceQuantity(name corev1.ResourceName, q resource.Quantity, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if q.Sign() < 0 {
		errs = append(errs, field.Invalid(path, q.String(), "must be greater than or equal to 0"))
	}
	if (integerResources.Has(name) || ExtendedResource(name)) && q.MilliValue()%1000 != 0 {
		errs = append(errs, field.Invalid(path, q, "must be an integer"))
	}
	return errs
}

// integerResources are the resources counted in units (helper's
// IsIntegerResourceName, extended resources aside).
var integerResources = sets.New(corev1.ResourcePods, corev1.ResourceQuotas, corev1.ResourceServices,
	corev1.ResourceReplicationControllers, corev1.ResourceSecrets, corev1.ResourceConfigMaps,
	corev1.ResourcePersistentVolumeClaims, corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers)

// NativeResource: a resource name without a domain, or of kubernetes.io.
func NativeResource(name corev1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || strings.Contains(string(name), corev1.ResourceDefaultNamespacePrefix)
}

// ExtendedResource: a name outside kubernetes.io, not requests.*, that is
// a qualified name as requests.<name> (as quota names its requests).
func ExtendedResource(name corev1.ResourceName) bool {
	if NativeResource(name) || strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(utilvalidation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+string(name))) == 0
}

// Dedup drops the errors that repeat an earlier one's text, as
// kube-apiserver does for the kinds whose strategy also validates
// declaratively: filtering out the hand-written errors that declarative
// ones cover goes through ErrorList.ToAggregate, which keeps one error of
// each text.
func Dedup(errs field.ErrorList) field.ErrorList {
	seen := sets.New[string]()
	out := errs[:0:0]
	for _, e := range errs {
		if !seen.Has(e.Error()) {
			seen.Insert(e.Error())
			out = append(out, e)
		}
	}
	return out
}
