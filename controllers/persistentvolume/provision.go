package persistentvolume

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"

	"github.com/kubeembed/apiserver/internal/volumes"
	"github.com/kubeembed/apiserver/internal/writes"
)

// class returns the named StorageClass, from the informer or else from
// the server: a class created just before its claim may reach this
// controller's informer after the claim does, which on kube-controller-
// manager is a rare race and in process a common one.
func (c *Controller) class(ctx context.Context, name string) (*storagev1.StorageClass, error) {
	class, err := c.classLister.Get(name)
	if !apierrors.IsNotFound(err) {
		return class, err
	}
	class, liveErr := c.client.StorageV1().StorageClasses().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(liveErr) {
		return nil, err // the lister's error, whose message events quote
	}
	return class, liveErr
}

// delayBinding is upstream's IsDelayBindingMode: the claim's class exists
// and waits for its first consumer.
func (c *Controller) delayBinding(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (bool, error) {
	name := storagehelpers.GetPersistentVolumeClaimClass(pvc)
	if name == "" {
		return false, nil
	}
	class, err := c.class(ctx, name)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get storage class %s: %w", name, err)
	}
	if class.VolumeBindingMode == nil {
		return false, fmt.Errorf("VolumeBindingMode not set for StorageClass %q", name)
	}
	return *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer, nil
}

// assignDefaultStorageClass gives a claim with no class the default one
// (what the DefaultStorageClass admission plugin does at create, for
// claims created before there was a default), and reports whether it did.
func (c *Controller) assignDefaultStorageClass(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (bool, error) {
	if storagehelpers.PersistentVolumeClaimHasClass(pvc) {
		return false, nil
	}
	classes, err := c.classLister.List(labels.Everything())
	if err != nil {
		return false, fmt.Errorf("list storage classes: %w", err)
	}
	def := volumes.DefaultClass(classes)
	if def == nil {
		return false, nil
	}
	clone := pvc.DeepCopy()
	clone.Spec.StorageClassName = &def.Name
	if _, err := c.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(ctx, clone, metav1.UpdateOptions{}); err != nil {
		return false, fmt.Errorf("can't update PersistentVolumeClaim[%q]: %w", pvc.Namespace+"/"+pvc.Name, err)
	}
	klog.FromContext(ctx).V(4).Info("Assigned the default StorageClass", "PVC", klog.KObj(pvc), "storageClassName", def.Name)
	return true, nil
}

// eventForDelayedClaim tells why a WaitForFirstConsumer claim waits: for
// a consumer, or for its consumers (pods that reference it and have not
// terminated) to be scheduled.
func (c *Controller) eventForDelayedClaim(pvc *corev1.PersistentVolumeClaim) error {
	// The pods are the informer's: it must hold every pod written before
	// this version of the claim, or a consumer created just before is
	// missed until the claim's next sync (CI: a pod created, then its claim
	// changed, and no WaitForPodScheduled). Retried as after a failure.
	if c.revisions != nil {
		if err := c.Observer.ListersCaughtUpTo(c.revisions.Snapshot(), writes.Revision(pvc)); err != nil {
			return fmt.Errorf("listers behind claim %s/%s: %w", pvc.Namespace, pvc.Name, err)
		}
	}
	objs, err := c.pods.ByIndex(volumes.PodClaimsIndex, pvc.Namespace+"/"+pvc.Name)
	if err != nil {
		return fmt.Errorf("pods of claim %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	var waiting []string
	for _, o := range objs {
		if pod, ok := o.(*corev1.Pod); ok && !terminated(pod) && pod.Spec.NodeName == "" {
			waiting = append(waiting, pod.Name)
		}
	}
	reason, message := eventWaitForFirstConsumer, messageWaitForFirstConsume
	switch len(waiting) {
	case 0:
	case 1:
		reason, message = eventWaitForPodScheduled, "waiting for pod "+waiting[0]+" to be scheduled"
	default:
		// Only one pod's scheduling counts, but which one is not known.
		reason, message = eventWaitForPodScheduled, "waiting for pods "+strings.Join(waiting, ",")+" to be scheduled"
	}
	c.events.Event(pvc, corev1.EventTypeNormal, reason, message)
	return nil
}

// terminated is upstream's volume util IsPodTerminated.
func terminated(pod *corev1.Pod) bool {
	s := pod.Status
	return s.Phase == corev1.PodFailed || s.Phase == corev1.PodSucceeded ||
		pod.DeletionTimestamp != nil && notRunning(s.InitContainerStatuses) && notRunning(s.ContainerStatuses) && notRunning(s.EphemeralContainerStatuses)
}

func notRunning(statuses []corev1.ContainerStatus) bool {
	for _, s := range statuses {
		if s.State.Terminated == nil && s.State.Waiting == nil {
			return false
		}
	}
	return true
}

// provisionClaim is upstream's provisionClaim with
// provisionClaimOperationExternal, run in the claim worker: the claim is
// annotated with its class's provisioner, which then creates its volume,
// and the event ExternalProvisioning says so (on every sync until the
// volume comes, as upstream). A missing class, or an in-tree provisioner
// kube-controller-manager cannot run, gives ProvisioningFailed; the resync
// tries again.
func (c *Controller) provisionClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	name := storagehelpers.GetPersistentVolumeClaimClass(pvc)
	class, err := c.class(ctx, name)
	if err != nil {
		c.events.Event(pvc, corev1.EventTypeWarning, eventProvisioningFailed, err.Error())
		klog.FromContext(ctx).V(2).Info("Error finding provisioning plugin for claim", "PVC", klog.KObj(pvc), "err", err)
		return nil
	}
	if !external(class.Provisioner) && class.Provisioner != pluginHostPath {
		c.events.Event(pvc, corev1.EventTypeWarning, eventProvisioningFailed, inTreeProvisionError(class.Provisioner))
		return nil
	}
	updated, err := c.setClaimProvisioner(ctx, pvc, class.Provisioner)
	if err != nil {
		c.events.Event(pvc, corev1.EventTypeWarning, eventProvisioningFailed, "Error saving claim: "+err.Error())
		return err
	}
	if !external(class.Provisioner) {
		c.events.Event(updated, corev1.EventTypeWarning, eventProvisioningFailed, inTreeProvisionError(class.Provisioner))
		return nil
	}
	c.events.Event(updated, corev1.EventTypeNormal, eventExternalProvisioning, fmt.Sprintf("Waiting for a volume to be created either by the external provisioner '%s' "+
		"or manually by the system administrator. If volume creation is delayed, please verify that "+
		"the provisioner is running and correctly registered.", class.Provisioner))
	return nil
}

// setClaimProvisioner annotates the claim with the provisioner that is to
// create its volume (both keys, the beta one still read by some), unless
// it already is.
func (c *Controller) setClaimProvisioner(ctx context.Context, pvc *corev1.PersistentVolumeClaim, provisioner string) (*corev1.PersistentVolumeClaim, error) {
	if pvc.Annotations[storagehelpers.AnnStorageProvisioner] == provisioner {
		return pvc, nil
	}
	clone := pvc.DeepCopy()
	metav1.SetMetaDataAnnotation(&clone.ObjectMeta, storagehelpers.AnnBetaStorageProvisioner, provisioner)
	metav1.SetMetaDataAnnotation(&clone.ObjectMeta, storagehelpers.AnnStorageProvisioner, provisioner)
	return c.updateClaim(ctx, clone)
}
