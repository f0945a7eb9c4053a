package job

// What the controller reads of pods and Jobs.

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/internal/controller"
)

func seconds(n int64) time.Duration { return time.Duration(n) * time.Second }

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func activeOf(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if !terminal(p) && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func terminatingOf(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if !terminal(p) && p.DeletionTimestamp != nil {
			out = append(out, p)
		}
	}
	return out
}

// podFailed: the pod failed, or (unless podReplacementPolicy is Failed)
// is being deleted before it succeeded.
func podFailed(p *corev1.Pod, j *batchv1.Job) bool {
	if p.Status.Phase == corev1.PodFailed {
		return true
	}
	if onlyReplaceFailed(j) {
		return false
	}
	return p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded
}

func onlyReplaceFailed(j *batchv1.Job) bool {
	return ptr.Deref(j.Spec.PodReplacementPolicy, "") == batchv1.Failed
}

func suspended(j *batchv1.Job) bool { return ptr.Deref(j.Spec.Suspend, false) }

// finished: the Job is Complete or Failed.
func finished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// managedByOther: spec.managedBy names another controller.
func managedByOther(j *batchv1.Job) bool {
	return j.Spec.ManagedBy != nil && *j.Spec.ManagedBy != batchv1.JobControllerName
}

func findCondition(list []batchv1.JobCondition, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range list {
		if list[i].Type == t {
			return &list[i]
		}
	}
	return nil
}

func successCriteriaMet(j *batchv1.Job) *batchv1.JobCondition {
	if c := findCondition(j.Status.Conditions, batchv1.JobSuccessCriteriaMet); c != nil && c.Status == corev1.ConditionTrue {
		return c
	}
	return nil
}

func isSuccessCriteriaMet(c *batchv1.JobCondition) bool {
	return c != nil && c.Type == batchv1.JobSuccessCriteriaMet && c.Status == corev1.ConditionTrue
}

func newCondition(t batchv1.JobConditionType, s corev1.ConditionStatus, reason, message string, now time.Time) *batchv1.JobCondition {
	return &batchv1.JobCondition{Type: t, Status: s, Reason: reason, Message: message,
		LastProbeTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now)}
}

// ensureCondition sets the condition of type t, adding it unless it would
// be False; it reports whether the list changed.
func ensureCondition(list []batchv1.JobCondition, t batchv1.JobConditionType, s corev1.ConditionStatus, reason, message string, now time.Time) ([]batchv1.JobCondition, bool) {
	if c := findCondition(list, t); c != nil {
		if c.Status != s || c.Reason != reason || c.Message != message {
			*c = *newCondition(t, s, reason, message, now)
			return list, true
		}
		return list, false
	}
	if s != corev1.ConditionFalse {
		return append(list, *newCondition(t, s, reason, message, now)), true
	}
	return list, false
}

// pastBackoffLimitOnFailure: the restarts of the running and pending pods
// of an OnFailure Job reach its backoffLimit.
func pastBackoffLimitOnFailure(j *batchv1.Job, pods []*corev1.Pod) bool {
	if j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		return false
	}
	var restarts int32
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning && p.Status.Phase != corev1.PodPending {
			continue
		}
		for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			restarts += s.RestartCount
		}
	}
	limit := ptr.Deref(j.Spec.BackoffLimit, 6)
	if limit == 0 {
		return restarts > 0
	}
	return restarts >= limit
}

func (c *Controller) pastDeadline(j *batchv1.Job) bool {
	if j.Spec.ActiveDeadlineSeconds == nil || j.Status.StartTime == nil || suspended(j) {
		return false
	}
	return c.clock.Since(j.Status.StartTime.Time) >= seconds(*j.Spec.ActiveDeadlineSeconds)
}

// newlyFinished are the pods that succeeded or failed and are not counted
// yet (they keep the finalizer and are not in uncountedTerminatedPods).
func newlyFinished(jc *syncCtx) (succeeded, failed []*corev1.Pod) {
	for _, p := range jc.pods {
		if !hasFinalizer(p) || jc.expectedRm.Has(p.UID) || indexed(jc.job) && !validIndex(jc.job, p) {
			continue
		}
		if p.Status.Phase == corev1.PodSucceeded && !jc.uncounted.succeeded.Has(p.UID) {
			succeeded = append(succeeded, p)
		}
		if podFailed(p, jc.job) && !jc.uncounted.failed.Has(p.UID) {
			failed = append(failed, p)
		}
	}
	return succeeded, failed
}

// activePods sort the pods to delete first first, as upstream's
// controller.ActivePods: unscheduled, pending, not ready, ready for less
// time, restarted more, newer.
type activePods []*corev1.Pod

func (s activePods) Len() int      { return len(s) }
func (s activePods) Swap(i, j int) { s[i], s[j] = s[j], s[i] }

func (s activePods) Less(i, j int) bool {
	a, b := s[i], s[j]
	if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	rank := map[corev1.PodPhase]int{corev1.PodPending: 0, corev1.PodUnknown: 1, corev1.PodRunning: 2}
	if rank[a.Status.Phase] != rank[b.Status.Phase] {
		return rank[a.Status.Phase] < rank[b.Status.Phase]
	}
	if controller.PodReady(a) != controller.PodReady(b) {
		return !controller.PodReady(a)
	}
	if controller.PodReady(a) && controller.PodReady(b) {
		ta, tb := controller.PodReadyCondition(a).LastTransitionTime, controller.PodReadyCondition(b).LastTransitionTime
		if !ta.Equal(&tb) {
			return afterOrZero(&ta, &tb)
		}
	}
	if ra, rb := maxRestarts(a), maxRestarts(b); ra != rb {
		return ra > rb
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return afterOrZero(&a.CreationTimestamp, &b.CreationTimestamp)
	}
	return false
}

func afterOrZero(t1, t2 *metav1.Time) bool {
	if t1.Time.IsZero() || t2.Time.IsZero() {
		return t1.Time.IsZero()
	}
	return t1.After(t2.Time)
}

func maxRestarts(p *corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n = max(n, s.RestartCount)
	}
	return n
}
