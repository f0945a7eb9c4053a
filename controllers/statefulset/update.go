package statefulset

// The StatefulSet's update loop (upstream's defaultStatefulSetControl):
// revisions, then the replicas in ordinal order, then the condemned pods in
// reverse, then the rolling update, then the status.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubeembed/apiserver/internal/controller"
)

// maxBatch is upstream's MaxBatchSize of the Parallel slow start.
const maxBatch = 500

// updateStatefulSet is upstream's UpdateStatefulSet: it returns the status
// written (nil when the sync failed before computing one).
func (c *Controller) updateStatefulSet(ctx context.Context, set *appsv1.StatefulSet, pods []*corev1.Pod, now time.Time) (*appsv1.StatefulSetStatus, error) {
	set = set.DeepCopy()
	selector, _ := metaSelector(set)
	revisions, err := c.history.List(set, selector)
	if err != nil {
		return nil, err
	}
	controller.SortRevisions(revisions)
	current, update, status, err := c.performUpdate(ctx, set, pods, revisions, now)
	truncErr := c.truncateHistory(ctx, set, pods, revisions, current, update)
	if err != nil {
		return nil, errors.Join(err, truncErr)
	}
	return status, truncErr
}

func (c *Controller) performUpdate(ctx context.Context, set *appsv1.StatefulSet, pods []*corev1.Pod, revisions []*appsv1.ControllerRevision, now time.Time) (current, update *appsv1.ControllerRevision, status *appsv1.StatefulSetStatus, err error) {
	current, update, collisions, err := c.revisions(ctx, set, revisions)
	if err != nil {
		return current, update, nil, err
	}
	status, err = c.reconcile(ctx, set, current, update, collisions, pods, now)
	if err != nil && status == nil {
		return current, update, nil, err
	}
	statusErr := c.writeStatus(ctx, set, status)
	if err != nil {
		return current, update, status, err
	}
	return current, update, status, statusErr
}

// replicaSlots splits pods into the replicas (by ordinal in range, nil
// where missing) and the condemned (a valid ordinal out of range, highest
// first); pods whose ordinal does not parse are ignored.
func replicaSlots(set *appsv1.StatefulSet, pods []*corev1.Pod) (replicas, condemned []*corev1.Pod) {
	replicas = make([]*corev1.Pod, *set.Spec.Replicas)
	for _, p := range pods {
		switch {
		case inRange(p, set):
			replicas[ordinalOf(p)-startOrdinal(set)] = p
		case ordinalOf(p) >= 0:
			condemned = append(condemned, p)
		}
	}
	sort.SliceStable(condemned, func(i, j int) bool { return ordinalOf(condemned[i]) > ordinalOf(condemned[j]) })
	return replicas, condemned
}

// firstUnavailable is the first unavailable replica, else the lowest
// unavailable condemned pod.
func firstUnavailable(replicas, condemned []*corev1.Pod, minReady int32, now time.Time) *corev1.Pod {
	for _, p := range replicas {
		if isUnavailable(p, minReady, now) {
			return p
		}
	}
	for i := len(condemned) - 1; i >= 0; i-- {
		if isUnavailable(condemned[i], minReady, now) {
			return condemned[i]
		}
	}
	return nil
}

// reconcile creates, updates and deletes pods towards set's target (upstream's
// updateStatefulSet) and returns the status to write.
func (c *Controller) reconcile(ctx context.Context, set *appsv1.StatefulSet, current, update *appsv1.ControllerRevision, collisions int32, pods []*corev1.Pod, now time.Time) (*appsv1.StatefulSetStatus, error) {
	currentSet, err := applyRevision(set, current)
	if err != nil {
		return nil, err
	}
	updateSet, err := applyRevision(set, update)
	if err != nil {
		return nil, err
	}
	status := &appsv1.StatefulSetStatus{ObservedGeneration: set.Generation, CurrentRevision: current.Name,
		UpdateRevision: update.Name, CollisionCount: &collisions, Conditions: append([]appsv1.StatefulSetCondition(nil), set.Status.Conditions...)}
	countStatus(status, set.Spec.MinReadySeconds, current, update, now, pods)

	replicas, condemned := replicaSlots(set, pods)
	for i := range replicas {
		if replicas[i] == nil {
			replicas[i] = versionedPod(currentSet, updateSet, current.Name, update.Name, startOrdinal(set)+i)
		}
	}
	firstBad := firstUnavailable(replicas, condemned, set.Spec.MinReadySeconds, now)
	if set.DeletionTimestamp != nil {
		return status, nil
	}
	monotonic := set.Spec.PodManagementPolicy != appsv1.ParallelPodManagement
	done := func(err error) (*appsv1.StatefulSetStatus, error) {
		countStatus(status, set.Spec.MinReadySeconds, current, update, now, replicas, condemned)
		return status, err
	}
	if exit, err := runForAll(len(replicas), monotonic, func(i int) (bool, error) {
		return c.processReplica(ctx, set, updateSet, monotonic, replicas, i, now)
	}); exit || err != nil {
		return done(err)
	}
	if exit, err := runForAll(len(condemned), monotonic, func(i int) (bool, error) {
		if match, err := c.claimsMatchPolicy(updateSet, condemned[i]); err != nil || match {
			return err != nil, err
		}
		err := c.updateClaimsForPolicy(ctx, updateSet, condemned[i])
		return err != nil, err
	}); exit || err != nil {
		return done(err)
	}
	if exit, err := runForAll(len(condemned), monotonic, func(i int) (bool, error) {
		return c.processCondemned(ctx, set, firstBad, monotonic, condemned, i, now)
	}); exit || err != nil {
		return done(err)
	}
	done(nil)
	if set.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return status, nil
	}
	return c.rollingUpdate(ctx, set, replicas, update, status, now)
}

