package pvcprotection

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-helpers/storage/ephemeral"
	"k8s.io/klog/v2"

	"github.com/kubeembed/apiserver/internal/volumes"
)

// The Unused condition's reasons and messages, as upstream writes them.
const (
	reasonUsed     = "PodUsingPVC"
	messageUsed    = "A pod is currently referencing this PVC"
	reasonUnused   = "NoPodsUsingPVC"
	messageUnused  = "No pods are currently referencing this PVC"
	unusedCondType = corev1.PersistentVolumeClaimUnused
)

// uses tells whether pod uses pvc, for one of the two questions asked.
type uses func(pod *corev1.Pod, pvc *corev1.PersistentVolumeClaim) bool

// sync is upstream's processPVC: the Unused condition of a Bound claim,
// then the finalizer of a deleted one, then the finalizer of a live one.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // not a key this controller made
	}
	pvc, err := c.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get claim %s: %w", key, err)
	}
	if pvc.DeletionTimestamp == nil && pvc.Status.Phase == corev1.ClaimBound {
		used, err := c.used(ctx, pvc, referencesForUnused)
		if err != nil {
			return err
		}
		if err := c.updateUnused(ctx, pvc, used); err != nil {
			return err
		}
	}
	if deletionCandidate(pvc) {
		used, err := c.used(ctx, pvc, usesForDeletion)
		if err != nil {
			return err
		}
		if !used {
			return c.setFinalizers(ctx, pvc, slices.DeleteFunc(slices.Clone(pvc.Finalizers), func(f string) bool { return f == Finalizer }))
		}
		klog.FromContext(ctx).V(2).Info("Keeping PVC because it is being used", "PVC", klog.KObj(pvc))
	}
	if needsFinalizer(pvc) {
		return c.setFinalizers(ctx, pvc, append(slices.Clone(pvc.Finalizers), Finalizer))
	}
	return nil
}

func (c *Controller) setFinalizers(ctx context.Context, pvc *corev1.PersistentVolumeClaim, finalizers []string) error {
	pvc = pvc.DeepCopy()
	pvc.Finalizers = finalizers
	_, err := c.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(ctx, pvc, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update finalizers of claim %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	return nil
}

// used asks the informer, then (if it knows no such pod) the server, as
// upstream does: a pod created a moment ago may not be in the informer yet.
func (c *Controller) used(ctx context.Context, pvc *corev1.PersistentVolumeClaim, f uses) (bool, error) {
	objs, err := c.pods.ByIndex(volumes.PodClaimsIndex, pvc.Namespace+"/"+pvc.Name)
	if err != nil {
		return false, fmt.Errorf("pods of claim %s/%s in the informer: %w", pvc.Namespace, pvc.Name, err)
	}
	for _, o := range objs {
		if pod, ok := o.(*corev1.Pod); ok && f(pod, pvc) {
			return true, nil
		}
	}
	live, err := c.client.CoreV1().Pods(pvc.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, fmt.Errorf("live list of pods in %s: %w", pvc.Namespace, err)
	}
	for i := range live.Items {
		if f(&live.Items[i], pvc) {
			return true, nil
		}
	}
	return false, nil
}

// usesForDeletion is upstream's podUsesPVCForDeletion: a scheduled pod
// with the claim as a volume (its phase does not matter), or the owner of
// a generic ephemeral claim that is not shut down.
func usesForDeletion(pod *corev1.Pod, pvc *corev1.PersistentVolumeClaim) bool {
	if pod.Spec.NodeName == "" {
		return false
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.Name {
			return true
		}
		if !shutDown(pod) && ephemeralFor(pod, v, pvc) {
			return true
		}
	}
	return false
}

// referencesForUnused is upstream's podUsesPVCForUnusedSince: any pod
// that has not terminated and references the claim.
func referencesForUnused(pod *corev1.Pod, pvc *corev1.PersistentVolumeClaim) bool {
	if terminated(pod) {
		return false
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.Name || ephemeralFor(pod, v, pvc) {
			return true
		}
	}
	return false
}

func ephemeralFor(pod *corev1.Pod, v *corev1.Volume, pvc *corev1.PersistentVolumeClaim) bool {
	return v.Ephemeral != nil && ephemeral.VolumeClaimName(pod, v) == pvc.Name && ephemeral.VolumeIsForPod(pod, pvc) == nil
}

// shutDown: deleted with no grace period left.
func shutDown(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil && *pod.DeletionGracePeriodSeconds == 0
}

// terminated is upstream's volume util IsPodTerminated: Succeeded or
// Failed, or deleted with no container running.
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

// updateUnused writes the Unused condition when it is missing or flips.
func (c *Controller) updateUnused(ctx context.Context, pvc *corev1.PersistentVolumeClaim, used bool) error {
	have := unusedCondition(pvc)
	want := corev1.PersistentVolumeClaimCondition{Type: unusedCondType, Status: corev1.ConditionTrue,
		Reason: reasonUnused, Message: messageUnused, LastTransitionTime: metav1.NewTime(c.clock.Now())}
	if used {
		want.Status, want.Reason, want.Message = corev1.ConditionFalse, reasonUsed, messageUsed
	}
	if have != nil && (have.Status == corev1.ConditionTrue) == !used {
		return nil
	}
	pvc = pvc.DeepCopy()
	if i := slices.IndexFunc(pvc.Status.Conditions, func(c corev1.PersistentVolumeClaimCondition) bool { return c.Type == unusedCondType }); i >= 0 {
		pvc.Status.Conditions[i] = want
	} else {
		pvc.Status.Conditions = append(pvc.Status.Conditions, want)
	}
	_, err := c.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).UpdateStatus(ctx, pvc, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update Unused condition of claim %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	return nil
}

func unusedCondition(pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaimCondition {
	for i := range pvc.Status.Conditions {
		if pvc.Status.Conditions[i].Type == unusedCondType {
			return &pvc.Status.Conditions[i]
		}
	}
	return nil
}
