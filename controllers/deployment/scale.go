package deployment

// Scaling ReplicaSets: one at a time, in proportion on a change of
// replicas mid-rollout; and deleting old ones beyond the history limit.

import (
	"context"
	"math"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// scaleReplicaSet sets rs's replicas and its desired/max annotations in
// one update (also when only the annotations are stale and force is set);
// it reports whether the size changed.
func (c *Controller) scaleReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet, size int32, d *appsv1.Deployment, force bool) (bool, *appsv1.ReplicaSet, error) {
	if !force && *rs.Spec.Replicas == size {
		return false, rs, nil
	}
	resize := *rs.Spec.Replicas != size
	max := *d.Spec.Replicas + maxSurge(d)
	if !resize && !replicasAnnotationsNeedUpdate(rs, *d.Spec.Replicas, max) {
		return false, rs, nil
	}
	next := rs.DeepCopy()
	next.Spec.Replicas = ptr.To(size)
	setReplicasAnnotations(next, *d.Spec.Replicas, max)
	updated, err := c.client.AppsV1().ReplicaSets(rs.Namespace).Update(ctx, next, metav1.UpdateOptions{})
	if err != nil {
		return false, nil, err
	}
	if resize {
		dir := "up"
		if *rs.Spec.Replicas > size {
			dir = "down"
		}
		c.recorder().Eventf(d, corev1.EventTypeNormal, "ScalingReplicaSet", "Scaled %s replica set %s from %d to %d", dir, updated.Name, *rs.Spec.Replicas, size)
	}
	return resize, updated, nil
}

// scaleAndSync is upstream's sync: for a paused Deployment or a change of
// replicas, scale without rolling out, then write the status.
func (c *Controller) scaleAndSync(ctx context.Context, d *appsv1.Deployment, rss []*appsv1.ReplicaSet) error {
	newRS, old, err := c.replicaSetsAndRevision(ctx, d, rss, false)
	if err != nil {
		return err
	}
	if err := c.scale(ctx, d, newRS, old); err != nil {
		return err
	}
	if _, err := strconv.ParseInt(d.Annotations[rollbackToAnnotation], 10, 64); d.Spec.Paused && err != nil {
		if err := c.cleanup(ctx, d, old); err != nil {
			return err
		}
	}
	return c.syncDeploymentStatus(ctx, d, append(old, newRS), newRS)
}

// scale sizes the ReplicaSets for d's replicas: the only active one to
// them; old ones to zero once the new one is saturated; otherwise the
// difference spread in proportion (RollingUpdate).
func (c *Controller) scale(ctx context.Context, d *appsv1.Deployment, newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) error {
	if rs := activeOrLatest(newRS, old); rs != nil {
		if *rs.Spec.Replicas == *d.Spec.Replicas {
			return nil
		}
		_, _, err := c.scaleReplicaSet(ctx, rs, *d.Spec.Replicas, d, false)
		return err
	}
	if saturated(d, newRS) {
		for _, rs := range active(old) {
			if _, _, err := c.scaleReplicaSet(ctx, rs, 0, d, false); err != nil {
				return err
			}
		}
		return nil
	}
	if !rolling(d) {
		return nil
	}
	all := active(append(append([]*appsv1.ReplicaSet{}, old...), newRS))
	var allowed int32
	if *d.Spec.Replicas > 0 {
		allowed = *d.Spec.Replicas + maxSurge(d)
	}
	toAdd := allowed - specReplicas(all)
	switch {
	case toAdd > 0:
		sort.SliceStable(all, bySize(all, true))
	case toAdd < 0:
		sort.SliceStable(all, bySize(all, false))
	}
	sizes := map[string]int32{}
	var added int32
	for _, rs := range all {
		sizes[rs.Name] = *rs.Spec.Replicas
		if toAdd != 0 {
			p := proportion(rs, d, toAdd, added)
			sizes[rs.Name] += p
			added += p
		}
	}
	for i, rs := range all {
		if i == 0 && toAdd != 0 {
			sizes[rs.Name] = max(0, sizes[rs.Name]+toAdd-added)
		}
		if _, _, err := c.scaleReplicaSet(ctx, rs, sizes[rs.Name], d, true); err != nil {
			return err
		}
	}
	return nil
}

