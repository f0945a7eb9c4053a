package deployment

// The new ReplicaSet: found by its template, or created, and the
// revision annotations kept.

import (
	"context"
	"fmt"
	"strconv"

	"github.com/kubeembed/apiserver/internal/controller"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// replicaSetsAndRevision is upstream's getAllReplicaSetsAndSyncRevision:
// the new ReplicaSet (created if create and missing; nil otherwise) and
// the old ones, oldest first. It sorts rss.
func (c *Controller) replicaSetsAndRevision(ctx context.Context, d *appsv1.Deployment, rss []*appsv1.ReplicaSet, create bool) (*appsv1.ReplicaSet, []*appsv1.ReplicaSet, error) {
	byCreation(rss)
	var existing *appsv1.ReplicaSet
	for _, rs := range rss {
		if equalIgnoreHash(&rs.Spec.Template, &d.Spec.Template) {
			existing = rs
			break
		}
	}
	var old []*appsv1.ReplicaSet
	for _, rs := range rss {
		if existing == nil || rs.UID != existing.UID {
			old = append(old, rs)
		}
	}
	newRevision := strconv.FormatInt(maxRevision(old)+1, 10)
	if existing != nil {
		rs, err := c.syncNewReplicaSet(ctx, d, existing, newRevision)
		return rs, old, err
	}
	if !create {
		return nil, old, nil
	}
	rs, err := c.createReplicaSet(ctx, d, old, newRevision)
	return rs, old, err
}

// syncNewReplicaSet keeps the existing new ReplicaSet's annotations and
// minReadySeconds, or else the Deployment's revision and Progressing
// condition.
func (c *Controller) syncNewReplicaSet(ctx context.Context, d *appsv1.Deployment, existing *appsv1.ReplicaSet, newRevision string) (*appsv1.ReplicaSet, error) {
	rs := existing.DeepCopy()
	changed := setNewReplicaSetAnnotations(d, rs, newRevision, true)
	if changed || rs.Spec.MinReadySeconds != d.Spec.MinReadySeconds {
		rs.Spec.MinReadySeconds = d.Spec.MinReadySeconds
		return c.client.AppsV1().ReplicaSets(rs.Namespace).Update(ctx, rs, metav1.UpdateOptions{})
	}
	needsUpdate := setDeploymentRevision(d, rs.Annotations[revisionAnnotation])
	if hasProgressDeadline(d) && condition(d.Status.Conditions, appsv1.DeploymentProgressing) == nil {
		setCondition(&d.Status, c.newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, "FoundNewReplicaSet",
			fmt.Sprintf("Found new replica set %q", rs.Name)))
		needsUpdate = true
	}
	if needsUpdate {
		if _, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
			return nil, err
		}
	}
	return rs, nil
}

func setDeploymentRevision(d *appsv1.Deployment, rev string) bool {
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	if d.Annotations[revisionAnnotation] == rev {
		return false
	}
	d.Annotations[revisionAnnotation] = rev
	return true
}

// createReplicaSet creates the new ReplicaSet, named by the template's
// hash; a name taken by another template is a collision, counted in the
// Deployment's status so that the next try hashes differently.
func (c *Controller) createReplicaSet(ctx context.Context, d *appsv1.Deployment, old []*appsv1.ReplicaSet, newRevision string) (*appsv1.ReplicaSet, error) {
	template := d.Spec.Template.DeepCopy()
	hash := controller.ComputeHash(template, d.Status.CollisionCount)
	template.Labels = withLabel(d.Spec.Template.Labels, hash)
	selector := d.Spec.Selector.DeepCopy()
	selector.MatchLabels = withLabel(d.Spec.Selector.MatchLabels, hash)
	name := d.Name
	if limit := 253 - 1 - len(hash); len(name) > limit && limit > 0 {
		name = name[:limit]
	}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + hash, Namespace: d.Namespace, Labels: template.Labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(0)), MinReadySeconds: d.Spec.MinReadySeconds, Selector: selector, Template: *template}}
	n, err := newRSNewReplicas(d, append(old, rs), rs)
	if err != nil {
		return nil, err
	}
	rs.Spec.Replicas = ptr.To(n)
	setNewReplicaSetAnnotations(d, rs, newRevision, false)
	created, err := c.client.AppsV1().ReplicaSets(d.Namespace).Create(ctx, rs, metav1.CreateOptions{})
	alreadyExists := false
	switch {
	case apierrors.IsAlreadyExists(err):
		found, getErr := c.replicaSets.ReplicaSets(d.Namespace).Get(rs.Name)
		if getErr != nil {
			return nil, getErr
		}
		if ref := metav1.GetControllerOf(found); ref != nil && ref.UID == d.UID && equalIgnoreHash(&d.Spec.Template, &found.Spec.Template) {
			created, err, alreadyExists = found, nil, true
			break
		}
		d.Status.CollisionCount = ptr.To(ptr.Deref(d.Status.CollisionCount, 0) + 1)
		_, _ = c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
		return nil, err
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return nil, err
	case err != nil:
		msg := fmt.Sprintf("Failed to create new replica set %q: %v", rs.Name, err)
		if hasProgressDeadline(d) {
			setCondition(&d.Status, c.newCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, "ReplicaSetCreateError", msg))
			_, _ = c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
		}
		c.recorder().Event(d, corev1.EventTypeWarning, "ReplicaSetCreateError", msg)
		return nil, err
	}
	if !alreadyExists && n > 0 {
		c.recorder().Eventf(d, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled up replica set %s from 0 to %d", created.Name, n)
	}
	needsUpdate := setDeploymentRevision(d, newRevision)
	if !alreadyExists && hasProgressDeadline(d) {
		setCondition(&d.Status, c.newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, "NewReplicaSetCreated",
			fmt.Sprintf("Created new replica set %q", created.Name)))
		needsUpdate = true
	}
	if needsUpdate {
		_, err = c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	}
	return created, err
}

// withLabel is labels (a copy) with the pod-template-hash label.
func withLabel(labels map[string]string, hash string) map[string]string {
	out := make(map[string]string, len(labels)+1)
	for k, v := range labels {
		out[k] = v
	}
	out[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	return out
}
