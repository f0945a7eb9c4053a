package cronjob_test

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/controllers/cronjob"
	"github.com/kubeembed/apiserver/controllers/kubelet"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// env is a server with the CronJob controller on a fake clock. No Job
// controller runs: the tests finish Jobs by writing their status.
type env struct {
	t   *testing.T
	srv *apiserver.Server
	c   kubernetes.Interface
	clk *clocktesting.FakeClock
}

func start(t *testing.T) *env {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Now())
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Nodes: controllers.Nodes(1), Clock: clk,
		Controllers: []controllers.Name{controllers.ServiceAccount, controllers.Kubelet, controllers.Scheduler, controllers.NodeLifecycle,
			controllers.GarbageCollector, controllers.CronJob}}))
	client, err := srv.Clientset()
	require.NoError(t, err)
	return &env{t: t, srv: srv, c: client, clk: clk}
}

func cronJobOf(name, schedule string, change ...func(*batchv1.CronJob)) *batchv1.CronJob {
	cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: batchv1.CronJobSpec{
		Schedule: schedule,
		JobTemplate: batchv1.JobTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "tick"}, Annotations: map[string]string{"note": "x"}},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}}}}}}}
	for _, f := range change {
		f(cj)
	}
	return cj
}

// create creates cj and waits for the controller to have looked at it.
func (e *env) create(cj *batchv1.CronJob) *batchv1.CronJob {
	e.t.Helper()
	out, err := e.c.BatchV1().CronJobs("default").Create(e.t.Context(), cj, metav1.CreateOptions{})
	require.NoError(e.t, err)
	apiservertest.WaitIdle(e.t, e.srv)
	return out
}

// firstMinute is the first schedule time of "* * * * *" after cj's
// creation: the API server's real clock stamped it.
func firstMinute(cj *batchv1.CronJob) time.Time {
	return cj.CreationTimestamp.Truncate(time.Minute).Add(time.Minute)
}

// at sets the fake clock to t and waits for the controllers.
func (e *env) at(t time.Time) {
	e.t.Helper()
	e.clk.SetTime(t)
	apiservertest.WaitIdle(e.t, e.srv)
}

func (e *env) cronJob(name string) *batchv1.CronJob {
	e.t.Helper()
	cj, err := e.c.BatchV1().CronJobs("default").Get(e.t.Context(), name, metav1.GetOptions{})
	require.NoError(e.t, err)
	return cj
}

func (e *env) jobNames() []string {
	e.t.Helper()
	list, err := e.c.BatchV1().Jobs("default").List(e.t.Context(), metav1.ListOptions{})
	require.NoError(e.t, err)
	var out []string
	for _, j := range list.Items {
		out = append(out, j.Name)
	}
	sort.Strings(out)
	return out
}

// events are "Reason: message" of the events about name, sorted.
func (e *env) events(name string) []string {
	e.t.Helper()
	list, err := e.c.CoreV1().Events("default").List(e.t.Context(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String()})
	require.NoError(e.t, err)
	var out []string
	for _, ev := range list.Items {
		out = append(out, ev.Reason+": "+ev.Message)
	}
	sort.Strings(out)
	return out
}

// finish writes a Job's status as the Job controller finishes it, now on
// the fake clock.
func (e *env) finish(name string, complete bool) time.Time {
	e.t.Helper()
	job, err := e.c.BatchV1().Jobs("default").Get(e.t.Context(), name, metav1.GetOptions{})
	require.NoError(e.t, err)
	now := metav1.NewTime(e.clk.Now().Truncate(time.Second))
	job.Status.StartTime = ptr.To(metav1.NewTime(now.Add(-time.Second)))
	cond := func(t batchv1.JobConditionType) batchv1.JobCondition {
		return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now}
	}
	if complete {
		job.Status.Succeeded, job.Status.CompletionTime = 1, &now
		job.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet), cond(batchv1.JobComplete)}
	} else {
		job.Status.Failed = 1
		job.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobFailureTarget), cond(batchv1.JobFailed)}
	}
	_, err = e.c.BatchV1().Jobs("default").UpdateStatus(e.t.Context(), job, metav1.UpdateOptions{})
	require.NoError(e.t, err)
	apiservertest.WaitIdle(e.t, e.srv)
	return now.Time
}