// bySize orders larger first; ties newest first when newer, else oldest.
func bySize(rss []*appsv1.ReplicaSet, newer bool) func(i, j int) bool {
	return func(i, j int) bool {
		a, b := rss[i], rss[j]
		if *a.Spec.Replicas != *b.Spec.Replicas {
			return *a.Spec.Replicas > *b.Spec.Replicas
		}
		if newer {
			return olderThan(b, a)
		}
		return olderThan(a, b)
	}
}

// activeOrLatest is the one active ReplicaSet, or the latest when none is
// active; nil when several are.
func activeOrLatest(newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	if newRS == nil && len(old) == 0 {
		return nil
	}
	sort.SliceStable(old, func(i, j int) bool { return olderThan(old[j], old[i]) })
	act := active(append(append([]*appsv1.ReplicaSet{}, old...), newRS))
	switch len(act) {
	case 0:
		if newRS != nil {
			return newRS
		}
		return old[0]
	case 1:
		return act[0]
	}
	return nil
}

// saturated: the new ReplicaSet has all of d's replicas, available.
func saturated(d *appsv1.Deployment, newRS *appsv1.ReplicaSet) bool {
	if newRS == nil {
		return false
	}
	desired, err := strconv.Atoi(newRS.Annotations[desiredReplicasAnnotation])
	if err != nil {
		return false
	}
	return *newRS.Spec.Replicas == *d.Spec.Replicas && int32(desired) == *d.Spec.Replicas &&
		newRS.Status.AvailableReplicas == *d.Spec.Replicas
}

// proportion is rs's share of toAdd (less what was added already).
func proportion(rs *appsv1.ReplicaSet, d *appsv1.Deployment, toAdd, added int32) int32 {
	if *rs.Spec.Replicas == 0 || toAdd == 0 || toAdd == added {
		return 0
	}
	frac, allowed := fraction(rs, d), toAdd-added
	if toAdd > 0 {
		return min(frac, allowed)
	}
	return max(frac, allowed)
}

func fraction(rs *appsv1.ReplicaSet, d *appsv1.Deployment) int32 {
	if *d.Spec.Replicas == 0 {
		return -*rs.Spec.Replicas
	}
	dMax := *d.Spec.Replicas + maxSurge(d)
	before := int32(0)
	if v, err := strconv.ParseUint(rs.Annotations[maxReplicasAnnotation], 10, 32); err == nil && v <= math.MaxInt32 {
		before = int32(v)
	}
	if before == 0 {
		if before = d.Status.Replicas; before == 0 {
			return 0
		}
	}
	return int32(math.Round(float64(*rs.Spec.Replicas*dMax)/float64(before))) - *rs.Spec.Replicas
}

// cleanup deletes old ReplicaSets beyond the revision history limit, lowest
// revision first, skipping those with replicas.
func (c *Controller) cleanup(ctx context.Context, d *appsv1.Deployment, old []*appsv1.ReplicaSet) error {
	limit := d.Spec.RevisionHistoryLimit
	if limit == nil || *limit == math.MaxInt32 {
		return nil
	}
	var cleanable []*appsv1.ReplicaSet
	for _, rs := range old {
		if rs != nil && rs.DeletionTimestamp == nil {
			cleanable = append(cleanable, rs)
		}
	}
	diff := int32(len(cleanable)) - *limit
	if diff <= 0 {
		return nil
	}
	sort.SliceStable(cleanable, func(i, j int) bool {
		a, errA := revision(cleanable[i])
		b, errB := revision(cleanable[j])
		if errA != nil || errB != nil || a == b {
			return olderThan(cleanable[i], cleanable[j])
		}
		return a < b
	})
	for _, rs := range cleanable[:diff] {
		if rs.Status.Replicas != 0 || *rs.Spec.Replicas != 0 || rs.Generation > rs.Status.ObservedGeneration || rs.DeletionTimestamp != nil {
			continue
		}
		err := c.client.AppsV1().ReplicaSets(rs.Namespace).Delete(ctx, rs.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}