// runForAll calls fn for 0..n-1: in order, stopping at the first that says
// so (monotonic), or in slow-start batches (Parallel).
func runForAll(n int, monotonic bool, fn func(i int) (bool, error)) (bool, error) {
	if monotonic {
		for i := range n {
			if exit, err := fn(i); exit || err != nil {
				return true, err
			}
		}
		return false, nil
	}
	if err := slowStart(n, fn); err != nil {
		return true, err
	}
	return false, nil
}

// slowStart runs fn over 0..n-1 in concurrent batches of 1, 2, 4, ... (at
// most maxBatch), stopping after a batch with errors.
func slowStart(n int, fn func(i int) (bool, error)) error {
	next := 0
	for batch := min(n, 1); batch > 0; batch = min(2*batch, n-next, maxBatch) {
		errs := make(chan error, batch)
		var wg sync.WaitGroup
		for range batch {
			i := next
			next++
			wg.Go(func() {
				if _, err := fn(i); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		var all []error
		for err := range errs {
			all = append(all, err)
		}
		if len(all) > 0 {
			return joinErrs(all)
		}
	}
	return nil
}

// processReplica brings the replica at i to life and identity; true stops
// a monotonic set's loop.
func (c *Controller) processReplica(ctx context.Context, set, updateSet *appsv1.StatefulSet, monotonic bool, replicas []*corev1.Pod, i int, now time.Time) (bool, error) {
	p := replicas[i]
	if isTerminalPhase(p) {
		// Failed or Succeeded: deleted, and created again once gone.
		if p.DeletionTimestamp == nil {
			if err := c.deletePod(ctx, set, p); err != nil {
				return true, err
			}
		}
		return true, nil
	}
	if !isCreated(p) {
		if stale, err := c.claimIsStale(set, p); err != nil || stale {
			return true, err
		}
		if err := c.createPod(ctx, set, p); err != nil {
			return true, err
		}
		if monotonic {
			return true, nil
		}
	}
	if isPending(p) {
		if err := c.createClaims(ctx, set, p); err != nil {
			return true, err
		}
		if err := c.updateClaimsForPolicy(ctx, set, p); err != nil {
			c.podEvent("update", set, p, err)
			return true, err
		}
	}
	if monotonic && (isTerminating(p) || !isRunningAndReady(p) || !controller.PodAvailable(p, set.Spec.MinReadySeconds, now)) {
		return true, nil
	}
	match, err := c.claimsMatchPolicy(updateSet, p)
	if err != nil {
		match = true // expected while the pod is not fully updated
	}
	if identityMatches(set, p) && storageMatches(set, p) && match {
		return false, nil
	}
	if err := c.updatePod(ctx, updateSet, p.DeepCopy()); err != nil {
		return true, err
	}
	return false, nil
}

// processCondemned deletes a pod out of range: a monotonic set waits for
// terminations and for unhealthy pods other than the first to recover.
func (c *Controller) processCondemned(ctx context.Context, set *appsv1.StatefulSet, firstBad *corev1.Pod, monotonic bool, condemned []*corev1.Pod, i int, now time.Time) (bool, error) {
	p := condemned[i]
	if isTerminating(p) {
		return monotonic, nil
	}
	if monotonic && p != firstBad && (!isRunningAndReady(p) || !controller.PodAvailable(p, set.Spec.MinReadySeconds, now)) {
		return true, nil
	}
	return true, c.deletePod(ctx, set, p)
}

// maxUnavailable is the rolling update's budget, at least 1.
func maxUnavailable(set *appsv1.StatefulSet) (int, error) {
	if set.Spec.UpdateStrategy.RollingUpdate == nil {
		return 1, nil
	}
	v := intstr.ValueOrDefault(set.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable, intstr.FromInt32(1))
	n, err := intstr.GetScaledValueFromIntOrPercent(v, int(*set.Spec.Replicas), false)
	if err != nil {
		return 0, fmt.Errorf("maxUnavailable: %w", err)
	}
	return max(n, 1), nil
}
