package quota

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
)

var claimCount = generic.ObjectCountQuotaResourceNameFor(corev1.Resource("persistentvolumeclaims"))

var claimResources = []corev1.ResourceName{corev1.ResourcePersistentVolumeClaims, corev1.ResourceRequestsStorage}

// byStorageClass names a claim resource per storage class:
// <class>.storageclass.storage.k8s.io/<resource>.
const byStorageClass = ".storageclass.storage.k8s.io/"

// claims evaluates persistent volume claims: a count and requested storage,
// also per storage class, scoped by volume attributes class.
type claims struct{ list generic.ListFuncByNamespace }

var _ quota.Evaluator = &claims{}

func (*claims) GroupResource() schema.GroupResource {
	return corev1.Resource("persistentvolumeclaims")
}

func (*claims) Constraints([]corev1.ResourceName, runtime.Object) error { return nil }

// Handles: claims are charged when written, and when their status changes
// what they use.
func (*claims) Handles(a admission.Attributes) bool {
	switch a.GetSubresource() {
	case "":
		return a.GetOperation() == admission.Create || a.GetOperation() == admission.Update
	case "status":
		pvc, ok1 := a.GetObject().(*corev1.PersistentVolumeClaim)
		old, ok2 := a.GetOldObject().(*corev1.PersistentVolumeClaim)
		return ok1 && ok2 && replenishes(pvc, old)
	}
	return false
}

func (c *claims) Matches(q *corev1.ResourceQuota, item runtime.Object) (bool, error) {
	return generic.Matches(q, item, c.MatchingResources, claimMatchesScope)
}

func (*claims) MatchingScopes(item runtime.Object, scopes []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return matchingScopes(item, scopes, claimMatchesScope)
}

func (*claims) UncoveredQuotaScopes(limited, matched []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return uncovered(limited, matched), nil
}

func (*claims) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, name := range input {
		if name == claimCount || quota.Contains(claimResources, name) ||
			strings.HasSuffix(string(name), byStorageClass+string(corev1.ResourcePersistentVolumeClaims)) ||
			strings.HasSuffix(string(name), byStorageClass+string(corev1.ResourceRequestsStorage)) {
			out = append(out, name)
		}
	}
	return out
}

// Usage is one claim and its storage request (rounded up to a whole
// number, or what was allocated when more), also under its storage class.
func (*claims) Usage(item runtime.Object) (corev1.ResourceList, error) {
	pvc, ok := item.(*corev1.PersistentVolumeClaim)
	if !ok {
		return corev1.ResourceList{}, fmt.Errorf("expect *api.PersistentVolumeClaim or *v1.PersistentVolumeClaim, got %T", item)
	}
	one := *resource.NewQuantity(1, resource.DecimalSI)
	out := corev1.ResourceList{corev1.ResourcePersistentVolumeClaims: one, claimCount: one}
	class := storageClass(pvc)
	if class != "" {
		out[corev1.ResourceName(class+byStorageClass+string(corev1.ResourcePersistentVolumeClaims))] = one
	}
	if storage := storageUsage(pvc); storage != nil {
		out[corev1.ResourceRequestsStorage] = *storage
		if class != "" {
			out[corev1.ResourceName(class+byStorageClass+string(corev1.ResourceRequestsStorage))] = *storage
		}
	}
	return out, nil
}

func (c *claims) UsageStats(options quota.UsageStatsOptions) (quota.UsageStats, error) {
	return generic.CalculateUsageStats(options, c.list, claimMatchesScope, c.Usage)
}

func storageUsage(pvc *corev1.PersistentVolumeClaim) *resource.Quantity {
	roundUp := func(q resource.Quantity) *resource.Quantity {
		q = q.DeepCopy()
		q.RoundUp(0)
		return &q
	}
	requested, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return nil
	}
	out := roundUp(requested)
	if allocated, ok := pvc.Status.AllocatedResources[corev1.ResourceStorage]; ok && allocated.Cmp(*out) > 0 {
		out = roundUp(allocated)
	}
	return out
}

// storageClass is the claim's class: the field, else the beta annotation.
func storageClass(pvc *corev1.PersistentVolumeClaim) string {
	if class, ok := pvc.Annotations[corev1.BetaStorageClassAnnotation]; ok {
		return class
	}
	if pvc.Spec.StorageClassName != nil {
		return *pvc.Spec.StorageClassName
	}
	return ""
}

// replenishes: what the claim uses changed with its status (its
// allocation, or the volume attributes classes it refers to).
func replenishes(pvc, old *corev1.PersistentVolumeClaim) bool {
	if old.Status.AllocatedResources.Storage().Cmp(*pvc.Status.AllocatedResources.Storage()) != 0 {
		return true
	}
	return !attributesClasses(old).Equal(attributesClasses(pvc))
}

func claimMatchesScope(s corev1.ScopedResourceSelectorRequirement, item runtime.Object) (bool, error) {
	pvc, ok := item.(*corev1.PersistentVolumeClaim)
	if !ok {
		return false, fmt.Errorf("expect *api.PersistentVolumeClaim or *v1.PersistentVolumeClaim, got %T", item)
	}
	if s.ScopeName != corev1.ResourceQuotaScopeVolumeAttributesClass {
		return false, nil
	}
	names := attributesClasses(pvc)
	if s.Operator == corev1.ScopeSelectorOpExists {
		return names.Len() != 0, nil
	}
	return selects(s, sets.List(names)...)
}

// attributesClasses are the volume attributes classes the claim refers to:
// asked for, current and being changed to.
func attributesClasses(pvc *corev1.PersistentVolumeClaim) sets.Set[string] {
	out := sets.New[string]()
	if n := pvc.Spec.VolumeAttributesClassName; n != nil && *n != "" {
		out.Insert(*n)
	}
	if n := pvc.Status.CurrentVolumeAttributesClassName; n != nil && *n != "" {
		out.Insert(*n)
	}
	if m := pvc.Status.ModifyVolumeStatus; m != nil && m.TargetVolumeAttributesClassName != "" {
		out.Insert(m.TargetVolumeAttributesClassName)
	}
	return out
}
