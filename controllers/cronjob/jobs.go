package cronjob

import (
	"context"
	"fmt"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/reference"
	"k8s.io/utils/ptr"
)

// jobName is the name of the Job of a schedule time: unique per minute.
func jobName(cj *batchv1.CronJob, scheduled time.Time) string {
	return fmt.Sprintf("%s-%d", cj.Name, scheduled.Unix()/60)
}

// jobFor is the Job to create for a schedule time.
func jobFor(cj *batchv1.CronJob, scheduled time.Time) (*batchv1.Job, error) {
	loc, err := loadLocation(ptr.Deref(cj.Spec.TimeZone, ""))
	if err != nil {
		return nil, fmt.Errorf("time zone: %w", err)
	}
	labels := make(map[string]string, len(cj.Spec.JobTemplate.Labels))
	for k, v := range cj.Spec.JobTemplate.Labels {
		labels[k] = v
	}
	annotations := make(map[string]string, len(cj.Spec.JobTemplate.Annotations)+1)
	for k, v := range cj.Spec.JobTemplate.Annotations {
		annotations[k] = v
	}
	annotations[batchv1.CronJobScheduledTimestampAnnotation] = scheduled.In(loc).Format(time.RFC3339)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{
		Name: jobName(cj, scheduled), Labels: labels, Annotations: annotations,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, cronJobKind)},
	}}
	cj.Spec.JobTemplate.Spec.DeepCopyInto(&job.Spec)
	return job, nil
}

// start creates the Job of a schedule time and lists it as active. It
// reports false when there is nothing more to do in this sync (the Job
// exists and is another's, or is listed already).
func (c *Controller) start(ctx context.Context, s *syncState, scheduled time.Time) (bool, error) {
	cj := s.cj
	want, err := jobFor(cj, scheduled)
	if err != nil {
		return false, err
	}
	job, err := c.client.BatchV1().Jobs(cj.Namespace).Create(ctx, want, metav1.CreateOptions{})
	existed := apierrors.IsAlreadyExists(err)
	switch {
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return false, err
	case existed:
		// Created before and not listed (a failed status write), or made
		// by someone else, who then keeps the status.
		if job, err = c.client.BatchV1().Jobs(cj.Namespace).Get(ctx, want.Name, metav1.GetOptions{}); err != nil {
			return false, fmt.Errorf("get job: %w", err)
		}
		if !metav1.IsControlledBy(job, cj) || isActive(cj, job.UID) {
			return false, nil
		}
	case err != nil:
		c.recorder().Eventf(cj, corev1.EventTypeWarning, "FailedCreate", "Error creating job: %v", err)
		return false, fmt.Errorf("create job: %w", err)
	}
	if !existed {
		c.recorder().Eventf(cj, corev1.EventTypeNormal, "SuccessfulCreate", "Created job %v", job.Name)
	}
	ref, err := reference.GetReference(scheme.Scheme, job)
	if err != nil {
		return false, fmt.Errorf("unable to make object reference for job for %s/%s", cj.Namespace, cj.Name)
	}
	cj.Status.Active = append(cj.Status.Active, *ref)
	cj.Status.LastScheduleTime = &metav1.Time{Time: scheduled}
	s.changed = true
	return true, nil
}

// replace deletes the active Jobs of a CronJob whose concurrencyPolicy is
// Replace.
func (c *Controller) replace(ctx context.Context, s *syncState) error {
	cj := s.cj
	if cj.Spec.ConcurrencyPolicy != batchv1.ReplaceConcurrent {
		return nil
	}
	for _, ref := range cj.Status.Active {
		job, err := c.client.BatchV1().Jobs(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			c.recorder().Eventf(cj, corev1.EventTypeWarning, "FailedGet", "Get job: %v", err)
			return fmt.Errorf("get job: %w", err)
		}
		if !c.deleteJob(ctx, cj, job) {
			return fmt.Errorf("could not replace job %s/%s", job.Namespace, job.Name)
		}
		s.changed = true
	}
	return nil
}

// deleteJob deletes a Job (its pods in the background) and takes it out
// of the active list, recording either.
func (c *Controller) deleteJob(ctx context.Context, cj *batchv1.CronJob, job *batchv1.Job) bool {
	err := c.client.BatchV1().Jobs(job.Namespace).Delete(ctx, job.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	if err != nil {
		c.recorder().Eventf(cj, corev1.EventTypeWarning, "FailedDelete", "Deleted job: %v", err)
		return false
	}
	removeActive(cj, job.UID)
	c.recorder().Eventf(cj, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted job %v", job.Name)
	return true
}

// cleanup deletes the oldest finished Jobs over the history limits and
// reports whether the status changed.
func (c *Controller) cleanup(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job) bool {
	if cj.Spec.SuccessfulJobsHistoryLimit == nil && cj.Spec.FailedJobsHistoryLimit == nil {
		return false
	}
	var complete, failed []*batchv1.Job
	for _, j := range jobs {
		switch _, cond := finishedCondition(j); cond {
		case batchv1.JobComplete:
			complete = append(complete, j)
		case batchv1.JobFailed:
			failed = append(failed, j)
		}
	}
	changed := false
	if l := cj.Spec.SuccessfulJobsHistoryLimit; l != nil && c.deleteOldest(ctx, cj, complete, *l) {
		changed = true
	}
	if l := cj.Spec.FailedJobsHistoryLimit; l != nil && c.deleteOldest(ctx, cj, failed, *l) {
		changed = true
	}
	return changed
}

// deleteOldest deletes the Jobs over keep, those that started first
// (then by name; not started last).
func (c *Controller) deleteOldest(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job, keep int32) bool {
	n := len(jobs) - int(keep)
	if n <= 0 {
		return false
	}
	sort.Slice(jobs, func(a, b int) bool { return startedBefore(jobs[a], jobs[b]) })
	changed := false
	for _, j := range jobs[:n] {
		if c.deleteJob(ctx, cj, j) {
			changed = true
		}
	}
	return changed
}

func startedBefore(a, b *batchv1.Job) bool {
	sa, sb := a.Status.StartTime, b.Status.StartTime
	switch {
	case sa == nil && sb != nil:
		return false
	case sa != nil && sb == nil:
		return true
	case sa.Equal(sb):
		return a.Name < b.Name
	}
	return sa.Before(sb)
}

// finishedCondition is the Job's first Complete or Failed condition that
// is true.
func finishedCondition(j *batchv1.Job) (bool, batchv1.JobConditionType) {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true, c.Type
		}
	}
	return false, ""
}

func succeeded(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func isActive(cj *batchv1.CronJob, uid types.UID) bool {
	for _, r := range cj.Status.Active {
		if r.UID == uid {
			return true
		}
	}
	return false
}

func activeByName(cj *batchv1.CronJob, ns, name string) bool {
	for _, r := range cj.Status.Active {
		if r.Name == name && r.Namespace == ns {
			return true
		}
	}
	return false
}

// removeActive takes a Job out of the active list (an empty list, not
// nil, as upstream writes it).
func removeActive(cj *batchv1.CronJob, uid types.UID) {
	kept := []corev1.ObjectReference{}
	for _, r := range cj.Status.Active {
		if r.UID != uid {
			kept = append(kept, r)
		}
	}
	cj.Status.Active = kept
}
