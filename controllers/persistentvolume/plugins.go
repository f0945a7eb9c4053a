package persistentvolume

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
)

// The in-tree volume plugins kube-controller-manager's PV controller
// loads (those that provision, delete or recycle): host-path (provisioning
// off by default, as --enable-hostpath-provisioner is) and nfs (recycling
// only). kubeembed has no disks: their deleting and recycling succeed
// without touching one.
const (
	pluginHostPath = "kubernetes.io/host-path"
	pluginNFS      = "kubernetes.io/nfs"
)

// hostPathDeletable is the host-path deleter's rule: it only deletes
// under /tmp.
var hostPathDeletable = regexp.MustCompile("/tmp/.+")

// external reports whether a provisioner is not an in-tree plugin, so that
// the controller leaves its claims and volumes to it.
func external(provisioner string) bool { return !strings.HasPrefix(provisioner, "kubernetes.io/") }

// inTreeProvisionError is why kube-controller-manager cannot provision with
// an in-tree provisioner: it has none that is enabled.
func inTreeProvisionError(provisioner string) string {
	switch provisioner {
	case pluginHostPath:
		return fmt.Sprintf("Failed to create provisioner: provisioning in volume plugin %q is disabled", pluginHostPath)
	case pluginNFS:
		return "no provisionable volume plugin matched"
	}
	return "no volume plugin matched name: " + provisioner
}

// deletablePlugin is upstream's findDeletablePlugin: the in-tree plugin
// that deletes the volume, "" for an external deleter, or an error.
func deletablePlugin(pv *corev1.PersistentVolume) (string, error) {
	if name := pv.Annotations[storagehelpers.AnnDynamicallyProvisioned]; name != "" {
		switch {
		case external(name):
			return "", nil
		case name == pluginHostPath:
			return name, nil
		case name == pluginNFS:
			return "", errors.New("no deletable volume plugin matched")
		}
		return "", errors.New("no volume plugin matched name: " + name)
	}
	if pv.Annotations[storagehelpers.AnnMigratedTo] != "" || pv.Spec.CSI != nil {
		return "", nil
	}
	var err error
	switch {
	case pv.Spec.HostPath != nil:
		return pluginHostPath, nil
	case pv.Spec.NFS != nil:
		err = errors.New("no deletable volume plugin matched")
	default:
		err = errors.New("no volume plugin matched")
	}
	return "", fmt.Errorf("error getting deleter volume plugin for volume %q: %w", pv.Name, err)
}

// deleteVolume is upstream's deleteVolumeOperation, run in the volume
// worker rather than a goroutine of its own: an external provisioner's
// volume is left to it; an in-tree one is deleted (after a fresh look that
// it is still released), its in-tree finalizer removed and the volume
// object deleted. A failure marks the volume Failed with the event
// VolumeFailedDelete; the resync tries again.
func (c *Controller) deleteVolume(ctx context.Context, pv *corev1.PersistentVolume) error {
	plugin, err := deletablePlugin(pv)
	if err != nil {
		_, err = c.updateVolumePhaseWithEvent(ctx, pv, corev1.VolumeFailed, corev1.EventTypeWarning, eventVolumeFailedDelete, err.Error())
		return err
	}
	if plugin == "" {
		klog.FromContext(ctx).V(3).Info("External deleter for volume requested, ignoring", "volumeName", pv.Name)
		return nil
	}
	current, err := c.client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
	if err != nil {
		return nil // gone, or the next sync tries again
	}
	if released, err := c.isVolumeReleased(current); err != nil || !released {
		return nil
	}
	if path := current.Spec.HostPath; path == nil || !hostPathDeletable.MatchString(path.Path) {
		where := ""
		if path != nil {
			where = path.Path
		}
		_, err = c.updateVolumePhaseWithEvent(ctx, current, corev1.VolumeFailed, corev1.EventTypeWarning, eventVolumeFailedDelete,
			"host_path deleter only supports /tmp/.+ but received provided "+where)
		return err
	}
	if slices.Contains(current.Finalizers, storagehelpers.PVDeletionInTreeProtectionFinalizer) {
		clone := current.DeepCopy()
		clone.Finalizers = slices.DeleteFunc(clone.Finalizers, func(f string) bool { return f == storagehelpers.PVDeletionInTreeProtectionFinalizer })
		if _, err := c.updateVolume(ctx, clone); err != nil {
			return err
		}
	}
	err = c.client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		klog.FromContext(ctx).V(3).Info("Failed to delete volume from database", "volumeName", pv.Name, "err", err)
	}
	return nil
}

// recycleVolume is upstream's recycleVolumeOperation: host-path and NFS
// volumes are recycled (here at once, with no recycler pod) and made
// Available again; others are marked Failed.
func (c *Controller) recycleVolume(ctx context.Context, pv *corev1.PersistentVolume) error {
	current, err := c.client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
	if err != nil {
		return nil // gone, or the next sync tries again
	}
	if released, err := c.isVolumeReleased(current); err != nil || !released {
		return nil
	}
	if current.Spec.HostPath == nil && current.Spec.NFS == nil {
		_, err = c.updateVolumePhaseWithEvent(ctx, current, corev1.VolumeFailed, corev1.EventTypeWarning, eventVolumeFailedRecycle,
			"No recycler plugin found for the volume!")
		return err
	}
	c.events.Event(current, corev1.EventTypeNormal, eventVolumeRecycled, "Volume recycled")
	return c.unbindVolume(ctx, current)
}
