package deployment

// The two strategies: RollingUpdate and Recreate.

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

func (c *Controller) rolloutRolling(ctx context.Context, d *appsv1.Deployment, rss []*appsv1.ReplicaSet) error {
	newRS, old, err := c.replicaSetsAndRevision(ctx, d, rss, true)
	if err != nil {
		return err
	}
	all := append(append([]*appsv1.ReplicaSet{}, old...), newRS)
	scaled, err := c.reconcileNewReplicaSet(ctx, d, all, newRS)
	if err != nil {
		return err
	}
	if scaled {
		return c.syncRolloutStatus(ctx, d, all, newRS)
	}
	if c.reconcileOldReplicaSets(ctx, d, all, active(old), newRS) {
		return c.syncRolloutStatus(ctx, d, all, newRS)
	}
	if deploymentComplete(d, &d.Status) {
		if err := c.cleanup(ctx, d, old); err != nil {
			return err
		}
	}
	return c.syncRolloutStatus(ctx, d, all, newRS)
}

func (c *Controller) reconcileNewReplicaSet(ctx context.Context, d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (bool, error) {
	switch want := *d.Spec.Replicas; {
	case *newRS.Spec.Replicas == want:
		return false, nil
	case *newRS.Spec.Replicas > want:
		scaled, _, err := c.scaleReplicaSet(ctx, newRS, want, d, false)
		return scaled, err
	}
	n, err := newRSNewReplicas(d, all, newRS)
	if err != nil {
		return false, err
	}
	scaled, _, err := c.scaleReplicaSet(ctx, newRS, n, d, false)
	return scaled, err
}

// reconcileOldReplicaSets scales old ReplicaSets down as far as
// maxUnavailable allows, their unhealthy replicas first. Upstream ignores
// the errors of these writes: the next sync sees where they left things.
func (c *Controller) reconcileOldReplicaSets(ctx context.Context, d *appsv1.Deployment, all, old []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) bool {
	if specReplicas(old) == 0 {
		return false
	}
	minAvailable := *d.Spec.Replicas - maxUnavailable(d)
	newUnavailable := *newRS.Spec.Replicas - newRS.Status.AvailableReplicas
	maxScaledDown := specReplicas(all) - minAvailable - newUnavailable
	if maxScaledDown <= 0 {
		return false
	}
	old, cleaned, err := c.cleanupUnhealthyReplicas(ctx, d, old, maxScaledDown)
	if err != nil {
		return false
	}
	scaledDown, err := c.scaleDownOld(ctx, d, append(append([]*appsv1.ReplicaSet{}, old...), newRS), old, minAvailable)
	if err != nil {
		return false
	}
	return cleaned+scaledDown > 0
}

func (c *Controller) cleanupUnhealthyReplicas(ctx context.Context, d *appsv1.Deployment, old []*appsv1.ReplicaSet, max int32) ([]*appsv1.ReplicaSet, int32, error) {
	byCreation(old)
	var total int32
	for i, rs := range old {
		if total >= max {
			break
		}
		spec := *rs.Spec.Replicas
		if spec == 0 || spec == rs.Status.AvailableReplicas {
			continue
		}
		n := min(max-total, spec-rs.Status.AvailableReplicas)
		if spec-n > spec {
			return nil, 0, fmt.Errorf("when cleaning up unhealthy replicas, got invalid request to scale down %s/%s %d -> %d", rs.Namespace, rs.Name, spec, spec-n)
		}
		_, updated, err := c.scaleReplicaSet(ctx, rs, spec-n, d, false)
		if err != nil {
			return nil, total, err
		}
		total += n
		old[i] = updated
	}
	return old, total, nil
}

func (c *Controller) scaleDownOld(ctx context.Context, d *appsv1.Deployment, all, old []*appsv1.ReplicaSet, minAvailable int32) (int32, error) {
	var available int32
	for _, rs := range all {
		if rs != nil {
			available += rs.Status.AvailableReplicas
		}
	}
	if available <= minAvailable {
		return 0, nil
	}
	byCreation(old)
	target, total := available-minAvailable, int32(0)
	for _, rs := range old {
		if total >= target {
			break
		}
		spec := *rs.Spec.Replicas
		if spec == 0 {
			continue
		}
		n := min(spec, target-total)
		if _, _, err := c.scaleReplicaSet(ctx, rs, spec-n, d, false); err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

func (c *Controller) rolloutRecreate(ctx context.Context, d *appsv1.Deployment, rss []*appsv1.ReplicaSet) error {
	newRS, old, err := c.replicaSetsAndRevision(ctx, d, rss, false)
	if err != nil {
		return err
	}
	all := append(append([]*appsv1.ReplicaSet{}, old...), newRS)
	scaled := false
	for _, rs := range active(old) {
		s, _, err := c.scaleReplicaSet(ctx, rs, 0, d, false)
		if err != nil {
			return err
		}
		scaled = scaled || s
	}
	if scaled {
		return c.syncRolloutStatus(ctx, d, all, newRS)
	}
	if c.oldPodsRunning(newRS, old) {
		return c.syncRolloutStatus(ctx, d, all, newRS)
	}
	if newRS == nil {
		if newRS, old, err = c.replicaSetsAndRevision(ctx, d, rss, true); err != nil {
			return err
		}
		all = append(append([]*appsv1.ReplicaSet{}, old...), newRS)
	}
	if _, _, err := c.scaleReplicaSet(ctx, newRS, *d.Spec.Replicas, d, false); err != nil {
		return err
	}
	if deploymentComplete(d, &d.Status) {
		if err := c.cleanup(ctx, d, old); err != nil {
			return err
		}
	}
	return c.syncRolloutStatus(ctx, d, all, newRS)
}

// oldPodsRunning: an old ReplicaSet still has replicas, or a pod of one has
// not finished (terminating pods count).
func (c *Controller) oldPodsRunning(newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) bool {
	var replicas int32
	oldUIDs := map[types.UID]bool{}
	for _, rs := range old {
		replicas += rs.Status.Replicas
		if newRS == nil || rs.UID != newRS.UID {
			oldUIDs[rs.UID] = true
		}
	}
	if replicas > 0 {
		return true
	}
	if len(oldUIDs) == 0 {
		return false
	}
	pods, err := c.pods.Pods(old[0].Namespace).List(labels.Everything())
	if err != nil {
		return false
	}
	for _, p := range pods {
		if ref := metav1.GetControllerOf(p); ref == nil || ref.Kind != "ReplicaSet" || !oldUIDs[ref.UID] {
			continue
		}
		if p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded {
			return true
		}
	}
	return false
}
