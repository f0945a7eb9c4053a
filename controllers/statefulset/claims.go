package statefulset

// persistentVolumeClaimRetentionPolicy: the owner references a pod's claims
// carry so that the garbage collector deletes them when the set is deleted
// (WhenDeleted: Delete, the set owns them) or the pod is scaled away
// (WhenScaled: Delete, the condemned pod owns them).

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	retain = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	remove = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
)

func retention(set *appsv1.StatefulSet) appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy {
	if p := set.Spec.PersistentVolumeClaimRetentionPolicy; p != nil {
		return *p
	}
	return appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: retain, WhenScaled: retain}
}

func matchesRef(ref *metav1.OwnerReference, obj metav1.Object, gvk schema.GroupVersionKind) bool {
	return gvk.GroupVersion().String() == ref.APIVersion && gvk.Kind == ref.Kind && ref.Name == obj.GetName()
}

func hasOwnerRef(target, owner metav1.Object) bool {
	for _, r := range target.GetOwnerReferences() {
		if r.UID == owner.GetUID() {
			return true
		}
	}
	return false
}

// hasStaleOwnerRef: claim names obj (by kind and name) with another uid.
func hasStaleOwnerRef(claim *corev1.PersistentVolumeClaim, obj metav1.Object, gvk schema.GroupVersionKind) bool {
	for _, r := range claim.OwnerReferences {
		if matchesRef(&r, obj, gvk) {
			return r.UID != obj.GetUID()
		}
	}
	return false
}

// hasUnexpectedController: under a Delete policy, another controller (or an
// older set or pod of these names) controls the claim.
func hasUnexpectedController(claim *corev1.PersistentVolumeClaim, set *appsv1.StatefulSet, p *corev1.Pod) bool {
	if pol := retention(set); pol.WhenScaled == retain && pol.WhenDeleted == retain {
		return false
	}
	for _, r := range claim.OwnerReferences {
		switch {
		case matchesRef(&r, set, setKind):
			if r.UID != set.UID {
				return true
			}
		case matchesRef(&r, p, podKind):
			if r.UID != p.UID {
				return true
			}
		case r.Controller != nil && *r.Controller:
			return true
		}
	}
	return false
}

func hasNonControllerOwner(claim *corev1.PersistentVolumeClaim, set *appsv1.StatefulSet, p *corev1.Pod) bool {
	for _, r := range claim.OwnerReferences {
		if (r.UID == set.UID || r.UID == p.UID) && (r.Controller == nil || !*r.Controller) {
			return true
		}
	}
	return false
}

// claimOwnerUpToDate reports whether claim's owners are what the policy
// wants for p (upstream's isClaimOwnerUpToDate).
func claimOwnerUpToDate(claim *corev1.PersistentVolumeClaim, set *appsv1.StatefulSet, p *corev1.Pod) bool {
	if hasStaleOwnerRef(claim, set, setKind) || hasStaleOwnerRef(claim, p, podKind) {
		return true
	}
	if hasUnexpectedController(claim, set, p) {
		return !hasOwnerRef(claim, set) && !hasOwnerRef(claim, p)
	}
	if hasNonControllerOwner(claim, set, p) {
		return false
	}
	pol := retention(set)
	scaledDown := !inRange(p, set)
	switch {
	case pol.WhenScaled == retain && pol.WhenDeleted == remove:
		return hasOwnerRef(claim, set) && !hasOwnerRef(claim, p)
	case pol.WhenScaled == remove && pol.WhenDeleted == retain:
		return !hasOwnerRef(claim, set) && scaledDown == hasOwnerRef(claim, p)
	case pol.WhenScaled == remove && pol.WhenDeleted == remove:
		return scaledDown != hasOwnerRef(claim, set) && scaledDown == hasOwnerRef(claim, p)
	default: // Retain/Retain, or unknown, treated as Retain
		return !hasOwnerRef(claim, set) && !hasOwnerRef(claim, p)
	}
}