func jobName(cj string, t time.Time) string { return fmt.Sprintf("%s-%d", cj, t.Unix()/60) }

// A CronJob starts no Job before its schedule; once the clock passes it,
// one Job named after the schedule time, from the template, owned; its
// status lists it; the Job's completion takes it out and is the last
// success.
func TestCronJobFiresWhenTheClockPassesItsSchedule(t *testing.T) {
	t.Parallel()
	e := start(t)
	cj := e.create(cronJobOf("tick", "* * * * *"))
	assert.Empty(t, e.jobNames())

	first := firstMinute(cj)
	e.at(first.Add(30 * time.Second))
	name := jobName("tick", first)
	require.Equal(t, []string{name}, e.jobNames())
	job, err := e.c.BatchV1().Jobs("default").Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "tick", job.Labels["app"])
	assert.Equal(t, map[string]string{"note": "x", batchv1.CronJobScheduledTimestampAnnotation: first.UTC().Format(time.RFC3339)}, job.Annotations)
	assert.Equal(t, []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: "tick", UID: cj.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}, job.OwnerReferences)
	assert.Equal(t, "kube-controller-manager", job.ManagedFields[0].Manager)

	got := e.cronJob("tick")
	require.Len(t, got.Status.Active, 1)
	assert.Equal(t, corev1.ObjectReference{Kind: "Job", Namespace: "default", Name: name, UID: job.UID, APIVersion: "batch/v1",
		ResourceVersion: job.ResourceVersion}, got.Status.Active[0])
	require.NotNil(t, got.Status.LastScheduleTime)
	assert.True(t, got.Status.LastScheduleTime.Time.Equal(first), "lastScheduleTime %v", got.Status.LastScheduleTime)
	assert.Equal(t, []string{"SuccessfulCreate: Created job " + name}, e.events("tick"))

	done := e.finish(name, true)
	got = e.cronJob("tick")
	assert.Empty(t, got.Status.Active)
	require.NotNil(t, got.Status.LastSuccessfulTime)
	assert.True(t, got.Status.LastSuccessfulTime.Time.Equal(done))
	assert.Contains(t, e.events("tick"), "SawCompletedJob: Saw completed job: "+name+", condition: Complete")

	e.at(first.Add(90 * time.Second))
	assert.Equal(t, []string{name, jobName("tick", first.Add(time.Minute))}, e.jobNames())
}

// Forbid starts no Job while one runs (JobAlreadyActive), and the missed
// one once it finishes; Replace deletes the running Job for the next.
func TestCronJobConcurrencyPolicies(t *testing.T) {
	t.Parallel()
	e := start(t)
	forbid := e.create(cronJobOf("forbid", "* * * * *", func(cj *batchv1.CronJob) { cj.Spec.ConcurrencyPolicy = batchv1.ForbidConcurrent }))
	replace := e.create(cronJobOf("replace", "* * * * *", func(cj *batchv1.CronJob) { cj.Spec.ConcurrencyPolicy = batchv1.ReplaceConcurrent }))
	first := firstMinute(forbid)
	require.Equal(t, first, firstMinute(replace), "created in the same minute")
	e.at(first.Add(30 * time.Second))
	f1, r1 := jobName("forbid", first), jobName("replace", first)
	require.Equal(t, []string{f1, r1}, e.jobNames())

	second := first.Add(time.Minute)
	e.at(second.Add(30 * time.Second))
	f2, r2 := jobName("forbid", second), jobName("replace", second)
	assert.Equal(t, []string{f1, r2}, e.jobNames())
	assert.Contains(t, e.events("forbid"), "JobAlreadyActive: Not starting job because prior execution is running and concurrency policy is Forbid")
	// A sync of the CronJob as the informer had it before the status
	// update that dropped r1 (queued by r1's deletion) finds r1 gone and
	// says so, as kube-controller-manager's does in that race (CI saw it).
	replaced := slices.DeleteFunc(e.events("replace"), func(ev string) bool { return ev == "MissingJob: Active job went missing: "+r1 })
	assert.Equal(t, []string{"SuccessfulCreate: Created job " + r1, "SuccessfulCreate: Created job " + r2, "SuccessfulDelete: Deleted job " + r1},
		replaced)
	got := e.cronJob("replace")
	require.Len(t, got.Status.Active, 1)
	assert.Equal(t, r2, got.Status.Active[0].Name)

	e.finish(f1, true)
	assert.Equal(t, []string{f1, f2, r2}, e.jobNames(), "the missed schedule starts once the running Job is done")
}

