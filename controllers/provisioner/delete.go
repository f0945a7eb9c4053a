package provisioner

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
)

// syncVolume deletes this provisioner's volume once it is Released with
// the reclaim policy Delete (the library's syncVolume and shouldDelete),
// giving up after failedThreshold failures in a row.
func (c *Controller) syncVolume(ctx context.Context, name string) error {
	pv, err := c.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil && ours(pv) {
		err = c.reclaim(ctx, pv)
	}
	if err != nil && c.volumeQueue.NumRequeues(name) >= failedThreshold {
		klog.FromContext(ctx).Error(err, "Giving up syncing volume because failures >= threshold", "key", name, "threshold", failedThreshold)
		return nil
	}
	return err
}

// ours is the library's isProvisionerForVolume: provisioned (or migrated
// to, or for a CSI volume, driven) by this provisioner.
func ours(pv *corev1.PersistentVolume) bool {
	if by, ok := pv.Annotations[storagehelpers.AnnDynamicallyProvisioned]; ok {
		return by == Name || pv.Annotations[storagehelpers.AnnMigratedTo] == Name
	}
	if pv.Spec.CSI != nil {
		return pv.Spec.CSI.Driver == Name
	}
	return pv.Annotations[storagehelpers.AnnMigratedTo] == Name
}

func (c *Controller) reclaim(ctx context.Context, pv *corev1.PersistentVolume) error {
	// The library adds its finalizer only when asked to (CSI's
	// provisioner does, local-path's does not), and otherwise removes it.
	if slices.Contains(pv.Finalizers, storagehelpers.PVDeletionProtectionFinalizer) {
		if err := c.removeFinalizer(ctx, pv); err != nil {
			return err
		}
	}
	if pv.DeletionTimestamp != nil || pv.Status.Phase != corev1.VolumeReleased ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		return nil
	}
	// The simulated storage has nothing to delete but the volume object.
	err := c.client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete volume %s: %w", pv.Name, err)
	}
	return nil
}

// removeFinalizer patches the external provisioner's finalizer away, as
// the library patches finalizers.
func (c *Controller) removeFinalizer(ctx context.Context, pv *corev1.PersistentVolume) error {
	keep := slices.DeleteFunc(slices.Clone(pv.Finalizers), func(f string) bool { return f == storagehelpers.PVDeletionProtectionFinalizer })
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": keep}})
	if err != nil {
		return fmt.Errorf("finalizers patch: %w", err)
	}
	_, err = c.client.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to modify finalizers to %+v on volume %s err: %w", keep, pv.Name, err)
	}
	return nil
}
