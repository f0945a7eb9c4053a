package provisioner

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/reference"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// The claim events, as the library gives them.
const (
	eventProvisioning          = "Provisioning"
	eventProvisioningSucceeded = "ProvisioningSucceeded"
	eventProvisioningFailed    = "ProvisioningFailed"
)

// Annotations the library reads besides component-helpers' ones.
const (
	annAlphaSelectedNode = "volume.alpha.kubernetes.io/selected-node"
	hostnameLabel        = "kubernetes.io/hostname"
)

// errStop ends a claim's provisioning without a retry (the library's
// errStopProvision).
var errStop = errors.New("stop provisioning")

// syncClaim provisions a claim that asks this provisioner for a volume,
// giving up after failedThreshold failures in a row.
func (c *Controller) syncClaim(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // not a key this controller made
	}
	pvc, err := c.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		err = c.provisionIfAsked(ctx, pvc)
	}
	if errors.Is(err, errStop) {
		return nil
	}
	if err != nil && c.claimQueue.NumRequeues(key) >= failedThreshold {
		klog.FromContext(ctx).Error(err, "Giving up syncing claim because failures >= threshold", "key", key, "threshold", failedThreshold)
		return nil
	}
	return err
}

func (c *Controller) provisionIfAsked(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	should, err := c.shouldProvision(ctx, pvc)
	if err != nil || !should {
		return err
	}
	return c.provision(ctx, pvc)
}

// shouldProvision is the library's: the claim names no volume, asks this
// provisioner, and if its class waits for a consumer, one was scheduled.
func (c *Controller) shouldProvision(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (bool, error) {
	if pvc.Spec.VolumeName != "" {
		return false, nil
	}
	asked, found := pvc.Annotations[storagehelpers.AnnStorageProvisioner]
	if !found {
		asked = pvc.Annotations[storagehelpers.AnnBetaStorageProvisioner]
	}
	if asked != Name {
		return false, nil
	}
	class, err := c.class(ctx, storagehelpers.GetPersistentVolumeClaimClass(pvc))
	if err != nil {
		return false, err
	}
	if ptr.Deref(class.VolumeBindingMode, "") == storagev1.VolumeBindingWaitForFirstConsumer {
		return pvc.Annotations[storagehelpers.AnnSelectedNode] != "", nil
	}
	return true, nil
}

// class returns the named StorageClass, from the informer or else from
// the server (a class created just before may not be in the informer).
func (c *Controller) class(ctx context.Context, name string) (*storagev1.StorageClass, error) {
	class, err := c.classes.Get(name)
	if apierrors.IsNotFound(err) {
		class, err = c.client.StorageV1().StorageClasses().Get(ctx, name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("storageClass %q not found", name)
	}
	return class, err
}

// provision is the library's provisionClaimOperation, with the simulated
// local-path-provisioner's Provision.
func (c *Controller) provision(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	pvName := "pvc-" + string(pvc.UID)
	if _, err := c.volumes.Get(pvName); err == nil {
		return errStop // provisioned already
	}
	claimRef, err := reference.GetReference(scheme.Scheme, pvc)
	if err != nil {
		return fmt.Errorf("reference to claim %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	if ptr.Deref(pvc.Spec.VolumeMode, corev1.PersistentVolumeFilesystem) == corev1.PersistentVolumeBlock {
		c.events.Event(pvc, corev1.EventTypeWarning, eventProvisioningFailed, Name+" does not support block volume provisioning")
		return errStop
	}
	className := storagehelpers.GetPersistentVolumeClaimClass(pvc)
	class, err := c.class(ctx, className)
	if err != nil {
		return err
	}
	if class.Provisioner != Name {
		return errStop // the class changed since the claim was annotated
	}
	node, err := c.selectedNode(ctx, pvc)
	if err != nil {
		return err
	}
	c.events.Event(pvc, corev1.EventTypeNormal, eventProvisioning, fmt.Sprintf("External provisioner is provisioning volume for claim %q", pvc.Namespace+"/"+pvc.Name))
	pv := volumeFor(pvName, pvc, class, node)
	pv.Spec.ClaimRef = claimRef
	metav1.SetMetaDataAnnotation(&pv.ObjectMeta, storagehelpers.AnnDynamicallyProvisioned, class.Provisioner)
	pv.Spec.StorageClassName = className
	if _, err := c.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("error saving volume %s: %w", pvName, err)
	}
	c.events.Event(pvc, corev1.EventTypeNormal, eventProvisioningSucceeded, "Successfully provisioned volume "+pvName)
	return nil
}

// selectedNode is the node the scheduler chose, read from the server as
// the library does without a node lister. One that does not exist is
// given back: the annotation is removed so that the scheduler chooses
// again.
func (c *Controller) selectedNode(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (*corev1.Node, error) {
	name, ok := pvc.Annotations[storagehelpers.AnnSelectedNode]
	if !ok {
		if name, ok = pvc.Annotations[annAlphaSelectedNode]; !ok {
			return nil, nil
		}
	}
	node, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		return node, nil
	case apierrors.IsNotFound(err):
		c.events.Event(pvc, corev1.EventTypeWarning, eventProvisioningFailed, err.Error())
		if _, selected := pvc.Annotations[storagehelpers.AnnSelectedNode]; !selected {
			return nil, err // nothing to give back
		}
		clone := pvc.DeepCopy()
		delete(clone.Annotations, storagehelpers.AnnSelectedNode)
		if _, err := c.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(ctx, clone, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("delete annotation 'annSelectedNode' for PersistentVolumeClaim %q: %w", pvc.Namespace+"/"+pvc.Name, err)
		}
		return nil, errStop
	default:
		err = fmt.Errorf("failed to get target node: %w", err)
		c.events.Event(pvc, corev1.EventTypeWarning, eventProvisioningFailed, err.Error())
		return nil, err
	}
}

// volumeFor is the volume local-path-provisioner makes for a claim: its
// access modes, its request as capacity, the class's reclaim policy, a
// directory named for the volume and the claim, and affinity to the node
// it is on. No directory is made: nothing runs on the nodes.
func volumeFor(name string, pvc *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, node *corev1.Node) *corev1.PersistentVolume {
	dir := path.Join(BasePath, strings.Join([]string{name, pvc.Namespace, pvc.Name}, "_"))
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: ptr.Deref(class.ReclaimPolicy, corev1.PersistentVolumeReclaimDelete),
			AccessModes:                   pvc.Spec.AccessModes,
			VolumeMode:                    ptr.To(corev1.PersistentVolumeFilesystem),
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: pvc.Spec.Resources.Requests[corev1.ResourceStorage]},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: ptr.To(corev1.HostPathDirectoryOrCreate)},
			},
		},
	}
	if node != nil {
		hostname, ok := node.Labels[hostnameLabel]
		if !ok {
			hostname = node.Name
		}
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: hostnameLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{hostname}}},
		}}}}
	}
	return pv
}