// Finished Jobs over the history limits are deleted, the oldest first.
func TestCronJobHistoryLimits(t *testing.T) {
	t.Parallel()
	e := start(t)
	cj := e.create(cronJobOf("tick", "* * * * *", func(cj *batchv1.CronJob) {
		cj.Spec.SuccessfulJobsHistoryLimit, cj.Spec.FailedJobsHistoryLimit = ptr.To[int32](1), ptr.To[int32](0)
	}))
	first := firstMinute(cj)
	var names []string
	for i := range 3 {
		at := first.Add(time.Duration(i) * time.Minute)
		e.at(at.Add(30 * time.Second))
		names = append(names, jobName("tick", at))
		e.finish(names[i], i < 2)
	}
	assert.Equal(t, []string{names[1]}, e.jobNames(), "one success kept, no failure")
	evs := e.events("tick")
	assert.Contains(t, evs, "SuccessfulDelete: Deleted job "+names[0])
	assert.Contains(t, evs, "SuccessfulDelete: Deleted job "+names[2])
	assert.Empty(t, e.cronJob("tick").Status.Active)
}

// A suspended CronJob starts nothing; resumed, it starts the Job of the
// schedule time it missed.
func TestCronJobSuspended(t *testing.T) {
	t.Parallel()
	e := start(t)
	cj := e.create(cronJobOf("tick", "* * * * *", func(cj *batchv1.CronJob) { cj.Spec.Suspend = ptr.To(true) }))
	first := firstMinute(cj)
	e.at(first.Add(30 * time.Second))
	assert.Empty(t, e.jobNames())

	cj = e.cronJob("tick")
	cj.Spec.Suspend = ptr.To(false)
	_, err := e.c.BatchV1().CronJobs("default").Update(t.Context(), cj, metav1.UpdateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, e.srv)
	assert.Equal(t, []string{jobName("tick", first)}, e.jobNames())
}

// Past startingDeadlineSeconds a schedule time is not started; the next
// one, in time, is.
func TestCronJobStartingDeadline(t *testing.T) {
	t.Parallel()
	e := start(t)
	cj := e.create(cronJobOf("tick", "* * * * *", func(cj *batchv1.CronJob) { cj.Spec.StartingDeadlineSeconds = ptr.To[int64](10) }))
	first := firstMinute(cj)
	e.at(first.Add(30 * time.Second))
	assert.Empty(t, e.jobNames())
	e.at(first.Add(65 * time.Second))
	assert.Equal(t, []string{jobName("tick", first.Add(time.Minute))}, e.jobNames())
}

// Hours of missed minutes: a warning, and one Job, for the latest.
func TestCronJobTooManyMissedTimes(t *testing.T) {
	t.Parallel()
	e := start(t)
	cj := e.create(cronJobOf("tick", "* * * * *"))
	latest := firstMinute(cj).Add(3 * time.Hour)
	e.at(latest.Add(30 * time.Second))
	assert.Equal(t, []string{jobName("tick", latest)}, e.jobNames())
	assert.Equal(t, []string{"SuccessfulCreate: Created job " + jobName("tick", latest),
		"TooManyMissedTimes: too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew"}, e.events("tick"))
}

