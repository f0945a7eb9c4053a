package persistentvolume

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// The events of claims and volumes, as upstream names them
// (pkg/controller/volume/events).
const (
	eventFailedBinding         = "FailedBinding"
	eventVolumeMismatch        = "VolumeMismatch"
	eventExternalProvisioning  = "ExternalProvisioning"
	eventProvisioningFailed    = "ProvisioningFailed"
	eventWaitForFirstConsumer  = "WaitForFirstConsumer"
	eventWaitForPodScheduled   = "WaitForPodScheduled"
	eventVolumeFailedDelete    = "VolumeFailedDelete"
	eventVolumeFailedRecycle   = "VolumeFailedRecycle"
	eventVolumeRecycled        = "VolumeRecycled"
	eventClaimLost             = "ClaimLost"
	eventClaimMisbound         = "ClaimMisbound"
	eventVolumeUnknownReclaim  = "VolumeUnknownReclaimPolicy"
	messageNoClassNoVolume     = "no persistent volumes available for this claim and no storage class is set"
	messageWaitForFirstConsume = "waiting for first consumer to be created before binding"
)

// syncClaim is upstream's: a claim not yet bind-completed is bound (or
// provisioned for), one that is, kept bound.
func (c *Controller) syncClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	klog.FromContext(ctx).V(4).Info("Synchronizing PersistentVolumeClaim", "PVC", klog.KObj(pvc))
	if !metav1.HasAnnotation(pvc.ObjectMeta, storagehelpers.AnnBindCompleted) {
		if pvc.Spec.VolumeName == "" {
			return c.syncUnboundClaim(ctx, pvc)
		}
		return c.syncPreboundClaim(ctx, pvc)
	}
	return c.syncBoundClaim(ctx, pvc)
}

// syncUnboundClaim binds a claim that names no volume to the best match,
// or asks for one to be provisioned.
func (c *Controller) syncUnboundClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	delay, err := c.delayBinding(ctx, pvc)
	if err != nil {
		return err
	}
	pv, err := findBestMatch(c.volumes, pvc, delay)
	if err != nil {
		return fmt.Errorf("error finding PV for claim %q: %w", pvc.Namespace+"/"+pvc.Name, err)
	}
	if pv != nil {
		return c.bind(ctx, pv, pvc)
	}
	if updated, err := c.assignDefaultStorageClass(ctx, pvc); err != nil || updated {
		return err // the update brings the claim back
	}
	switch {
	case delay && !storagehelpers.IsDelayBindingProvisioning(pvc):
		// No pod using the claim has been scheduled yet.
		if err := c.eventForDelayedClaim(pvc); err != nil {
			return err
		}
	case storagehelpers.GetPersistentVolumeClaimClass(pvc) != "":
		return c.provisionClaim(ctx, pvc)
	default:
		c.events.Event(pvc, corev1.EventTypeNormal, eventFailedBinding, messageNoClassNoVolume)
	}
	_, err = c.updateClaimStatus(ctx, pvc, corev1.ClaimPending, nil)
	return err
}

// syncPreboundClaim binds a claim to the volume it names, if that volume
// exists, is free (or pre-bound to it) and fits.
func (c *Controller) syncPreboundClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	obj, found, err := c.volumes.GetByKey(pvc.Spec.VolumeName)
	if err != nil {
		return fmt.Errorf("find volume %s in the controller's cache: %w", pvc.Spec.VolumeName, err)
	}
	pv, _ := obj.(*corev1.PersistentVolume)
	switch {
	case !found || pv == nil:
		// Asked for a volume that does not exist (yet): try again later.
		_, err = c.updateClaimStatus(ctx, pvc, corev1.ClaimPending, nil)
		return err
	case pv.Spec.ClaimRef == nil:
		if err := checkVolumeSatisfyClaim(pv, pvc); err != nil {
			c.events.Event(pvc, corev1.EventTypeWarning, eventVolumeMismatch, fmt.Sprintf("Cannot bind to requested volume %q: %s", pv.Name, err))
			_, err = c.updateClaimStatus(ctx, pvc, corev1.ClaimPending, nil)
			return err
		}
		return c.bind(ctx, pv, pvc)
	case storagehelpers.IsVolumeBoundToClaim(pv, pvc):
		return c.bind(ctx, pv, pvc) // finish the binding (the claim's UID)
	case !metav1.HasAnnotation(pvc.ObjectMeta, storagehelpers.AnnBoundByController):
		c.events.Event(pvc, corev1.EventTypeWarning, eventFailedBinding, fmt.Sprintf("volume %q already bound to a different claim.", pv.Name))
		_, err = c.updateClaimStatus(ctx, pvc, corev1.ClaimPending, nil)
		return err
	default:
		// Someone removed bind-completed from a claim the controller bound.
		c.events.Event(pvc, corev1.EventTypeWarning, eventFailedBinding, fmt.Sprintf("volume %q already bound to a different claim.", pv.Name))
		return fmt.Errorf("invalid binding of claim %q to volume %q: volume already claimed by %q",
			pvc.Namespace+"/"+pvc.Name, pvc.Spec.VolumeName, pv.Spec.ClaimRef.Namespace+"/"+pv.Spec.ClaimRef.Name)
	}
}

