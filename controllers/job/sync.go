package job

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/internal/controller"
)

// syncCtx is what one sync knows of a Job, as upstream's syncJobCtx.
type syncCtx struct {
	key           string
	job           *batchv1.Job
	pods, active  []*corev1.Pod
	finished      *batchv1.JobCondition
	succeeded     int32
	failed        int32
	prevSucceeded intervals
	succeededIdx  intervals
	failedIdx     *intervals
	backoff       backoffRecord
	expectedRm    sets.Set[types.UID]
	uncounted     uncounted
	delayed       map[int]*corev1.Pod
	terminating   int32
	ready         int32
}

type uncounted struct{ succeeded, failed sets.Set[types.UID] }

// sync brings one Job's pods and status in line.
func (c *Controller) sync(ctx context.Context, k string) error {
	ns, name, _ := strings.Cut(k, "/")
	shared, err := c.jobs.Jobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.expect.Forget(k)
		c.finalizers.forget(k)
		c.backoff.remove(k)
		c.written.Delete(k)
		return nil
	}
	if err != nil {
		return err
	}
	if c.stale(shared) {
		return nil // the informer's event of the last write syncs it again
	}
	if managedByOther(shared) {
		return nil
	}
	if finished(shared) {
		c.backoff.remove(k)
		c.finished.Delete(shared.UID)
		return nil
	}
	if _, ok := c.finished.Load(shared.UID); ok {
		return nil // written finished; the informer shows it soon
	}
	job := shared.DeepCopy()
	if m := job.Spec.CompletionMode; m != nil && *m != batchv1.NonIndexedCompletion && *m != batchv1.IndexedCompletion {
		c.recorder().Event(job, corev1.EventTypeWarning, "UnknownCompletionMode", "Skipped Job sync because completion mode is unknown")
		return nil
	}
	if job.Status.UncountedTerminatedPods == nil {
		job.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	}
	satisfied := c.expect.Satisfied(k)
	pods, err := c.podsFor(ctx, job)
	if err != nil {
		return err
	}
	jc := c.newSyncCtx(k, job, pods)
	c.judge(jc)
	return c.act(ctx, jc, satisfied)
}

// newSyncCtx counts the Job's pods.
func (c *Controller) newSyncCtx(k string, job *batchv1.Job, pods []*corev1.Pod) *syncCtx {
	u := job.Status.UncountedTerminatedPods
	jc := &syncCtx{key: k, job: job, pods: pods, active: activeOf(pods), expectedRm: c.finalizers.expected(k),
		uncounted: uncounted{succeeded: sets.New(u.Succeeded...), failed: sets.New(u.Failed...)}, terminating: int32(len(terminatingOf(pods)))}
	for _, p := range jc.active {
		if controller.PodReady(p) {
			jc.ready++
		}
	}
	newSucceeded, newFailed := newlyFinished(jc)
	jc.succeeded = job.Status.Succeeded + int32(len(newSucceeded)+len(u.Succeeded))
	jc.failed = job.Status.Failed + int32(countedFailures(job, newFailed)+len(u.Failed))
	if job.Status.StartTime == nil && !suspended(job) {
		job.Status.StartTime = ptr.To(metav1.NewTime(c.clock.Now()))
	}
	jc.backoff = c.backoff.next(k, newSucceeded, newFailed)
	return jc
}