// A schedule in spec.timeZone: "0 * * * *" in Asia/Kolkata (UTC+05:30)
// is half past each UTC hour; the annotation is in the zone.
func TestCronJobTimeZone(t *testing.T) {
	t.Parallel()
	e := start(t)
	cj := e.create(cronJobOf("tick", "0 * * * *", func(cj *batchv1.CronJob) { cj.Spec.TimeZone = ptr.To("Asia/Kolkata") }))
	at := cj.CreationTimestamp.UTC().Truncate(time.Hour).Add(30 * time.Minute)
	if !at.After(cj.CreationTimestamp.Time) {
		at = at.Add(time.Hour)
	}
	e.at(at.Add(-time.Second))
	assert.Empty(t, e.jobNames())
	e.at(at.Add(time.Second))
	name := jobName("tick", at)
	require.Equal(t, []string{name}, e.jobNames())
	job, err := e.c.BatchV1().Jobs("default").Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	require.NoError(t, err)
	assert.Equal(t, at.In(kolkata).Format(time.RFC3339), job.Annotations[batchv1.CronJobScheduledTimestampAnnotation])
	assert.Regexp(t, `T\d\d:00:00\+05:30$`, job.Annotations[batchv1.CronJobScheduledTimestampAnnotation])
}

// A time zone the controller cannot load (the API server could): an
// UnknownTimeZone warning and no Job.
func TestCronJobUnknownTimeZone(t *testing.T) {
	t.Parallel()
	e := start(t)
	cj := e.create(cronJobOf("tick", "* * * * *", func(cj *batchv1.CronJob) { cj.Spec.TimeZone = ptr.To(cronjob.MissingZone) }))
	e.at(firstMinute(cj).Add(30 * time.Second))
	assert.Empty(t, e.jobNames())
	assert.Contains(t, e.events("tick"), fmt.Sprintf("UnknownTimeZone: invalid timeZone: %q: unknown time zone %s", cronjob.MissingZone, cronjob.MissingZone))
}

// An active Job deleted behind the controller's back: MissingJob; a Job
// it did not create: UnexpectedJob.
func TestCronJobMissingAndUnexpectedJobs(t *testing.T) {
	t.Parallel()
	e := start(t)
	cj := e.create(cronJobOf("tick", "* * * * *"))
	first := firstMinute(cj)
	e.at(first.Add(30 * time.Second))
	name := jobName("tick", first)
	require.NoError(t, e.c.BatchV1().Jobs("default").Delete(t.Context(), name, metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, e.srv)
	assert.Contains(t, e.events("tick"), "MissingJob: Active job went missing: "+name)
	assert.Empty(t, e.cronJob("tick").Status.Active)

	stray := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "stray", Namespace: "default",
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, batchv1.SchemeGroupVersion.WithKind("CronJob"))}},
		Spec: cj.Spec.JobTemplate.Spec}
	_, err := e.c.BatchV1().Jobs("default").Create(t.Context(), stray, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, e.srv)
	assert.Contains(t, e.events("tick"), "UnexpectedJob: Saw a job that the controller did not create or forgot: stray")
	assert.Empty(t, e.cronJob("tick").Status.Active)
}

