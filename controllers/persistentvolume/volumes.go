package persistentvolume

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
)

// syncVolume is upstream's: a volume with no claim (or one pre-bound to a
// claim not bound yet) is Available; one whose claim is gone is Released
// and reclaimed; one whose claim is bound to it is Bound; one whose claim
// is bound elsewhere is let go.
func (c *Controller) syncVolume(ctx context.Context, pv *corev1.PersistentVolume) error {
	klog.FromContext(ctx).V(4).Info("Synchronizing PersistentVolume", "volumeName", pv.Name)
	pv, err := c.updateDeletionFinalizers(ctx, pv)
	if err != nil {
		return err
	}
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID == "" {
		// Unused, or reserved for a claim whose own sync binds it.
		_, err := c.updateVolumePhase(ctx, pv, corev1.VolumeAvailable, "")
		return err
	}
	pvc, err := c.claimOfVolume(ctx, pv)
	if err != nil {
		return err
	}
	switch {
	case pvc == nil:
		return c.release(ctx, pv)
	case pvc.Spec.VolumeName == "":
		if storagehelpers.CheckVolumeModeMismatches(&pvc.Spec, &pv.Spec) {
			// The claim's sync will never choose this volume.
			c.events.Event(pv, corev1.EventTypeWarning, eventVolumeMismatch,
				fmt.Sprintf("Cannot bind PersistentVolume to requested PersistentVolumeClaim %q due to incompatible volumeMode.", pvc.Name))
			c.events.Event(pvc, corev1.EventTypeWarning, eventVolumeMismatch,
				fmt.Sprintf("Cannot bind PersistentVolume %q to requested PersistentVolumeClaim due to incompatible volumeMode.", pv.Name))
			return nil
		}
		// Bound (or provisioned) for a claim that is not bound yet: its
		// sync finishes the binding, sooner if queued now.
		c.claimQueue.Add(pvc.Namespace + "/" + pvc.Name)
		return nil
	case pvc.Spec.VolumeName == pv.Name:
		_, err := c.updateVolumePhase(ctx, pv, corev1.VolumeBound, "")
		return err
	case metav1.HasAnnotation(pv.ObjectMeta, storagehelpers.AnnDynamicallyProvisioned) && pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete:
		// Provisioned for a claim that was bound elsewhere: not needed.
		return c.release(ctx, pv)
	default:
		return c.unbindVolume(ctx, pv)
	}
}

// claimOfVolume is the claim of the volume's claimRef, or nil if it is
// gone. A claim the caches lack is looked for on the server before a
// volume is released (a provisioner's volume may come before its claim
// reaches the informer), and a claim of another UID is checked there too.
func (c *Controller) claimOfVolume(ctx context.Context, pv *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, error) {
	ref := pv.Spec.ClaimRef
	obj, found, err := c.claims.GetByKey(ref.Namespace + "/" + ref.Name)
	if err != nil {
		return nil, fmt.Errorf("find claim %s/%s in the controller's cache: %w", ref.Namespace, ref.Name, err)
	}
	pvc, _ := obj.(*corev1.PersistentVolumeClaim)
	if !found && pv.Status.Phase != corev1.VolumeReleased && pv.Status.Phase != corev1.VolumeFailed {
		if pvc, err = c.claimLister.PersistentVolumeClaims(ref.Namespace).Get(ref.Name); apierrors.IsNotFound(err) {
			pvc, err = c.client.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		}
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("get claim %s/%s: %w", ref.Namespace, ref.Name, err)
		}
	}
	if pvc != nil && pvc.UID != ref.UID {
		// Perhaps a newer claim of the same name; perhaps an old copy.
		pvc, err = c.client.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || err == nil && pvc.UID != ref.UID {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("get claim %s/%s: %w", ref.Namespace, ref.Name, err)
		}
	}
	return pvc, nil
}

// release marks the volume Released (a Failed one stays Failed, for its
// user to see) and carries out its reclaim policy.
func (c *Controller) release(ctx context.Context, pv *corev1.PersistentVolume) error {
	if pv.Status.Phase != corev1.VolumeReleased && pv.Status.Phase != corev1.VolumeFailed {
		klog.FromContext(ctx).V(2).Info("Volume is released and reclaim policy will be executed", "volumeName", pv.Name,
			"reclaimPolicy", pv.Spec.PersistentVolumeReclaimPolicy)
		var err error
		if pv, err = c.updateVolumePhase(ctx, pv, corev1.VolumeReleased, ""); err != nil {
			return err
		}
	}
	return c.reclaimVolume(ctx, pv)
}

// reclaimVolume is upstream's: Retain keeps the volume, Recycle and Delete
// go to the volume's in-tree plugin or are left to its external
// provisioner, anything else fails the volume.
func (c *Controller) reclaimVolume(ctx context.Context, pv *corev1.PersistentVolume) error {
	if pv.Annotations[storagehelpers.AnnMigratedTo] != "" {
		return nil // the CSI driver's provisioner reclaims it
	}
	switch pv.Spec.PersistentVolumeReclaimPolicy {
	case corev1.PersistentVolumeReclaimRetain:
		return nil
	case corev1.PersistentVolumeReclaimRecycle:
		return c.recycleVolume(ctx, pv)
	case corev1.PersistentVolumeReclaimDelete:
		return c.deleteVolume(ctx, pv)
	default:
		_, err := c.updateVolumePhaseWithEvent(ctx, pv, corev1.VolumeFailed, corev1.EventTypeWarning, eventVolumeUnknownReclaim,
			"Volume has unrecognized PersistentVolumeReclaimPolicy")
		return err
	}
}

