package cronjob

import (
	"context"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	cronschedule "github.com/kubeembed/apiserver/internal/schedule"
	"github.com/kubeembed/apiserver/internal/writes"
)

// sync brings one CronJob's Jobs and status in line and requeues it for
// its next schedule time.
func (c *Controller) sync(ctx context.Context, k string) error {
	ns, name, _ := strings.Cut(k, "/")
	cached, err := c.cronJobs.CronJobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	// The Jobs are read from the informer: it must have seen every write
	// before the CronJob's revision, the sync's own deletes among them, or a
	// Job replaced a moment ago is "a job the controller did not create or
	// forgot" (CI saw that UnexpectedJob once). Retried as after a failure,
	// so WaitIdle waits.
	if err := c.Observer.ListersCaughtUpTo(c.revisions.Snapshot(), writes.Revision(cached)); err != nil {
		return fmt.Errorf("jobs behind cronjob %s: %w", k, err)
	}
	jobs, err := c.jobsOf(cached)
	if err != nil {
		return err
	}
	s := &syncState{cj: cached.DeepCopy()}
	s.changed = c.cleanup(ctx, s.cj, jobs)
	requeue, syncErr := c.syncCronJob(ctx, s, jobs)
	if s.changed {
		if _, err := c.client.BatchV1().CronJobs(ns).UpdateStatus(ctx, s.cj, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update status: %w", err)
		}
	}
	if requeue != nil {
		c.queue.AddAfterOn(c.clock, k, *requeue)
		return nil
	}
	return syncErr
}

// syncState is the CronJob being synced (the copy whose status is
// written) and whether its status changed.
type syncState struct {
	cj      *batchv1.CronJob
	changed bool
}

func (c *Controller) jobsOf(cj *batchv1.CronJob) ([]*batchv1.Job, error) {
	objs, err := c.jobs.ByIndex(uidIndex, string(cj.UID))
	if err != nil {
		return nil, err
	}
	out := make([]*batchv1.Job, 0, len(objs))
	for _, o := range objs {
		if j, ok := o.(*batchv1.Job); ok {
			out = append(out, j)
		}
	}
	return out, nil
}

// syncCronJob reconciles the CronJob's status with its Jobs, then starts
// the Job its schedule calls for, if any. It returns when to sync again
// (nil: at the next change).
func (c *Controller) syncCronJob(ctx context.Context, s *syncState, jobs []*batchv1.Job) (*time.Duration, error) {
	now := c.clock.Now()
	if err := c.reconcileActive(ctx, s, jobs); err != nil {
		return nil, err
	}
	cj := s.cj
	if cj.DeletionTimestamp != nil {
		return nil, nil
	}
	events := c.recorder()
	if tz := cj.Spec.TimeZone; tz != nil {
		if _, err := loadLocation(*tz); err != nil {
			events.Eventf(cj, corev1.EventTypeWarning, "UnknownTimeZone", "invalid timeZone: %q: %s", *tz, err)
			return nil, nil
		}
	}
	if ptr.Deref(cj.Spec.Suspend, false) {
		return nil, nil
	}
	sched, err := cronschedule.Parse(formatSchedule(cj, events))
	if err != nil {
		events.Eventf(cj, corev1.EventTypeWarning, "UnparseableSchedule", "unparseable schedule: %q : %s", cj.Spec.Schedule, err)
		return nil, nil
	}
	scheduled, err := nextScheduleTime(cj, now, sched, events)
	if err != nil {
		events.Eventf(cj, corev1.EventTypeWarning, "InvalidSchedule", "invalid schedule: %s : %s", cj.Spec.Schedule, err)
		return nil, nil
	}
	next := func() (*time.Duration, error) { return ptr.To(nextSyncIn(s.cj, now, sched)), nil }
	if scheduled == nil {
		return next()
	}
	if !c.mayStart(cj, *scheduled, now) {
		return next()
	}
	if err := c.replace(ctx, s); err != nil {
		return nil, err
	}
	done, err := c.start(ctx, s, *scheduled)
	if err != nil || !done {
		return nil, err
	}
	return next()
}

// mayStart says whether a Job may start for the schedule time: not too
// late, not processed already, not while one runs under Forbid.
func (c *Controller) mayStart(cj *batchv1.CronJob, scheduled, now time.Time) bool {
	events := c.recorder()
	if d := cj.Spec.StartingDeadlineSeconds; d != nil && scheduled.Add(time.Duration(*d)*time.Second).Before(now) {
		events.Eventf(cj, corev1.EventTypeWarning, "MissSchedule", "Missed scheduled time to start a job: %s", scheduled.UTC().Format(time.RFC1123Z))
		return false
	}
	if activeByName(cj, cj.Namespace, jobName(cj, scheduled)) || cj.Status.LastScheduleTime.Equal(&metav1.Time{Time: scheduled}) {
		return false
	}
	if cj.Spec.ConcurrencyPolicy == batchv1.ForbidConcurrent && len(cj.Status.Active) > 0 {
		events.Eventf(cj, corev1.EventTypeNormal, "JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy is Forbid")
		return false
	}
	return true
}

// reconcileActive takes finished Jobs out of the active list (noting the
// last success) and missing ones, which it asks the API server about
// first: the informer may lag.
func (c *Controller) reconcileActive(ctx context.Context, s *syncState, jobs []*batchv1.Job) error {
	children := make(map[types.UID]bool, len(jobs))
	for _, j := range jobs {
		children[j.UID] = true
		if err := c.seeJob(ctx, s, j); err != nil {
			return err
		}
	}
	for _, ref := range s.cj.Status.Active {
		if children[ref.UID] {
			continue
		}
		_, err := c.client.BatchV1().Jobs(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			c.recorder().Eventf(s.cj, corev1.EventTypeNormal, "MissingJob", "Active job went missing: %v", ref.Name)
			removeActive(s.cj, ref.UID)
			s.changed = true
		case err != nil:
			return fmt.Errorf("get job: %w", err)
		}
	}
	return nil
}

// seeJob reconciles the status with one of the CronJob's Jobs.
func (c *Controller) seeJob(ctx context.Context, s *syncState, j *batchv1.Job) error {
	active := isActive(s.cj, j.UID)
	finished, cond := finishedCondition(j)
	switch {
	case !active && !finished:
		// Created and not yet in the cached status, or not ours: the
		// API server's copy of the CronJob tells.
		fresh, err := c.client.BatchV1().CronJobs(s.cj.Namespace).Get(ctx, s.cj.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get cronjob: %w", err)
		}
		if isActive(fresh, j.UID) {
			s.cj = fresh
			return nil
		}
		c.recorder().Eventf(s.cj, corev1.EventTypeWarning, "UnexpectedJob", "Saw a job that the controller did not create or forgot: %s", j.Name)
	case finished:
		if active {
			removeActive(s.cj, j.UID)
			c.recorder().Eventf(s.cj, corev1.EventTypeNormal, "SawCompletedJob", "Saw completed job: %s, condition: %v", j.Name, cond)
			s.changed = true
		}
		if !succeeded(j) {
			return nil
		}
		last := &s.cj.Status.LastSuccessfulTime
		if *last == nil || (j.Status.CompletionTime != nil && j.Status.CompletionTime.After((*last).Time)) {
			*last = j.Status.CompletionTime
			s.changed = true
		}
	}
	return nil
}