// judge finds how the Job ends, if it does, in upstream's order: the
// conditions already met, the pod failure policy, the back-off limit, the
// deadline, then (Indexed) failed indexes and the success policy.
func (c *Controller) judge(jc *syncCtx) {
	job, now := jc.job, c.clock.Now()
	jc.finished = successCriteriaMet(job)
	if jc.finished == nil {
		if ft := findCondition(job.Status.Conditions, batchv1.JobFailureTarget); ft != nil && ft.Status == corev1.ConditionTrue {
			jc.finished = newCondition(batchv1.JobFailed, corev1.ConditionTrue, ft.Reason, ft.Message, now)
		} else if msg := failJobMessage(job, jc.pods); msg != nil {
			jc.finished = newCondition(batchv1.JobFailureTarget, corev1.ConditionTrue, batchv1.JobReasonPodFailurePolicy, *msg, now)
		}
	}
	if jc.finished == nil {
		switch {
		case jc.failed > ptr.Deref(job.Spec.BackoffLimit, 6) || pastBackoffLimitOnFailure(job, jc.pods):
			jc.finished = newCondition(batchv1.JobFailureTarget, corev1.ConditionTrue, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit", now)
		case c.pastDeadline(job):
			jc.finished = newCondition(batchv1.JobFailureTarget, corev1.ConditionTrue, batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline", now)
		case job.Spec.ActiveDeadlineSeconds != nil && !suspended(job):
			c.queue.AddAfterOn(c.clock, jc.key, max(seconds(*job.Spec.ActiveDeadlineSeconds)-c.clock.Since(job.Status.StartTime.Time), 0))
		}
	}
	if indexed(job) {
		c.judgeIndexes(jc, now)
	}
}

func (c *Controller) judgeIndexes(jc *syncCtx, now time.Time) {
	job := jc.job
	jc.prevSucceeded, jc.succeededIdx = succeededIndexes(job, jc.pods)
	jc.succeeded = int32(jc.succeededIdx.total())
	if perIndex(job) {
		jc.failedIdx = failedIndexesOf(job, jc.pods)
		if jc.finished == nil {
			failed := jc.failedIdx.total()
			switch {
			case job.Spec.MaxFailedIndexes != nil && failed > int(*job.Spec.MaxFailedIndexes):
				jc.finished = newCondition(batchv1.JobFailureTarget, corev1.ConditionTrue, batchv1.JobReasonMaxFailedIndexesExceeded,
					"Job has exceeded the specified maximal number of failed indexes", now)
			case failed > 0 && failed+jc.succeededIdx.total() >= completions(job):
				jc.finished = newCondition(batchv1.JobFailureTarget, corev1.ConditionTrue, batchv1.JobReasonFailedIndexes, "Job has failed indexes", now)
			}
		}
		jc.delayed = delayedDeletions(jc)
	}
	if jc.finished == nil {
		if msg, met := matchSuccessPolicy(job.Spec.SuccessPolicy, completions(job), jc.succeededIdx); met {
			jc.finished = newCondition(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, batchv1.JobReasonSuccessPolicy, msg, now)
		}
	}
}

// act deletes the active pods of a Job that ends, or manages its pods,
// then writes its status.
func (c *Controller) act(ctx context.Context, jc *syncCtx, satisfied bool) error {
	job := jc.job
	active := int32(len(jc.active))
	var manageErr error
	suspendChanged := false
	if jc.finished != nil {
		deletedReady, deleted, err := c.deleteActive(ctx, job, jc.active)
		if deleted != active || !satisfied {
			jc.finished = nil // pods left, or not yet seen
		}
		active -= deleted
		jc.terminating += deleted
		jc.ready -= deletedReady
		manageErr = err
	} else {
		active, suspendChanged, manageErr = c.manageAndJudgeSuccess(ctx, jc, satisfied)
	}
	flush := suspendChanged || active != job.Status.Active || !ptr.Equal(&jc.ready, job.Status.Ready) ||
		!ptr.Equal(job.Status.Terminating, &jc.terminating)
	job.Status.Active = active
	job.Status.Ready = ptr.To(jc.ready)
	job.Status.Terminating = ptr.To(jc.terminating)
	if err := c.track(ctx, jc, flush); err != nil {
		return fmt.Errorf("tracking status: %w", err)
	}
	return manageErr
}

// manageAndJudgeSuccess manages the pods of a Job not ending, then sees
// whether it completed or else whether it was suspended or resumed.
func (c *Controller) manageAndJudgeSuccess(ctx context.Context, jc *syncCtx, satisfied bool) (int32, bool, error) {
	job := jc.job
	active := int32(len(jc.active))
	var err error
	managed := false
	if satisfied && job.DeletionTimestamp == nil {
		active, err = c.manage(ctx, jc)
		managed = true
	}
	now := c.clock.Now()
	complete := jc.succeeded > 0 && active == 0
	if job.Spec.Completions != nil {
		complete = jc.succeeded >= *job.Spec.Completions && active == 0
	}
	switch {
	case complete:
		jc.finished = newCondition(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, batchv1.JobReasonCompletionsReached,
			"Reached expected number of succeeded pods", now)
	case !managed:
	case suspended(job):
		var changed bool
		job.Status.Conditions, changed = ensureCondition(job.Status.Conditions, batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended", now)
		if changed {
			c.recorder().Event(job, corev1.EventTypeNormal, "Suspended", "Job suspended")
			job.Status.StartTime = nil
		}
		return active, changed, err
	default:
		var changed bool
		job.Status.Conditions, changed = ensureCondition(job.Status.Conditions, batchv1.JobSuspended, corev1.ConditionFalse, "JobResumed", "Job resumed", now)
		if changed {
			c.recorder().Event(job, corev1.EventTypeNormal, "Resumed", "Job resumed")
			job.Status.StartTime = ptr.To(metav1.NewTime(now))
		}
		return active, changed, err
	}
	return active, false, err
}

// podsFor claims the Job's pods: its own that match, and the orphans that
// match, adopted with the tracking finalizer.
func (c *Controller) podsFor(ctx context.Context, job *batchv1.Job) ([]*corev1.Pod, error) {
	selector, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("couldn't convert Job selector: %v", err)
	}
	candidates, err := controller.ControlledAndOrphans(c.pods, jobKind.Kind, job)
	if err != nil {
		return nil, err
	}
	pods, err := controller.Claim(ctx, controller.Claimer{Owner: job, OwnerKind: jobKind, Selector: selector, Kind: "Pod",
		Live: func(ctx context.Context) (metav1.Object, error) {
			return c.client.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
		},
		Patch: func(ctx context.Context, o metav1.Object, body string) error {
			return c.patchPod(ctx, o.GetNamespace(), o.GetName(), withTrackingFinalizer(body))
		}}, candidates)
	if err != nil {
		return pods, err
	}
	for i, p := range pods {
		if ref := metav1.GetControllerOf(p); (ref == nil || ref.UID != job.UID) && !hasFinalizer(p) {
			pods[i] = p.DeepCopy() // just adopted: the patch added the finalizer
			pods[i].Finalizers = append(pods[i].Finalizers, batchv1.JobTrackingFinalizer)
		}
	}
	return pods, nil
}

// withTrackingFinalizer makes Claim's patches upstream's for Jobs: an
// adoption adds the tracking finalizer, a release removes it.
func withTrackingFinalizer(body string) []byte {
	var patch struct {
		Metadata map[string]any `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(body), &patch); err != nil || patch.Metadata == nil {
		return []byte(body)
	}
	refs, _ := patch.Metadata["ownerReferences"].([]any)
	release := false
	if len(refs) == 1 {
		ref, _ := refs[0].(map[string]any)
		release = ref["$patch"] == "delete"
	}
	if release {
		patch.Metadata["$deleteFromPrimitiveList/finalizers"] = []string{batchv1.JobTrackingFinalizer}
	} else {
		patch.Metadata["finalizers"] = []string{batchv1.JobTrackingFinalizer}
	}
	b, _ := json.Marshal(patch)
	return b
}
