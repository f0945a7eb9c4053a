package job

// Counting finished pods through status.uncountedTerminatedPods and their
// tracking finalizer, and finishing the Job, as upstream's
// trackJobStatusAndRemoveFinalizers.

import (
	"context"
	"fmt"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
)

// maxUncounted is upstream's MaxUncountedPods: the most uids
// uncountedTerminatedPods holds (about 20 KB).
const maxUncounted = 500

// track writes the finished pods in uncountedTerminatedPods, removes their
// finalizers, counts them, then (nothing left to count or terminating)
// finishes the Job; flush says the status changed already.
func (c *Controller) track(ctx context.Context, jc *syncCtx, flush bool) error {
	if indexed(jc.job) {
		sortByIndex(jc.pods)
	}
	withFinalizer := sets.New[types.UID]()
	for _, p := range jc.pods {
		if hasFinalizer(p) && !jc.expectedRm.Has(p.UID) {
			withFinalizer.Insert(p.UID)
		}
	}
	if moveCounted(&jc.job.Status, withFinalizer) {
		flush = true
	}
	toRemove, newIdx, full, added := c.collectFinished(jc)
	flush = flush || added
	if indexed(jc.job) && c.indexStatus(jc, newIdx) {
		flush = true
	}
	if f := jc.finished; f != nil && f.Type == batchv1.JobFailureTarget {
		// FailureTarget is written before the finalizers go, Failed
		// once they are gone.
		jc.job.Status.Conditions = append(jc.job.Status.Conditions, *f)
		flush = true
		jc.finished = newCondition(batchv1.JobFailed, corev1.ConditionTrue, f.Reason, f.Message, c.clock.Now())
	}
	if f := jc.finished; isSuccessCriteriaMet(f) {
		if successCriteriaMet(jc.job) == nil {
			jc.job.Status.Conditions = append(jc.job.Status.Conditions, *f)
			flush = true
		}
		jc.finished = newCondition(batchv1.JobComplete, corev1.ConditionTrue, f.Reason, f.Message, c.clock.Now())
	}
	flush, err := c.flushAndRemove(ctx, jc, toRemove, withFinalizer, flush)
	if err != nil {
		return err
	}
	done := !full && c.enactFinished(jc)
	if !flush && !done {
		return nil
	}
	if _, err := c.writeStatus(ctx, jc.job); err != nil {
		return fmt.Errorf("removing uncounted pods from status: %w", err)
	}
	if done {
		c.recordFinished(jc.job, jc.finished)
		c.finished.Store(jc.job.UID, struct{}{})
	}
	return nil
}

// collectFinished picks the pods whose finalizer can go and adds the
// finished ones to uncountedTerminatedPods (Indexed: succeeded ones as
// new indexes); full: it stopped at maxUncounted.
func (c *Controller) collectFinished(jc *syncCtx) (toRemove []*corev1.Pod, newIdx []int, full, added bool) {
	job := jc.job
	u := job.Status.UncountedTerminatedPods
	for _, p := range jc.pods {
		if !hasFinalizer(p) || jc.expectedRm.Has(p.UID) {
			continue // counted in an earlier sync
		}
		failed := podFailed(p, job)
		if !canRemoveFinalizer(jc, p, failed) {
			continue
		}
		toRemove = append(toRemove, p)
		switch {
		case p.Status.Phase == corev1.PodSucceeded && !jc.uncounted.failed.Has(p.UID):
			if indexed(job) {
				if ix := completionIndex(p); validIndex(job, p) && !jc.prevSucceeded.has(ix) {
					newIdx = append(newIdx, ix)
					added = true
				}
			} else if !jc.uncounted.succeeded.Has(p.UID) {
				u.Succeeded = append(u.Succeeded, p.UID)
				added = true
			}
		case failed || jc.finished != nil && !isSuccessCriteriaMet(jc.finished):
			// A Job that fails counts its unfinished pods failed.
			if jc.uncounted.failed.Has(p.UID) || indexed(job) && !validIndex(job, p) {
				break
			}
			if _, count, _ := matchPodFailurePolicy(job.Spec.PodFailurePolicy, p); count {
				u.Failed = append(u.Failed, p.UID)
				added = true
			}
		}
		if len(newIdx)+len(u.Succeeded)+len(u.Failed) >= maxUncounted {
			return toRemove, newIdx, true, added
		}
	}
	return toRemove, newIdx, false, added
}

// canRemoveFinalizer: the Job is deleted or ends, the pod succeeded, or it
// failed and is not kept to carry its index's failure counts over.
func canRemoveFinalizer(jc *syncCtx, p *corev1.Pod, failed bool) bool {
	if jc.job.DeletionTimestamp != nil || jc.finished != nil || p.Status.Phase == corev1.PodSucceeded {
		return true
	}
	if !failed {
		return false
	}
	if perIndex(jc.job) {
		if last, ok := jc.delayed[completionIndex(p)]; ok && last.UID == p.UID {
			return false
		}
	}
	return true
}