// syncBoundClaim keeps a bound claim bound, or marks it Lost.
func (c *Controller) syncBoundClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	if pvc.Spec.VolumeName == "" {
		return c.claimLost(ctx, pvc, eventClaimLost, "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!")
	}
	obj, found, err := c.volumes.GetByKey(pvc.Spec.VolumeName)
	if err != nil {
		return fmt.Errorf("find volume %s in the controller's cache: %w", pvc.Spec.VolumeName, err)
	}
	pv, _ := obj.(*corev1.PersistentVolume)
	switch {
	case !found || pv == nil:
		return c.claimLost(ctx, pvc, eventClaimLost, "Bound claim has lost its PersistentVolume. Data on the volume is lost!")
	case pv.Spec.ClaimRef == nil, pv.Spec.ClaimRef.UID == pvc.UID:
		// Unbound volume, or an informer behind the controller's writes:
		// bind again (nothing is written when all is set).
		return c.bind(ctx, pv, pvc)
	default:
		return c.claimLost(ctx, pvc, eventClaimMisbound, "Two claims are bound to the same volume, this one is bound incorrectly")
	}
}

func (c *Controller) claimLost(ctx context.Context, pvc *corev1.PersistentVolumeClaim, reason, message string) error {
	if pvc.Status.Phase == corev1.ClaimLost {
		return nil // the event was given when it became Lost
	}
	updated, err := c.updateClaimStatus(ctx, pvc, corev1.ClaimLost, nil)
	if err != nil {
		return err
	}
	c.events.Event(updated, corev1.EventTypeWarning, reason, message)
	return nil
}

// checkVolumeSatisfyClaim is upstream's test of a volume a claim names.
func checkVolumeSatisfyClaim(pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) error {
	requested := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	capacity := pv.Spec.Capacity[corev1.ResourceStorage]
	switch {
	case pv.DeletionTimestamp != nil:
		return fmt.Errorf("the volume is marked for deletion %q", pv.Name)
	case capacity.Value() < requested.Value():
		return errors.New("requested PV is too small")
	case storagehelpers.GetPersistentVolumeClass(pv) != storagehelpers.GetPersistentVolumeClaimClass(pvc):
		return errors.New("storageClassName does not match")
	case ptr.Deref(pvc.Spec.VolumeAttributesClassName, "") != ptr.Deref(pv.Spec.VolumeAttributesClassName, ""):
		return errors.New("volumeAttributesClassName does not match")
	case storagehelpers.CheckVolumeModeMismatches(&pvc.Spec, &pv.Spec):
		return errors.New("incompatible volumeMode")
	case !storagehelpers.CheckAccessModes(pvc, pv):
		return errors.New("incompatible accessMode")
	}
	return nil
}

