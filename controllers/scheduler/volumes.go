package scheduler

// The VolumeBinding plugin's part: a pod's claims must be bound, or of a
// WaitForFirstConsumer class that can provision on the chosen node; for
// those the scheduler names the node on the claims
// (volume.kubernetes.io/selected-node) and binds the pod once they are
// bound, as upstream's PreBind waits.

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/storage/ephemeral"
	volumeutil "k8s.io/component-helpers/storage/volume"

	"github.com/kubeembed/apiserver/internal/volumes"
)

// claims are a pod's claims by how the scheduler treats them.
type claims struct {
	bound []*corev1.PersistentVolumeClaim
	// delayed are unbound claims of WaitForFirstConsumer classes, with
	// their classes.
	delayed []*corev1.PersistentVolumeClaim
	classes map[string]*storagev1.StorageClass
}

// prefilterVolumes classifies the pod's claims, or says why the pod cannot
// be scheduled anywhere (a claim that is missing, lost, being deleted, not
// its own for an ephemeral volume, or unbound and not waiting for its
// first consumer).
func (s *Scheduler) prefilterVolumes(pod *corev1.Pod) (claims, string) {
	cl := claims{classes: map[string]*storagev1.StorageClass{}}
	unboundImmediate := false
	for i := range pod.Spec.Volumes {
		pvc, msg := s.podClaim(pod, &pod.Spec.Volumes[i])
		if msg != "" {
			return cl, msg
		}
		if pvc == nil {
			continue
		}
		if pvc.Spec.VolumeName != "" && metav1.HasAnnotation(pvc.ObjectMeta, volumeutil.AnnBindCompleted) {
			cl.bound = append(cl.bound, pvc)
			continue
		}
		className := volumeutil.GetPersistentVolumeClaimClass(pvc)
		class, err := s.classes.Get(className)
		if err == nil && class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer && pvc.Spec.VolumeName == "" {
			cl.delayed = append(cl.delayed, pvc)
			cl.classes[className] = class
			continue
		}
		unboundImmediate = true
	}
	if unboundImmediate {
		return cl, "pod has unbound immediate PersistentVolumeClaims"
	}
	return cl, ""
}

// podClaim is the claim volume v of pod uses (volumes.ClaimName), nil for
// none; a claim the pod cannot use is said why, as the VolumeBinding
// plugin's PreFilter says it.
func (s *Scheduler) podClaim(pod *corev1.Pod, v *corev1.Volume) (*corev1.PersistentVolumeClaim, string) {
	name := volumes.ClaimName(pod, v)
	if name == "" {
		return nil, ""
	}
	pvc, err := s.pvcs.PersistentVolumeClaims(pod.Namespace).Get(name)
	switch {
	case err != nil && v.Ephemeral != nil:
		// Normal just after the pod is made.
		return nil, fmt.Sprintf("waiting for ephemeral volume controller to create the persistentvolumeclaim %q", name)
	case err != nil:
		return nil, fmt.Sprintf("persistentvolumeclaim %q not found", name)
	case pvc.Status.Phase == corev1.ClaimLost:
		return nil, fmt.Sprintf("persistentvolumeclaim %q bound to non-existent persistentvolume %q", pvc.Name, pvc.Spec.VolumeName)
	case pvc.DeletionTimestamp != nil:
		return nil, fmt.Sprintf("persistentvolumeclaim %q is being deleted", name)
	}
	if v.Ephemeral != nil {
		if err := ephemeral.VolumeIsForPod(pod, pvc); err != nil {
			return nil, err.Error()
		}
	}
	return pvc, ""
}