// indexStatus writes completedIndexes, succeeded and failedIndexes;
// it reports a change.
func (c *Controller) indexStatus(jc *syncCtx, newIdx []int) bool {
	s := &jc.job.Status
	jc.succeededIdx = jc.succeededIdx.withIndexes(newIdx)
	changed := len(newIdx) > 0
	if str := jc.succeededIdx.String(); str != s.CompletedIndexes {
		changed = true
		s.CompletedIndexes = str
	}
	s.Succeeded = int32(jc.succeededIdx.total())
	var failed *string
	if jc.failedIdx != nil {
		failed = ptr.To(jc.failedIdx.String())
	}
	if !ptr.Equal(s.FailedIndexes, failed) {
		s.FailedIndexes = failed
		changed = true
	}
	return changed
}

// flushAndRemove writes the status (new uncounted pods, interim
// conditions) if it changed, removes the finalizers, and moves the pods
// whose finalizer went to the counters; it reports whether the status has
// changes still to write.
func (c *Controller) flushAndRemove(ctx context.Context, jc *syncCtx, toRemove []*corev1.Pod, withFinalizer sets.Set[types.UID], flush bool) (bool, error) {
	if flush {
		written, err := c.writeStatus(ctx, jc.job)
		if err != nil {
			return flush, fmt.Errorf("adding uncounted pods to status: %w", err)
		}
		jc.job = written
		c.backoff.update(jc.backoff)
		flush = false
	}
	var rmErr error
	if len(toRemove) > 0 {
		var removed []bool
		removed, rmErr = c.removeFinalizers(ctx, jc.key, toRemove)
		for i, p := range toRemove {
			if removed[i] {
				withFinalizer.Delete(p.UID)
			}
		}
	}
	if moveCounted(&jc.job.Status, withFinalizer) {
		flush = true
	}
	if rmErr != nil && flush {
		if _, err := c.writeStatus(ctx, jc.job); err != nil {
			return flush, fmt.Errorf("removing uncounted pods from status: %w", err)
		}
	}
	return flush, rmErr
}

// moveCounted moves the uncounted pods whose finalizer is gone to the
// succeeded and failed counters; it reports a change.
func moveCounted(s *batchv1.JobStatus, withFinalizer sets.Set[types.UID]) bool {
	u := s.UncountedTerminatedPods
	keep := func(uids []types.UID) []types.UID {
		var out []types.UID
		for _, uid := range uids {
			if withFinalizer.Has(uid) {
				out = append(out, uid)
			}
		}
		return out
	}
	changed := false
	if left := keep(u.Succeeded); len(left) != len(u.Succeeded) {
		s.Succeeded += int32(len(u.Succeeded) - len(left))
		u.Succeeded, changed = left, true
	}
	if left := keep(u.Failed); len(left) != len(u.Failed) {
		s.Failed += int32(len(u.Failed) - len(left))
		u.Failed, changed = left, true
	}
	return changed
}

// removeFinalizers removes the tracking finalizer of pods at once,
// expecting to see it gone; removed[i] says pods[i] has it no more.
func (c *Controller) removeFinalizers(ctx context.Context, k string, pods []*corev1.Pod) ([]bool, error) {
	removed := make([]bool, len(pods))
	uids := make([]types.UID, len(pods))
	for i, p := range pods {
		uids[i] = p.UID
	}
	c.finalizers.expect(k, uids)
	errs := make(chan error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() {
			patch := removeFinalizerPatch(p)
			if patch == nil {
				return
			}
			if err := c.patchPod(ctx, p.Namespace, p.Name, patch); err != nil {
				c.finalizers.observed(k, p.UID) // no update to wait for
				if !apierrors.IsNotFound(err) {
					errs <- fmt.Errorf("removing tracking finalizer: %w", err)
					return
				}
			}
			removed[i] = true
		})
	}
	wg.Wait()
	close(errs)
	return removed, <-errs
}

// enactFinished adds the Complete or Failed condition once no pod is left
// to count or terminating; it reports whether it did.
func (c *Controller) enactFinished(jc *syncCtx) bool {
	f := jc.finished
	if f == nil {
		return false
	}
	s := &jc.job.Status
	if u := s.UncountedTerminatedPods; u != nil && len(u.Succeeded)+len(u.Failed) > 0 {
		return false
	}
	if jc.terminating > 0 {
		return false
	}
	s.Conditions, _ = ensureCondition(s.Conditions, f.Type, f.Status, f.Reason, f.Message, c.clock.Now())
	if f.Type == batchv1.JobComplete {
		s.CompletionTime = ptr.To(f.LastTransitionTime)
	}
	return true
}

func (c *Controller) recordFinished(job *batchv1.Job, f *batchv1.JobCondition) {
	if f.Type != batchv1.JobComplete {
		c.recorder().Event(job, corev1.EventTypeWarning, f.Reason, f.Message)
		return
	}
	if job.Spec.Completions != nil && job.Status.Succeeded > *job.Spec.Completions {
		c.recorder().Event(job, corev1.EventTypeWarning, "TooManySucceededPods", "Too many succeeded pods running after completion count reached")
	}
	c.recorder().Event(job, corev1.EventTypeNormal, "Completed", "Job completed")
}

// writeStatus PUTs the Job's status.
func (c *Controller) writeStatus(ctx context.Context, job *batchv1.Job) (*batchv1.Job, error) {
	written, err := c.client.BatchV1().Jobs(job.Namespace).UpdateStatus(ctx, job, metav1.UpdateOptions{})
	if err == nil {
		c.wrote(written)
	}
	return written, err
}