// bind is upstream's: the volume, its status, the claim, its status, each
// written only if it changes. An error leaves the rest to the next sync.
func (c *Controller) bind(ctx context.Context, pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) error {
	klog.FromContext(ctx).V(4).Info("Binding volume to claim", "PVC", klog.KObj(pvc), "volumeName", pv.Name)
	pv, err := c.bindVolumeToClaim(ctx, pv, pvc)
	if err != nil {
		return err
	}
	if pv, err = c.updateVolumePhase(ctx, pv, corev1.VolumeBound, ""); err != nil {
		return err
	}
	if pvc, err = c.bindClaimToVolume(ctx, pvc, pv); err != nil {
		return err
	}
	_, err = c.updateClaimStatus(ctx, pvc, corev1.ClaimBound, pv)
	return err
}

// bindVolumeToClaim sets the volume's claimRef (and bound-by-controller if
// the controller chose the volume).
func (c *Controller) bindVolumeToClaim(ctx context.Context, pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) (*corev1.PersistentVolume, error) {
	clone, dirty, err := storagehelpers.GetBindVolumeToClaim(pv, pvc)
	if err != nil || !dirty {
		return pv, err
	}
	return c.updateVolume(ctx, clone)
}

// bindClaimToVolume sets the claim's volumeName (and bound-by-controller
// if it was not set) and bind-completed.
func (c *Controller) bindClaimToVolume(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, error) {
	clone, dirty := pvc.DeepCopy(), false
	if pvc.Spec.VolumeName != pv.Name {
		clone.Spec.VolumeName, dirty = pv.Name, true
		if !metav1.HasAnnotation(clone.ObjectMeta, storagehelpers.AnnBoundByController) {
			metav1.SetMetaDataAnnotation(&clone.ObjectMeta, storagehelpers.AnnBoundByController, "yes")
		}
	}
	if !metav1.HasAnnotation(clone.ObjectMeta, storagehelpers.AnnBindCompleted) {
		metav1.SetMetaDataAnnotation(&clone.ObjectMeta, storagehelpers.AnnBindCompleted, "yes")
		dirty = true
	}
	if !dirty {
		return pvc, nil
	}
	klog.FromContext(ctx).V(2).Info("Volume bound to claim", "PVC", klog.KObj(pvc), "volumeName", pv.Name)
	return c.updateClaim(ctx, clone)
}

// updateClaimStatus is upstream's: the phase, and the access modes and
// capacity of the volume (cleared without one); the capacity only as the
// claim becomes Bound, and the attributes class only from Pending to Bound.
func (c *Controller) updateClaimStatus(ctx context.Context, pvc *corev1.PersistentVolumeClaim, phase corev1.PersistentVolumeClaimPhase,
	pv *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, error) {
	clone := pvc.DeepCopy()
	clone.Status.Phase = phase
	if pv == nil {
		clone.Status.AccessModes, clone.Status.Capacity, clone.Status.CurrentVolumeAttributesClassName = nil, nil, nil
	} else {
		clone.Status.AccessModes = pv.Spec.AccessModes
		if pvc.Status.Phase != phase {
			capacity, ok := pv.Spec.Capacity[corev1.ResourceStorage]
			if !ok {
				return nil, fmt.Errorf("PersistentVolume %q is without a storage capacity", pv.Name)
			}
			if have, ok := pvc.Status.Capacity[corev1.ResourceStorage]; !ok || capacity.Cmp(have) != 0 {
				clone.Status.Capacity = pv.Spec.Capacity
			}
		}
		if pvc.Status.Phase == corev1.ClaimPending && phase == corev1.ClaimBound {
			clone.Status.CurrentVolumeAttributesClassName = pv.Spec.VolumeAttributesClassName
		}
	}
	if equality.Semantic.DeepEqual(clone.Status, pvc.Status) {
		return pvc, nil
	}
	updated, err := c.client.CoreV1().PersistentVolumeClaims(clone.Namespace).UpdateStatus(ctx, clone, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("update status of claim %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	if _, err := storeUpdate(ctx, c.claims, updated); err != nil {
		return nil, err
	}
	klog.FromContext(ctx).V(2).Info("Claim entered phase", "PVC", klog.KObj(pvc), "phase", phase)
	return updated, nil
}

// updateClaim writes a claim and keeps the written copy.
func (c *Controller) updateClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	updated, err := c.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(ctx, pvc, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("update claim %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	if _, err := storeUpdate(ctx, c.claims, updated); err != nil {
		return nil, err
	}
	return updated, nil
}