// unbindVolume rolls a binding back: a volume the controller bound is
// freed, one a user pre-bound keeps its claim's name and loses its UID.
func (c *Controller) unbindVolume(ctx context.Context, pv *corev1.PersistentVolume) error {
	clone := pv.DeepCopy()
	if metav1.HasAnnotation(pv.ObjectMeta, storagehelpers.AnnBoundByController) {
		clone.Spec.ClaimRef = nil
		delete(clone.Annotations, storagehelpers.AnnBoundByController)
		if len(clone.Annotations) == 0 {
			clone.Annotations = nil
		}
	} else {
		clone.Spec.ClaimRef.UID = ""
	}
	updated, err := c.updateVolume(ctx, clone)
	if err != nil {
		return err
	}
	_, err = c.updateVolumePhase(ctx, updated, corev1.VolumeAvailable, "")
	return err
}

// isVolumeReleased: the volume's claim is gone, or bound to another volume.
func (c *Controller) isVolumeReleased(pv *corev1.PersistentVolume) (bool, error) {
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID == "" {
		return false, nil
	}
	obj, found, err := c.claims.GetByKey(pv.Spec.ClaimRef.Namespace + "/" + pv.Spec.ClaimRef.Name)
	if err != nil {
		return false, fmt.Errorf("find claim of volume %s in the controller's cache: %w", pv.Name, err)
	}
	if pvc, ok := obj.(*corev1.PersistentVolumeClaim); found && ok && pvc.UID == pv.Spec.ClaimRef.UID {
		return pvc.Spec.VolumeName != "" && pvc.Spec.VolumeName != pv.Name, nil
	}
	return true, nil
}

// updateDeletionFinalizers is upstream's modifyDeletionFinalizers for
// volumes an in-tree plugin provisioned: kubernetes.io/pv-controller while
// the policy is Delete, and never the external provisioner's finalizer.
func (c *Controller) updateDeletionFinalizers(ctx context.Context, pv *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
	if !strings.HasPrefix(pv.Annotations[storagehelpers.AnnDynamicallyProvisioned], "kubernetes.io/") {
		return pv, nil
	}
	want := slices.DeleteFunc(slices.Clone(pv.Finalizers), func(f string) bool { return f == storagehelpers.PVDeletionProtectionFinalizer })
	switch pv.Spec.PersistentVolumeReclaimPolicy {
	case corev1.PersistentVolumeReclaimDelete:
		if !slices.Contains(want, storagehelpers.PVDeletionInTreeProtectionFinalizer) {
			want = append(want, storagehelpers.PVDeletionInTreeProtectionFinalizer)
		}
	case corev1.PersistentVolumeReclaimRetain, corev1.PersistentVolumeReclaimRecycle:
		want = slices.DeleteFunc(want, func(f string) bool { return f == storagehelpers.PVDeletionInTreeProtectionFinalizer })
	}
	if slices.Equal(want, pv.Finalizers) {
		return pv, nil
	}
	clone := pv.DeepCopy()
	clone.Finalizers = want
	return c.updateVolume(ctx, clone)
}

// updateVolumePhase writes the volume's phase and message, if the phase
// changes.
func (c *Controller) updateVolumePhase(ctx context.Context, pv *corev1.PersistentVolume, phase corev1.PersistentVolumePhase, message string) (*corev1.PersistentVolume, error) {
	if pv.Status.Phase == phase {
		return pv, nil
	}
	clone := pv.DeepCopy()
	clone.Status.Phase, clone.Status.Message = phase, message
	updated, err := c.client.CoreV1().PersistentVolumes().UpdateStatus(ctx, clone, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("update status of volume %s: %w", pv.Name, err)
	}
	if _, err := storeUpdate(ctx, c.volumes, updated); err != nil {
		return nil, err
	}
	klog.FromContext(ctx).V(2).Info("Volume entered phase", "volumeName", pv.Name, "phase", phase)
	return updated, nil
}

// updateVolumePhaseWithEvent gives the event only when the phase changes.
func (c *Controller) updateVolumePhaseWithEvent(ctx context.Context, pv *corev1.PersistentVolume, phase corev1.PersistentVolumePhase,
	eventType, reason, message string) (*corev1.PersistentVolume, error) {
	if pv.Status.Phase == phase {
		return pv, nil
	}
	updated, err := c.updateVolumePhase(ctx, pv, phase, message)
	if err != nil {
		return nil, err
	}
	c.events.Event(updated, eventType, reason, message)
	return updated, nil
}

// updateVolume writes a volume and keeps the written copy.
func (c *Controller) updateVolume(ctx context.Context, pv *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
	updated, err := c.client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("update volume %s: %w", pv.Name, err)
	}
	if _, err := storeUpdate(ctx, c.volumes, updated); err != nil {
		return nil, err
	}
	return updated, nil
}
