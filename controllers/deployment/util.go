package deployment

// Upstream's deployment util: revisions, annotations, fenceposts, the
// template hash, sorting.

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The annotations upstream keeps on ReplicaSets.
const (
	revisionAnnotation        = "deployment.kubernetes.io/revision"
	revisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	desiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	maxReplicasAnnotation     = "deployment.kubernetes.io/max-replicas"
	rollbackToAnnotation      = "deprecated.deployment.rollback.to"
	revisionHistoryMaxLength  = 2000
)

var annotationsToSkip = map[string]bool{corev1.LastAppliedConfigAnnotation: true, revisionAnnotation: true,
	revisionHistoryAnnotation: true, desiredReplicasAnnotation: true, maxReplicasAnnotation: true, rollbackToAnnotation: true}

// equalIgnoreHash compares templates without their pod-template-hash label.
func equalIgnoreHash(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(b.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	return apiequality.Semantic.DeepEqual(a, b)
}

func revision(rs *appsv1.ReplicaSet) (int64, error) {
	v, ok := rs.Annotations[revisionAnnotation]
	if !ok {
		return 0, nil
	}
	return strconv.ParseInt(v, 10, 64)
}

func maxRevision(rss []*appsv1.ReplicaSet) int64 {
	var m int64
	for _, rs := range rss {
		if v, err := revision(rs); err == nil && v > m {
			m = v
		}
	}
	return m
}

// setNewReplicaSetAnnotations gives rs the Deployment's annotations and
// newRevision (keeping the history of a reused one); it reports a change.
func setNewReplicaSetAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet, newRevision string, exists bool) bool {
	changed := false
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	for k, v := range d.Annotations {
		if cur, ok := rs.Annotations[k]; annotationsToSkip[k] || ok && cur == v {
			continue
		}
		rs.Annotations[k], changed = v, true
	}
	oldRevision, had := rs.Annotations[revisionAnnotation]
	old, err := strconv.ParseInt(oldRevision, 10, 64)
	if oldRevision != "" && err != nil {
		return false
	}
	next, err := strconv.ParseInt(newRevision, 10, 64)
	if err != nil {
		return false
	}
	if old < next {
		rs.Annotations[revisionAnnotation], changed = newRevision, true
		if had {
			rs.Annotations[revisionHistoryAnnotation] = revisionHistory(rs.Annotations[revisionHistoryAnnotation], oldRevision)
		}
	}
	if !exists {
		setReplicasAnnotations(rs, *d.Spec.Replicas, *d.Spec.Replicas+maxSurge(d))
		changed = true
	}
	return changed
}

// revisionHistory appends old to the history, dropping its oldest entries
// to stay within revisionHistoryMaxLength.
func revisionHistory(history, old string) string {
	entries := strings.Split(history, ",")
	if entries[0] == "" {
		return old
	}
	total := len(history) + len(old) + 1
	for total > revisionHistoryMaxLength && len(entries) > 0 {
		total -= len(entries[0]) + 1
		entries = entries[1:]
	}
	if total > revisionHistoryMaxLength {
		return history
	}
	return strings.Join(append(entries, old), ",")
}

func setReplicasAnnotations(rs *appsv1.ReplicaSet, desired, max int32) bool {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	d, m := fmt.Sprintf("%d", desired), fmt.Sprintf("%d", max)
	changed := rs.Annotations[desiredReplicasAnnotation] != d || rs.Annotations[maxReplicasAnnotation] != m
	rs.Annotations[desiredReplicasAnnotation], rs.Annotations[maxReplicasAnnotation] = d, m
	return changed
}

func replicasAnnotationsNeedUpdate(rs *appsv1.ReplicaSet, desired, max int32) bool {
	return rs.Annotations == nil || rs.Annotations[desiredReplicasAnnotation] != fmt.Sprintf("%d", desired) ||
		rs.Annotations[maxReplicasAnnotation] != fmt.Sprintf("%d", max)
}

// resolveFenceposts is maxSurge rounded up and maxUnavailable rounded
// down, of desired; both zero makes maxUnavailable 1.
func resolveFenceposts(surge, unavailable *intstr.IntOrString, desired int32) (int32, int32) {
	zero := intstr.FromInt32(0)
	if surge == nil {
		surge = &zero
	}
	if unavailable == nil {
		unavailable = &zero
	}
	s, err := intstr.GetScaledValueFromIntOrPercent(surge, int(desired), true)
	if err != nil {
		return 0, 0
	}
	u, err := intstr.GetScaledValueFromIntOrPercent(unavailable, int(desired), false)
	if err != nil {
		return 0, 0
	}
	if s == 0 && u == 0 {
		u = 1
	}
	return int32(s), int32(u)
}

func rolling(d *appsv1.Deployment) bool {
	return d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType && d.Spec.Strategy.RollingUpdate != nil
}

func maxSurge(d *appsv1.Deployment) int32 {
	if !rolling(d) {
		return 0
	}
	s, _ := resolveFenceposts(d.Spec.Strategy.RollingUpdate.MaxSurge, d.Spec.Strategy.RollingUpdate.MaxUnavailable, *d.Spec.Replicas)
	return s
}

func maxUnavailable(d *appsv1.Deployment) int32 {
	if !rolling(d) || *d.Spec.Replicas == 0 {
		return 0
	}
	_, u := resolveFenceposts(d.Spec.Strategy.RollingUpdate.MaxSurge, d.Spec.Strategy.RollingUpdate.MaxUnavailable, *d.Spec.Replicas)
	return min(u, *d.Spec.Replicas)
}

// newRSNewReplicas is how many replicas the new ReplicaSet may have now.
func newRSNewReplicas(d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (int32, error) {
	if !rolling(d) {
		return *d.Spec.Replicas, nil
	}
	s, err := intstr.GetScaledValueFromIntOrPercent(d.Spec.Strategy.RollingUpdate.MaxSurge, int(*d.Spec.Replicas), true)
	if err != nil {
		return 0, err
	}
	current := specReplicas(all)
	maxTotal := *d.Spec.Replicas + int32(s)
	if current >= maxTotal {
		return *newRS.Spec.Replicas, nil
	}
	return *newRS.Spec.Replicas + min(maxTotal-current, *d.Spec.Replicas-*newRS.Spec.Replicas), nil
}

func specReplicas(rss []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += *rs.Spec.Replicas
		}
	}
	return n
}

func active(rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range rss {
		if rs != nil && *rs.Spec.Replicas > 0 {
			out = append(out, rs)
		}
	}
	return out
}

// byCreation sorts oldest first, then by name.
func byCreation(rss []*appsv1.ReplicaSet) {
	sort.SliceStable(rss, func(i, j int) bool { return olderThan(rss[i], rss[j]) })
}

func olderThan(a, b *appsv1.ReplicaSet) bool {
	if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.Name < b.Name
	}
	return a.CreationTimestamp.Before(&b.CreationTimestamp)
}

// deploymentComplete: every replica updated and available, and the
// status observed the current generation.
func deploymentComplete(d *appsv1.Deployment, s *appsv1.DeploymentStatus) bool {
	return s.UpdatedReplicas == *d.Spec.Replicas && s.Replicas == *d.Spec.Replicas && s.AvailableReplicas == *d.Spec.Replicas &&
		s.ObservedGeneration >= d.Generation
}

func hasProgressDeadline(d *appsv1.Deployment) bool {
	return d.Spec.ProgressDeadlineSeconds != nil && *d.Spec.ProgressDeadlineSeconds != math.MaxInt32
}