// The API server refuses what the controller's parser refuses, with
// kube-apiserver's messages.
func TestCronJobScheduleValidation(t *testing.T) {
	t.Parallel()
	e := start(t)
	for schedule, msg := range map[string]string{
		"* * * *":          `spec.schedule: Invalid value: "* * * *": expected exactly 5 fields, found 4: [* * * *]`,
		"61 * * * *":       `spec.schedule: Invalid value: "61 * * * *": end of range (61) above maximum (59): 61`,
		"@sometimes":       `spec.schedule: Invalid value: "@sometimes": unrecognized descriptor: @sometimes`,
		"TZ=UTC * * * * *": `spec.schedule: Invalid value: "TZ=UTC * * * * *": cannot use TZ or CRON_TZ in schedule, use timeZone field instead`,
	} {
		_, err := e.c.BatchV1().CronJobs("default").Create(t.Context(), cronJobOf("bad", schedule), metav1.CreateOptions{})
		require.True(t, apierrors.IsInvalid(err), "%q: %v", schedule, err)
		assert.Equal(t, `CronJob.batch "bad" is invalid: `+msg, err.Error())
	}
	for _, schedule := range []string{"*/5 1-3 * jan,feb mon-fri", "@hourly", "@every 90m"} {
		_, err := e.c.BatchV1().CronJobs("default").Create(t.Context(), cronJobOf("good", schedule), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		assert.NoError(t, err, schedule)
	}
}

// With the Job controller, pods that succeed and the TTL-after-finished
// controller, on the fake clock: the scheduled Job runs and completes, the
// CronJob notes it, and the Job is deleted once its TTL has passed.
func TestCronJobRunsItsJobToCompletion(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Now())
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Nodes: controllers.Nodes(1), Clock: clk,
		Controllers: []controllers.Name{controllers.ServiceAccount, controllers.Kubelet, controllers.Scheduler,
			controllers.NodeLifecycle, controllers.GarbageCollector, controllers.Job, controllers.CronJob, controllers.TTLAfterFinished}}))
	srv.Kubelet().AddRule(kubelet.Rule{OwnerKind: "Job", Exit: &kubelet.Exit{Code: 0}})
	client, err := srv.Clientset()
	require.NoError(t, err)
	e := &env{t: t, srv: srv, c: client, clk: clk}
	cj := e.create(cronJobOf("tick", "* * * * *", func(cj *batchv1.CronJob) {
		cj.Spec.JobTemplate.Spec.TTLSecondsAfterFinished = ptr.To[int32](60)
	}))
	first := firstMinute(cj)
	e.at(first.Add(30 * time.Second))
	// The pod runs and succeeds on the simulated node: the clock moves a
	// second at a time until the Job completes (at most a minute).
	name := jobName("tick", first)
	var job *batchv1.Job
	for range 60 {
		job, err = e.c.BatchV1().Jobs("default").Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)
		if job.Status.CompletionTime != nil {
			break
		}
		apiservertest.StepClock(t, srv, clk, time.Second)
	}
	if job.Status.CompletionTime == nil {
		pods, _ := e.c.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{})
		for _, p := range pods.Items {
			t.Logf("pod %s: node %q phase %s conditions %v containers %v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
		}
		nodes, _ := e.c.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
		for _, n := range nodes.Items {
			t.Logf("node %s: taints %v conditions %v", n.Name, n.Spec.Taints, n.Status.Conditions)
		}
		t.Logf("clock %v", clk.Now())
	}
	require.NotNil(t, job.Status.CompletionTime, "the Job completed: %+v", job.Status)
	got := e.cronJob("tick")
	assert.Empty(t, got.Status.Active)
	require.NotNil(t, got.Status.LastSuccessfulTime)
	assert.True(t, got.Status.LastSuccessfulTime.Equal(job.Status.CompletionTime))
	assert.Contains(t, e.events("tick"), "SawCompletedJob: Saw completed job: "+name+", condition: Complete")

	// The next minute's Job starts meanwhile.
	apiservertest.StepClock(t, srv, clk, 57*time.Second)
	assert.Equal(t, []string{name, jobName("tick", first.Add(time.Minute))}, e.jobNames())
	apiservertest.StepClock(t, srv, clk, 3*time.Second)
	assert.Equal(t, []string{jobName("tick", first.Add(time.Minute))}, e.jobNames(), "deleted by its TTL")
}
