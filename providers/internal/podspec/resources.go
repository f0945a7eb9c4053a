package podspec

// Resource requirements, a container's and a pod's, validated as
// kube-apiserver's validateResourceRequirements: each name, each quantity
// (not negative, whole for countable resources, hugepages in whole pages),
// each request against its limit, hugepages only beside cpu or memory,
// and a container's claims naming the pod's resource claims.

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/kubeembed/apiserver/providers/internal/validation"
)

// validateRequirements checks r at path, each resource's name by validName.
// (kube-apiserver ranges over the maps, in no order; the names are sorted
// here.) Hugepages must be whole pages on update too: kube-apiserver lets
// an update keep part pages an old object already had (one stored by a
// kube-apiserver that allowed them, or by kubeembed before 2026-12-06 on
// etcd), which kubeembed, validating an update without the old object,
// refuses.
func validateRequirements(r *corev1.ResourceRequirements, validName func(corev1.ResourceName, *field.Path) field.ErrorList,
	path *field.Path) field.ErrorList {
	var errs field.ErrorList
	limits, requests := path.Child("limits"), path.Child("requests")
	cpuOrMemory, hugePagesSet := false, false
	for _, name := range slices.Sorted(maps.Keys(r.Limits)) {
		errs = append(errs, validName(name, limits.Key(string(name)))...)
		errs = append(errs, validateQuantity(name, r.Limits[name], limits.Key(string(name)))...)
		cpuOrMemory = cpuOrMemory || name == corev1.ResourceCPU || name == corev1.ResourceMemory
		hugePagesSet = hugePagesSet || hugePages(name)
	}
	for _, name := range slices.Sorted(maps.Keys(r.Requests)) {
		q, np := r.Requests[name], requests.Key(string(name))
		errs = append(errs, validName(name, np)...)
		errs = append(errs, validation.ResourceQuantity(name, q, np)...)
		limit, limited := r.Limits[name]
		switch {
		case limited && !overcommitAllowed(name) && q.Cmp(limit) != 0:
			errs = append(errs, field.Invalid(requests, q.String(), fmt.Sprintf("must be equal to %s limit of %s", name, limit.String())))
		case limited && q.Cmp(limit) > 0:
			errs = append(errs, field.Invalid(requests, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		case !limited && !overcommitAllowed(name):
			errs = append(errs, field.Required(limits, "Limit must be set for non overcommitable resources"))
		}
		errs = append(errs, wholePages(name, q, np)...)
		cpuOrMemory = cpuOrMemory || name == corev1.ResourceCPU || name == corev1.ResourceMemory
		hugePagesSet = hugePagesSet || hugePages(name)
	}
	if hugePagesSet && !cpuOrMemory {
		errs = append(errs, field.Forbidden(path, "HugePages require cpu or memory"))
	}
	return errs
}

// validateQuantity: not negative, whole for a countable resource, whole
// pages for hugepages.
func validateQuantity(name corev1.ResourceName, q resource.Quantity, path *field.Path) field.ErrorList {
	return append(validation.ResourceQuantity(name, q, path), wholePages(name, q, path)...)
}

// wholePages: a hugepages quantity is a whole number of its pages.
func wholePages(name corev1.ResourceName, q resource.Quantity, path *field.Path) field.ErrorList {
	if !hugePages(name) {
		return nil
	}
	page, err := resource.ParseQuantity(strings.TrimPrefix(string(name), corev1.ResourceHugePagesPrefix))
	if err == nil && page.Sign() > 0 && page.MilliValue()%1000 == 0 && q.Value()%page.Value() == 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(path, q.String(), fmt.Sprintf("%s is not positive integer multiple of %s", q.String(), name))}
}

// resourceName: a qualified name, standard unless it has a domain.
func resourceName(name corev1.ResourceName, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsQualifiedName(string(name)) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	if len(errs) == 0 && !strings.Contains(string(name), "/") && !standardResources.Has(name) && !hugePages(name) &&
		!strings.HasPrefix(string(name), corev1.ResourceRequestsHugePagesPrefix) {
		errs = append(errs, field.Invalid(path, name, "must be a standard resource type or fully qualified"))
	}
	return errs
}

// containerResourceName: a resource a container may request (cpu, memory,
// ephemeral-storage, hugepages) or an extended resource.
func containerResourceName(name corev1.ResourceName, path *field.Path) field.ErrorList {
	errs := resourceName(name, path)
	switch {
	case !strings.Contains(string(name), "/"):
		if !containerResources.Has(name) && !hugePages(name) {
			errs = append(errs, field.Invalid(path, name, "must be a standard resource for containers"))
		}
	case !validation.NativeResource(name) && !validation.ExtendedResource(name):
		errs = append(errs, field.Invalid(path, name, "doesn't follow extended resource name standard"))
	}
	return errs
}

// podResourceName: a resource pod-level resources may name.
func podResourceName(name corev1.ResourceName, path *field.Path) field.ErrorList {
	if errs := resourceName(name, path); len(errs) > 0 {
		return errs
	}
	if !resourcehelper.IsSupportedPodLevelResource(name) {
		return field.ErrorList{field.NotSupported(path, name, sets.List(resourcehelper.SupportedPodLevelResources()))}
	}
	return nil
}

// validateClaimNames: a container's claims name the pod's resource claims,
// each (or each of its requests) once.
func validateClaimNames(claims []corev1.ResourceClaim, podClaims sets.Set[string], path *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, c := range claims {
		p := path.Index(i)
		if c.Name == "" {
			errs = append(errs, field.Required(p, ""))
			continue
		}
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(p, c.Name))
		} else {
			errs = append(errs, claimKey(c, names, p)...)
		}
		if !podClaims.Has(c.Name) {
			e := field.NotFound(p, c.Name)
			e.Detail = "must be one of the names in pod.spec.resourceClaims"
			if podClaims.Len() == 0 {
				e.Detail += " which is empty"
			} else {
				e.Detail += ": " + strings.Join(sets.List(podClaims), ", ")
			}
			errs = append(errs, e)
		}
	}
	return errs
}

// claimKey notes c's claim (name) or request (name/request) in names: a
// duplicate, or a whole claim after one of its requests, is an error.
func claimKey(c corev1.ResourceClaim, names sets.Set[string], p *field.Path) field.ErrorList {
	var errs field.ErrorList
	key := c.Name
	if c.Request != "" {
		for _, msg := range utilvalidation.IsDNS1123Label(c.Request) {
			errs = append(errs, field.Invalid(p.Child("request"), c.Request, msg))
		}
		key += "/" + c.Request
	}
	switch {
	case names.Has(key):
		errs = append(errs, field.Duplicate(p, key))
	case c.Request == "":
		for _, k := range sets.List(names) {
			if before, _, ok := strings.Cut(k, "/"); ok && before == c.Name {
				errs = append(errs, field.Duplicate(p, c.Name))
			}
		}
	}
	names.Insert(key)
	return errs
}

var containerResources = sets.New(corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage)