// volumeBinding: the node matches the bound claims' volumes' node
// affinity, and can get the delayed claims' volumes provisioned.
func (c *cycle) volumeBinding(ni *nodeInfo) *status {
	for _, pvc := range c.claims.bound {
		pv, err := c.s.pvs.Get(pvc.Spec.VolumeName)
		if err != nil {
			return reject(unresolvable, "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)")
		}
		if volumeutil.CheckNodeAffinity(pv, ni.node.Labels) != nil {
			return reject(unresolvable, "node(s) didn't match PersistentVolume's node affinity")
		}
	}
	for _, pvc := range c.claims.delayed {
		if selected := pvc.Annotations[volumeutil.AnnSelectedNode]; selected != "" && selected != ni.node.Name {
			return reject(unresolvable, "node(s) didn't find available persistent volumes to bind")
		}
		class := c.claims.classes[volumeutil.GetPersistentVolumeClaimClass(pvc)]
		if class.Provisioner == "" || class.Provisioner == volumeutil.NotSupportedProvisioner {
			return reject(unresolvable, "node(s) didn't find available persistent volumes to bind")
		}
	}
	return nil
}

// provisioning is a pod's wait for its claims' volumes on node: selected
// are the resourceVersions of the claims the scheduler named the node on,
// by claim name. Until the informer shows a claim at least that new, its
// missing selected-node annotation is the informer's delay, not a failed
// provisioning (upstream's assume cache holds the updated claims so).
type provisioning struct {
	node     string
	selected map[string]string
}

// selectNode names node on the pod's delayed claims, after recording it as
// the pod's nominated node (kube-scheduler v1.37 does both before binding
// volumes), and returns the claims' resourceVersions after the update; the
// pod is bound once the claims are.
func (s *Scheduler) selectNode(ctx context.Context, pod *corev1.Pod, delayed []*corev1.PersistentVolumeClaim, node string) (map[string]string, error) {
	if pod.Status.NominatedNodeName != node {
		updated := pod.Status.DeepCopy()
		updated.NominatedNodeName = node
		if err := s.patchStatus(ctx, pod, *updated); err != nil {
			return nil, err
		}
	}
	selected := map[string]string{}
	for _, pvc := range delayed {
		if pvc.Annotations[volumeutil.AnnSelectedNode] == node {
			continue
		}
		claim := pvc.DeepCopy()
		if claim.Annotations == nil {
			claim.Annotations = map[string]string{}
		}
		claim.Annotations[volumeutil.AnnSelectedNode] = node
		updated, err := s.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, claim, metav1.UpdateOptions{})
		if err != nil {
			return nil, fmt.Errorf("select node %s for claim %s/%s: %w", node, claim.Namespace, claim.Name, err)
		}
		selected[claim.Name] = updated.ResourceVersion
	}
	return selected, nil
}

// volumesBound reports whether the pod's claims are bound now (its
// volumes provisioned), or an error when a claim's provisioning was given
// up (its selected node removed).
func (s *Scheduler) volumesBound(pod *corev1.Pod, p provisioning) (bool, error) {
	for i := range pod.Spec.Volumes {
		name := volumes.ClaimName(pod, &pod.Spec.Volumes[i])
		if name == "" {
			continue
		}
		pvc, err := s.pvcs.PersistentVolumeClaims(pod.Namespace).Get(name)
		if apierrors.IsNotFound(err) {
			return false, fmt.Errorf("persistentvolumeclaim %q not found", name)
		}
		if err != nil {
			return false, err
		}
		if pvc.Spec.VolumeName != "" && metav1.HasAnnotation(pvc.ObjectMeta, volumeutil.AnnBindCompleted) {
			continue
		}
		if pvc.Annotations[volumeutil.AnnSelectedNode] != p.node && !olderThan(pvc, p.selected[pvc.Name]) {
			return false, fmt.Errorf("provisioning failed for PVC %q", pvc.Name)
		}
		return false, nil
	}
	return true, nil
}

// olderThan reports whether the informer's claim is older than the
// resourceVersion rv the scheduler's own update gave it.
func olderThan(pvc *corev1.PersistentVolumeClaim, rv string) bool {
	if rv == "" {
		return false
	}
	have, err1 := strconv.ParseUint(pvc.ResourceVersion, 10, 64)
	want, err2 := strconv.ParseUint(rv, 10, 64)
	return err1 == nil && err2 == nil && have < want
}