// setClaimOwners rewrites claim's references to set and p for the policy.
func setClaimOwners(claim *corev1.PersistentVolumeClaim, set *appsv1.StatefulSet, p *corev1.Pod) {
	unexpected := hasUnexpectedController(claim, set, p)
	refs := []metav1.OwnerReference{}
	for _, r := range claim.OwnerReferences {
		if !matchesRef(&r, set, setKind) && !matchesRef(&r, p, podKind) {
			refs = append(refs, r)
		}
	}
	if !unexpected {
		pol := retention(set)
		scaledDown := !inRange(p, set)
		switch {
		case pol.WhenScaled == retain && pol.WhenDeleted == remove:
			refs = addControllerRef(refs, set, setKind)
		case pol.WhenScaled == remove && pol.WhenDeleted == retain && scaledDown:
			refs = addControllerRef(refs, p, podKind)
		case pol.WhenScaled == remove && pol.WhenDeleted == remove && scaledDown:
			refs = addControllerRef(refs, p, podKind)
		case pol.WhenScaled == remove && pol.WhenDeleted == remove:
			refs = addControllerRef(refs, set, setKind)
		}
	}
	claim.OwnerReferences = refs
}

func addControllerRef(refs []metav1.OwnerReference, owner metav1.Object, gvk schema.GroupVersionKind) []metav1.OwnerReference {
	for _, r := range refs {
		if r.UID == owner.GetUID() {
			return refs
		}
	}
	return append(refs, *metav1.NewControllerRef(owner, gvk))
}

// claimsMatchPolicy reports whether p's existing claims have the owners the
// policy wants.
func (c *Controller) claimsMatchPolicy(set *appsv1.StatefulSet, p *corev1.Pod) (bool, error) {
	o := ordinalOf(p)
	for _, t := range set.Spec.VolumeClaimTemplates {
		name := claimName(set, t.Name, o)
		claim, err := c.claims.PersistentVolumeClaims(set.Namespace).Get(name)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return false, fmt.Errorf("Could not retrieve claim %s for %s when checking PVC deletion policy: %w", name, p.Name, err)
		case !claimOwnerUpToDate(claim, set, p):
			return false, nil
		}
	}
	return true, nil
}

// updateClaimsForPolicy updates the owners of p's claims that the policy
// wants otherwise, warning of a conflicting controller.
func (c *Controller) updateClaimsForPolicy(ctx context.Context, set *appsv1.StatefulSet, p *corev1.Pod) error {
	o := ordinalOf(p)
	for _, t := range set.Spec.VolumeClaimTemplates {
		name := claimName(set, t.Name, o)
		claim, err := c.claims.PersistentVolumeClaims(set.Namespace).Get(name)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Errorf("Could not retrieve claim %s not found for %s when checking PVC deletion policy: %w", name, p.Name, err)
		}
		if hasUnexpectedController(claim, set, p) {
			c.recorder().Event(set, corev1.EventTypeWarning, "ConflictingController", fmt.Sprintf(
				"PersistentVolumeClaim %s has a conflicting OwnerReference that acts as a manging controller, the retention policy is ignored for this claim", name))
		}
		if claimOwnerUpToDate(claim, set, p) {
			continue
		}
		claim = claim.DeepCopy()
		setClaimOwners(claim, set, p)
		updated, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, claim, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("could not update claim %s for delete policy ownerRefs: %w", name, err)
		}
		c.written.wrote(key(set), set.UID, "persistentvolumeclaims", updated.ResourceVersion)
	}
	return nil
}

// claimIsStale: under WhenScaled Delete, one of p's claims still names an
// earlier pod of p's name (that pod's claim is to be deleted first).
func (c *Controller) claimIsStale(set *appsv1.StatefulSet, p *corev1.Pod) (bool, error) {
	if retention(set).WhenScaled == retain {
		return false, nil
	}
	for _, claim := range claimsOf(set, p) {
		existing, err := c.claims.PersistentVolumeClaims(claim.Namespace).Get(claim.Name)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return false, err
		case hasStaleOwnerRef(existing, p, podKind):
			return true, nil
		}
	}
	return false, nil
}
