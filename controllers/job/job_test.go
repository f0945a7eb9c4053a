package job_test

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/controllers/kubelet"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// start starts a server whose pods run, with the job controller, on clk
// (nil: the real clock).
func start(t *testing.T, clk *clocktesting.FakeClock) (*apiserver.Server, kubernetes.Interface) {
	t.Helper()
	opts := apiserver.Options{Nodes: controllers.Nodes(2),
		Controllers: []controllers.Name{controllers.ServiceAccount, controllers.Kubelet, controllers.Scheduler, controllers.NodeLifecycle,
			controllers.GarbageCollector, controllers.Job}}
	if clk != nil {
		opts.Clock = clk
	}
	srv := apiservertest.Start(t, apiservertest.WithOptions(opts))
	client, err := srv.Clientset()
	require.NoError(t, err)
	return srv, client
}

func newJob(name string, completions, parallelism int32) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: batchv1.JobSpec{
		Completions: ptr.To(completions), Parallelism: ptr.To(parallelism),
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"note": "x"}},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}}}
}

func create(t *testing.T, c kubernetes.Interface, j *batchv1.Job) *batchv1.Job {
	t.Helper()
	created, err := c.BatchV1().Jobs("default").Create(t.Context(), j, metav1.CreateOptions{})
	require.NoError(t, err)
	return created
}

func getJob(t *testing.T, c kubernetes.Interface, name string) *batchv1.Job {
	t.Helper()
	j, err := c.BatchV1().Jobs("default").Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return j
}

func pods(t *testing.T, c kubernetes.Interface) []corev1.Pod {
	t.Helper()
	list, err := c.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

// events are the job's events as "Type Reason Message", sorted.
func events(t *testing.T, c kubernetes.Interface, name string) []string {
	t.Helper()
	list, err := c.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String()})
	require.NoError(t, err)
	var out []string
	for _, e := range list.Items {
		assert.Equal(t, "job-controller", e.Source.Component)
		out = append(out, e.Type+" "+e.Reason+" "+e.Message)
	}
	sort.Strings(out)
	return out
}

// conditions are the Job's conditions as "Type Status Reason: Message".
func conditions(j *batchv1.Job) []string {
	var out []string
	for _, c := range j.Status.Conditions {
		out = append(out, string(c.Type)+" "+string(c.Status)+" "+c.Reason+": "+c.Message)
	}
	return out
}

func exitAll(srv *apiserver.Server, code int32) {
	srv.Kubelet().AddRule(kubelet.Rule{OwnerKind: "Job", Exit: &kubelet.Exit{Code: code}})
}

// A Job's pods are named, labelled, annotated, owned and finalized as
// upstream makes them; they succeed, the status counts them through
// uncountedTerminatedPods (their finalizers go) and the Job completes.
func TestNonIndexedJobCompletes(t *testing.T) {
	t.Parallel()
	srv, c := start(t, nil)
	exitAll(srv, 0)
	job := create(t, c, newJob("pi", 2, 2))
	apiservertest.WaitIdle(t, srv)

	ps := pods(t, c)
	require.Len(t, ps, 2)
	uid := string(job.UID)
	var created []string
	for _, p := range ps {
		created = append(created, "Normal SuccessfulCreate Created pod: "+p.Name)
		assert.Equal(t, "pi-", p.GenerateName)
		assert.Equal(t, map[string]string{"controller-uid": uid, "batch.kubernetes.io/controller-uid": uid,
			"job-name": "pi", "batch.kubernetes.io/job-name": "pi"}, p.Labels)
		assert.Equal(t, map[string]string{"note": "x"}, p.Annotations)
		assert.Equal(t, []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "pi", UID: job.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}, p.OwnerReferences)
		assert.Empty(t, p.Finalizers, "the tracking finalizer is removed once counted")
		assert.Equal(t, corev1.PodSucceeded, p.Status.Phase)
		assert.Equal(t, "kube-controller-manager", p.ManagedFields[0].Manager)
	}
	job = getJob(t, c, "pi")
	assert.Equal(t, []string{
		"SuccessCriteriaMet True CompletionsReached: Reached expected number of succeeded pods",
		"Complete True CompletionsReached: Reached expected number of succeeded pods"}, conditions(job))
	s := job.Status
	assert.Equal(t, int32(2), s.Succeeded)
	assert.Zero(t, s.Active)
	assert.Zero(t, s.Failed)
	assert.Equal(t, ptr.To(int32(0)), s.Ready)
	assert.Equal(t, ptr.To(int32(0)), s.Terminating)
	assert.Equal(t, &batchv1.UncountedTerminatedPods{}, s.UncountedTerminatedPods)
	require.NotNil(t, s.StartTime)
	require.NotNil(t, s.CompletionTime)
	assert.False(t, s.CompletionTime.Before(s.StartTime))
	assert.Equal(t, append([]string{"Normal Completed Job completed"}, created...), events(t, c, "pi"))
}

// A Job without completions (a work queue) completes once one pod
// succeeded and none is left running.
func TestWorkQueueJobCompletes(t *testing.T) {
	t.Parallel()
	srv, c := start(t, nil)
	j := newJob("queue", 0, 2)
	j.Spec.Completions = nil
	create(t, c, j)
	apiservertest.WaitIdle(t, srv)
	ps := pods(t, c)
	require.Len(t, ps, 2)
	require.NoError(t, srv.Kubelet().Complete(t.Context(), "default", ps[0].Name))
	apiservertest.WaitIdle(t, srv)
	job := getJob(t, c, "queue")
	assert.Equal(t, int32(1), job.Status.Succeeded)
	assert.Equal(t, int32(1), job.Status.Active, "the other keeps running")
	assert.Len(t, pods(t, c), 2, "no pod is added once one succeeded")
	require.NoError(t, srv.Kubelet().Complete(t.Context(), "default", ps[1].Name))
	apiservertest.WaitIdle(t, srv)
	job = getJob(t, c, "queue")
	assert.Equal(t, int32(2), job.Status.Succeeded)
	assert.Contains(t, conditions(job), "Complete True CompletionsReached: Reached expected number of succeeded pods")
}

// An Indexed Job's pods carry their index (annotation, label, variable),
// hostname <job>-<index> and name <job>-<index>-<random>; completed
// indexes are listed as intervals.
func TestIndexedJob(t *testing.T) {
	t.Parallel()
	srv, c := start(t, nil)
	j := newJob("idx", 3, 3)
	j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
	j.Spec.Template.Spec.Subdomain = "workers"
	create(t, c, j)
	apiservertest.WaitIdle(t, srv)
	ps := pods(t, c)
	require.Len(t, ps, 3)
	for i, p := range ps {
		ix := string(rune('0' + i))
		assert.Equal(t, "idx-"+ix+"-", p.GenerateName)
		assert.True(t, strings.HasPrefix(p.Name, "idx-"+ix+"-"))
		assert.Equal(t, ix, p.Annotations[batchv1.JobCompletionIndexAnnotation])
		assert.Equal(t, ix, p.Labels[batchv1.JobCompletionIndexAnnotation])
		assert.Equal(t, "idx-"+ix, p.Spec.Hostname)
		assert.Equal(t, "workers", p.Spec.Subdomain)
		assert.Equal(t, []corev1.EnvVar{{Name: "JOB_COMPLETION_INDEX", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
			APIVersion: "v1", FieldPath: "metadata.labels['batch.kubernetes.io/job-completion-index']"}}}}, p.Spec.Containers[0].Env)
		assert.Equal(t, []string{batchv1.JobTrackingFinalizer}, p.Finalizers)
	}
	require.NoError(t, srv.Kubelet().Complete(t.Context(), "default", ps[0].Name))
	require.NoError(t, srv.Kubelet().Complete(t.Context(), "default", ps[2].Name))
	apiservertest.WaitIdle(t, srv)
	job := getJob(t, c, "idx")
	assert.Equal(t, "0,2", job.Status.CompletedIndexes)
	assert.Equal(t, int32(2), job.Status.Succeeded)
	assert.Equal(t, int32(1), job.Status.Active)
	require.NoError(t, srv.Kubelet().Complete(t.Context(), "default", ps[1].Name))
	apiservertest.WaitIdle(t, srv)
	job = getJob(t, c, "idx")
	assert.Equal(t, "0-2", job.Status.CompletedIndexes)
	assert.Contains(t, conditions(job), "Complete True CompletionsReached: Reached expected number of succeeded pods")
}

// Failed pods are replaced after upstream's back-off (10 s, doubling) on
// the server's clock: pods that fail forever make a bounded number of
// creates, and the Job fails once its backoffLimit is exceeded.
func TestBackoffLimitAndBackoffDelay(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Now())
	srv, c := start(t, clk)
	exitAll(srv, 1)
	j := newJob("flaky", 1, 1)
	j.Spec.BackoffLimit = ptr.To(int32(2))
	create(t, c, j)
	apiservertest.WaitIdle(t, srv)
	require.Len(t, pods(t, c), 1)
	assert.Equal(t, int32(1), getJob(t, c, "flaky").Status.Failed)

	apiservertest.StepClock(t, srv, clk, 9*time.Second)
	assert.Len(t, pods(t, c), 1, "still backing off")
	apiservertest.StepClock(t, srv, clk, time.Second)
	require.Len(t, pods(t, c), 2, "replaced after 10s")
	assert.Equal(t, int32(2), getJob(t, c, "flaky").Status.Failed)

	apiservertest.StepClock(t, srv, clk, 19*time.Second)
	assert.Len(t, pods(t, c), 2, "the second back-off is 20s")
	apiservertest.StepClock(t, srv, clk, time.Second)
	require.Len(t, pods(t, c), 3)
	job := getJob(t, c, "flaky")
	assert.Equal(t, int32(3), job.Status.Failed)
	assert.Equal(t, []string{
		"FailureTarget True BackoffLimitExceeded: Job has reached the specified backoff limit",
		"Failed True BackoffLimitExceeded: Job has reached the specified backoff limit"}, conditions(job))
	assert.Nil(t, job.Status.CompletionTime)
	assert.Contains(t, events(t, c, "flaky"), "Warning BackoffLimitExceeded Job has reached the specified backoff limit")
	for _, p := range pods(t, c) {
		assert.Empty(t, p.Finalizers)
	}
	apiservertest.StepClock(t, srv, clk, time.Hour)
	assert.Len(t, pods(t, c), 3, "a failed Job makes no more pods")
}

// activeDeadlineSeconds runs on the server's clock: past it, the Job's
// pods are deleted (and counted failed) and it fails with DeadlineExceeded.
func TestActiveDeadline(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Now())
	srv, c := start(t, clk)
	j := newJob("slow", 1, 1)
	j.Spec.ActiveDeadlineSeconds = ptr.To(int64(30))
	create(t, c, j)
	apiservertest.WaitIdle(t, srv)
	ps := pods(t, c)
	require.Len(t, ps, 1)
	assert.Equal(t, int32(1), getJob(t, c, "slow").Status.Active)
	apiservertest.StepClock(t, srv, clk, 29*time.Second)
	assert.Empty(t, getJob(t, c, "slow").Status.Conditions)
	apiservertest.StepClock(t, srv, clk, time.Second)
	job := getJob(t, c, "slow")
	assert.Equal(t, []string{
		"FailureTarget True DeadlineExceeded: Job was active longer than specified deadline",
		"Failed True DeadlineExceeded: Job was active longer than specified deadline"}, conditions(job))
	assert.Equal(t, int32(1), job.Status.Failed)
	assert.Zero(t, job.Status.Active)
	assert.Empty(t, pods(t, c), "the deleted pod is gone once its finalizer is removed")
	assert.Equal(t, []string{"Normal SuccessfulCreate Created pod: " + ps[0].Name, "Normal SuccessfulDelete Deleted pod: " + ps[0].Name,
		"Warning DeadlineExceeded Job was active longer than specified deadline"}, events(t, c, "slow"))
}

// A suspended Job runs no pods and says so; resumed, it starts (its
// startTime then); suspended again, its pods are deleted and startTime
// cleared.
func TestSuspendAndResume(t *testing.T) {
	t.Parallel()
	srv, c := start(t, nil)
	j := newJob("later", 2, 2)
	j.Spec.Suspend = ptr.To(true)
	create(t, c, j)
	apiservertest.WaitIdle(t, srv)
	assert.Empty(t, pods(t, c))
	job := getJob(t, c, "later")
	assert.Equal(t, []string{"Suspended True JobSuspended: Job suspended"}, conditions(job))
	assert.Nil(t, job.Status.StartTime)
	assert.Equal(t, []string{"Normal Suspended Job suspended"}, events(t, c, "later"))

	job.Spec.Suspend = ptr.To(false)
	_, err := c.BatchV1().Jobs("default").Update(t.Context(), job, metav1.UpdateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	assert.Len(t, pods(t, c), 2)
	job = getJob(t, c, "later")
	assert.Equal(t, []string{"Suspended False JobResumed: Job resumed"}, conditions(job))
	assert.NotNil(t, job.Status.StartTime)
	assert.Equal(t, int32(2), job.Status.Active)
	assert.Contains(t, events(t, c, "later"), "Normal Resumed Job resumed")

	job.Spec.Suspend = ptr.To(true)
	_, err = c.BatchV1().Jobs("default").Update(t.Context(), job, metav1.UpdateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	assert.Empty(t, pods(t, c))
	job = getJob(t, c, "later")
	assert.Equal(t, []string{"Suspended True JobSuspended: Job suspended"}, conditions(job))
	assert.Nil(t, job.Status.StartTime)
	assert.Zero(t, job.Status.Active)
	assert.Zero(t, job.Status.Failed, "pods deleted by a suspend are not failures")
}

func onExitCodes(action batchv1.PodFailurePolicyAction, codes ...int32) batchv1.PodFailurePolicyRule {
	return batchv1.PodFailurePolicyRule{Action: action, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
		Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: codes}}
}

// A FailJob rule fails the Job at the first matching failure, with
// upstream's message naming the container, pod and rule.
func TestPodFailurePolicyFailJob(t *testing.T) {
	t.Parallel()
	srv, c := start(t, nil)
	exitAll(srv, 42)
	j := newJob("strict", 1, 1)
	j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		onExitCodes(batchv1.PodFailurePolicyActionIgnore, 1), onExitCodes(batchv1.PodFailurePolicyActionFailJob, 42)}}
	create(t, c, j)
	apiservertest.WaitIdle(t, srv)
	ps := pods(t, c)
	require.Len(t, ps, 1)
	msg := "Container app for pod default/" + ps[0].Name + " failed with exit code 42 matching FailJob rule at index 1"
	job := getJob(t, c, "strict")
	assert.Equal(t, []string{"FailureTarget True PodFailurePolicy: " + msg, "Failed True PodFailurePolicy: " + msg}, conditions(job))
	assert.Equal(t, int32(1), job.Status.Failed)
	assert.Equal(t, ptr.To(batchv1.Failed), job.Spec.PodReplacementPolicy, "defaulted with a podFailurePolicy")
	assert.Contains(t, events(t, c, "strict"), "Warning PodFailurePolicy "+msg)
}

// ignoreDisruptions is a podFailurePolicy that ignores the failures of
// disrupted pods (DisruptionTarget).
func ignoreDisruptions() *batchv1.PodFailurePolicy {
	return &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionIgnore,
		OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget}}}}}
}

// An Ignore rule (here on the DisruptionTarget condition) does not count
// the failure against backoffLimit: the pod is replaced (after the
// back-off) and the Job can still complete.
func TestPodFailurePolicyIgnoreDisruption(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Now())
	srv, c := start(t, clk)
	j := newJob("tolerant", 1, 1)
	j.Spec.BackoffLimit = ptr.To(int32(0))
	j.Spec.PodFailurePolicy = ignoreDisruptions()
	create(t, c, j)
	apiservertest.WaitIdle(t, srv)
	ps := pods(t, c)
	require.Len(t, ps, 1)
	p := ps[0]
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: "PreemptionByScheduler", LastTransitionTime: metav1.NewTime(clk.Now())})
	_, err := c.CoreV1().Pods("default").UpdateStatus(t.Context(), &p, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, srv.Kubelet().Fail(t.Context(), "default", p.Name, 137))
	apiservertest.WaitIdle(t, srv)
	job := getJob(t, c, "tolerant")
	assert.Zero(t, job.Status.Failed, "ignored")
	assert.Empty(t, job.Status.Conditions)

	exitAll(srv, 0)
	apiservertest.StepClock(t, srv, clk, 10*time.Second)
	require.Len(t, pods(t, c), 2)
	job = getJob(t, c, "tolerant")
	assert.Equal(t, int32(1), job.Status.Succeeded)
	assert.Zero(t, job.Status.Failed)
	assert.Contains(t, conditions(job), "Complete True CompletionsReached: Reached expected number of succeeded pods")
}

// A pod deleted before its container ran (its image cannot be pulled)
// ends Failed, as the kubelet's TerminatePod ends it, so a Job with a
// podFailurePolicy (which replaces failed pods only) counts it, releases
// its tracking finalizer and replaces it after the back-off; a pod left
// Pending would hold the Job for ever.
func TestPodDeletedBeforeItRanIsCountedFailed(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Now())
	srv, c := start(t, clk)
	srv.Kubelet().FailImagePulls("registry.example/missing:1", "")
	j := newJob("unpulled", 1, 1)
	j.Spec.Template.Spec.Containers[0].Image = "registry.example/missing:1"
	j.Spec.PodFailurePolicy = ignoreDisruptions()
	create(t, c, j)
	apiservertest.WaitIdle(t, srv)
	ps := pods(t, c)
	require.Len(t, ps, 1)
	first := ps[0].Name
	require.NoError(t, c.CoreV1().Pods("default").Delete(t.Context(), first, metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv)
	_, err := c.CoreV1().Pods("default").Get(t.Context(), first, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "its finalizer released: %v", err)
	assert.Equal(t, int32(1), getJob(t, c, "unpulled").Status.Failed)

	apiservertest.StepClock(t, srv, clk, 10*time.Second)
	ps = pods(t, c)
	require.Len(t, ps, 1, "replaced")
	assert.NotEqual(t, first, ps[0].Name)
}

// backoffLimitPerIndex fails an index, not the Job, at its limit; the Job
// fails with FailedIndexes once every index has ended.
func TestBackoffLimitPerIndex(t *testing.T) {
	t.Parallel()
	srv, c := start(t, nil)
	srv.Kubelet().AddRule(kubelet.Rule{OwnerKind: "Job", Exit: &kubelet.Exit{Code: 0}})
	srv.Kubelet().AddRule(kubelet.Rule{Selector: labels.SelectorFromSet(labels.Set{batchv1.JobCompletionIndexAnnotation: "0"}),
		Exit: &kubelet.Exit{Code: 3}})
	j := newJob("per-index", 2, 2)
	j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
	j.Spec.BackoffLimitPerIndex = ptr.To(int32(0))
	create(t, c, j)
	apiservertest.WaitIdle(t, srv)
	job := getJob(t, c, "per-index")
	assert.Equal(t, ptr.To(int32(2147483647)), job.Spec.BackoffLimit)
	assert.Equal(t, "1", job.Status.CompletedIndexes)
	assert.Equal(t, ptr.To("0"), job.Status.FailedIndexes)
	assert.Equal(t, int32(1), job.Status.Failed)
	assert.Equal(t, []string{"FailureTarget True FailedIndexes: Job has failed indexes", "Failed True FailedIndexes: Job has failed indexes"},
		conditions(job))
	ps := pods(t, c)
	require.Len(t, ps, 2)
	assert.Equal(t, "0", ps[0].Annotations[batchv1.JobIndexFailureCountAnnotation])
}

// A success policy met completes the Job early: SuccessCriteriaMet, the
// other pods deleted, then Complete.
func TestSuccessPolicy(t *testing.T) {
	t.Parallel()
	srv, c := start(t, nil)
	srv.Kubelet().AddRule(kubelet.Rule{Selector: labels.SelectorFromSet(labels.Set{batchv1.JobCompletionIndexAnnotation: "0"}),
		Exit: &kubelet.Exit{Code: 0}})
	j := newJob("leader", 3, 3)
	j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
	j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0")}}}
	create(t, c, j)
	apiservertest.WaitIdle(t, srv)
	job := getJob(t, c, "leader")
	assert.Equal(t, []string{"SuccessCriteriaMet True SuccessPolicy: Matched rules at index 0", "Complete True SuccessPolicy: Matched rules at index 0"},
		conditions(job))
	// The other workers are deleted: uncounted if still running when
	// the controller removes their finalizer, else counted by how they
	// ended (the simulated kubelet stops them with exit 0), as on
	// kube-controller-manager.
	assert.True(t, strings.HasPrefix(job.Status.CompletedIndexes, "0"), job.Status.CompletedIndexes)
	assert.GreaterOrEqual(t, job.Status.Succeeded, int32(1))
	assert.Zero(t, job.Status.Active)
	assert.Equal(t, ptr.To(int32(0)), job.Status.Terminating)
}

// podReplacementPolicy Failed waits for a deleted pod to end before
// replacing it, counting it terminating meanwhile (the simulated kubelet
// stops it with exit 143, as SIGTERM ends a process: it fails).
func TestPodReplacementPolicyFailed(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Now())
	srv, c := start(t, clk)
	srv.Kubelet().AddRule(kubelet.Rule{OwnerKind: "Job", StopAfter: time.Minute})
	j := newJob("patient", 1, 1)
	j.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To(int64(120))
	j.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
	create(t, c, j)
	apiservertest.WaitIdle(t, srv)
	ps := pods(t, c)
	require.Len(t, ps, 1)
	require.NoError(t, c.CoreV1().Pods("default").Delete(t.Context(), ps[0].Name, metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv)
	job := getJob(t, c, "patient")
	assert.Equal(t, ptr.To(int32(1)), job.Status.Terminating)
	assert.Zero(t, job.Status.Active)
	assert.Zero(t, job.Status.Failed)
	apiservertest.StepClock(t, srv, clk, 20*time.Second)
	assert.Len(t, pods(t, c), 1, "not replaced while terminating")

	apiservertest.StepClock(t, srv, clk, 40*time.Second)
	job = getJob(t, c, "patient")
	assert.Equal(t, ptr.To(int32(0)), job.Status.Terminating)
	assert.Equal(t, int32(1), job.Status.Failed, "ended by SIGTERM (exit 143)")
	apiservertest.StepClock(t, srv, clk, 20*time.Second) // the back-off
	job = getJob(t, c, "patient")
	assert.Equal(t, int32(1), job.Status.Active, "replaced once failed")
	assert.Len(t, pods(t, c), 1)
}

// podReplacementPolicy TerminatingOrFailed (the default) counts a deleted
// pod failed at once and replaces it after the back-off, while it still
// terminates.
func TestPodReplacementPolicyTerminatingOrFailed(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Now())
	srv, c := start(t, clk)
	srv.Kubelet().AddRule(kubelet.Rule{OwnerKind: "Job", StopAfter: time.Minute})
	j := newJob("eager", 1, 1)
	j.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To(int64(120))
	create(t, c, j)
	apiservertest.WaitIdle(t, srv)
	ps := pods(t, c)
	require.Len(t, ps, 1)
	require.NoError(t, c.CoreV1().Pods("default").Delete(t.Context(), ps[0].Name, metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv)
	job := getJob(t, c, "eager")
	assert.Equal(t, ptr.To(batchv1.TerminatingOrFailed), job.Spec.PodReplacementPolicy)
	assert.Equal(t, ptr.To(int32(1)), job.Status.Terminating)
	assert.Equal(t, int32(1), job.Status.Failed)
	// The back-off (10 s) counts from the pod's deletion, which the API
	// server times on the wall clock: seconds past the fake clock's start,
	// more under load. The clock moves a second at a time until the
	// replacement comes (at most a minute).
	for range 60 {
		if len(pods(t, c)) == 2 {
			break
		}
		apiservertest.StepClock(t, srv, clk, time.Second)
	}
	assert.Len(t, pods(t, c), 2, "replaced while the deleted pod terminates")
	job = getJob(t, c, "eager")
	assert.Equal(t, int32(1), job.Status.Active)
	assert.Equal(t, ptr.To(int32(1)), job.Status.Terminating)
}

// A Job managed by another controller is left alone.
func TestManagedByAnotherController(t *testing.T) {
	t.Parallel()
	srv, c := start(t, nil)
	j := newJob("theirs", 1, 1)
	j.Spec.ManagedBy = ptr.To("example.com/multikueue")
	create(t, c, j)
	apiservertest.WaitIdle(t, srv)
	assert.Empty(t, pods(t, c))
	assert.Equal(t, batchv1.JobStatus{}, getJob(t, c, "theirs").Status)
}

// A Job with manualSelector adopts a matching orphan (its owner reference
// and the tracking finalizer) and runs it instead of a new pod; deleted
// with its pods orphaned, they lose the finalizer.
func TestAdoptionAndOrphans(t *testing.T) {
	t.Parallel()
	srv, c := start(t, nil)
	_, err := c.CoreV1().Pods("default").Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stray", Labels: map[string]string{"app": "batch"}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	j := newJob("manual", 1, 1)
	j.Spec.ManualSelector = ptr.To(true)
	j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "batch"}}
	j.Spec.Template.Labels = map[string]string{"app": "batch"}
	job := create(t, c, j)
	apiservertest.WaitIdle(t, srv)
	ps := pods(t, c)
	require.Len(t, ps, 1)
	assert.Equal(t, "stray", ps[0].Name)
	assert.Equal(t, []string{batchv1.JobTrackingFinalizer}, ps[0].Finalizers)
	require.Len(t, ps[0].OwnerReferences, 1)
	assert.Equal(t, job.UID, ps[0].OwnerReferences[0].UID)
	assert.Equal(t, int32(1), getJob(t, c, "manual").Status.Active)

	require.NoError(t, c.BatchV1().Jobs("default").Delete(t.Context(), "manual", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}))
	apiservertest.WaitIdle(t, srv)
	ps = pods(t, c)
	require.Len(t, ps, 1)
	assert.Empty(t, ps[0].OwnerReferences)
	assert.Empty(t, ps[0].Finalizers, "an orphan loses the tracking finalizer")
}

// A Job whose podFailurePolicy is invalid is refused with kube-apiserver's
// validation errors.
func TestInvalidPodFailurePolicy(t *testing.T) {
	t.Parallel()
	_, c := start(t, nil)
	j := newJob("bad", 1, 1)
	j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		onExitCodes(batchv1.PodFailurePolicyActionFailJob, 0),
		onExitCodes(batchv1.PodFailurePolicyActionFailIndex, 2, 1)}}
	_, err := c.BatchV1().Jobs("default").Create(t.Context(), j, metav1.CreateOptions{})
	require.Error(t, err)
	assert.True(t, apierrors.IsInvalid(err), "%v", err)
	assert.Equal(t, `Job.batch "bad" is invalid: [spec.podFailurePolicy.rules[0].onExitCodes.values[0]: Invalid value: 0: must not be 0 for the In operator, `+
		`spec.podFailurePolicy.rules[1].action: Invalid value: "FailIndex": requires the backoffLimitPerIndex to be set, `+
		`spec.podFailurePolicy.rules[1].onExitCodes.values: Invalid value: [2,1]: must be ordered]`, err.Error())

	j = newJob("bad", 1, 1)
	j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{onExitCodes(batchv1.PodFailurePolicyActionIgnore, 1)}}
	_, err = c.BatchV1().Jobs("default").Create(t.Context(), j, metav1.CreateOptions{})
	require.Error(t, err)
	assert.Equal(t, `Job.batch "bad" is invalid: spec.template.spec.restartPolicy: Invalid value: "OnFailure": only "Never" is supported when podFailurePolicy is specified`, err.Error())
}

// maxFailedIndexes exceeded fails the Job at once; a FailIndex rule fails
// an index whatever its backoffLimitPerIndex.
func TestMaxFailedIndexesAndFailIndex(t *testing.T) {
	t.Parallel()
	srv, c := start(t, nil)
	srv.Kubelet().AddRule(kubelet.Rule{Selector: labels.SelectorFromSet(labels.Set{batchv1.JobCompletionIndexAnnotation: "1"}),
		Exit: &kubelet.Exit{Code: 5}})
	j := newJob("fragile", 3, 3)
	j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
	j.Spec.BackoffLimitPerIndex = ptr.To(int32(2))
	j.Spec.MaxFailedIndexes = ptr.To(int32(0))
	j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{onExitCodes(batchv1.PodFailurePolicyActionFailIndex, 5)}}
	create(t, c, j)
	apiservertest.WaitIdle(t, srv)
	job := getJob(t, c, "fragile")
	assert.Equal(t, []string{
		"FailureTarget True MaxFailedIndexesExceeded: Job has exceeded the specified maximal number of failed indexes",
		"Failed True MaxFailedIndexesExceeded: Job has exceeded the specified maximal number of failed indexes"}, conditions(job))
	assert.Equal(t, ptr.To("1"), job.Status.FailedIndexes)
	assert.Equal(t, int32(3), job.Status.Failed, "the failed pod and the two deleted")
	assert.Zero(t, job.Status.Active)
	assert.Contains(t, events(t, c, "fragile"), "Warning MaxFailedIndexesExceeded Job has exceeded the specified maximal number of failed indexes")
}

// restartPolicy OnFailure: the restarts of a running pod count against
// backoffLimit.
func TestRestartsCountAgainstBackoffLimit(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Now())
	srv, c := start(t, clk)
	exitAll(srv, 1)
	j := newJob("crashy", 1, 1)
	j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	j.Spec.BackoffLimit = ptr.To(int32(2))
	create(t, c, j)
	apiservertest.WaitIdle(t, srv)
	apiservertest.StepClock(t, srv, clk, time.Minute) // the kubelet's restart back-off: 10 s, 20 s
	job := getJob(t, c, "crashy")
	assert.Equal(t, []string{
		"FailureTarget True BackoffLimitExceeded: Job has reached the specified backoff limit",
		"Failed True BackoffLimitExceeded: Job has reached the specified backoff limit"}, conditions(job))
	assert.Equal(t, int32(1), job.Status.Failed, "the running pod, deleted, counts failed")
	assert.Empty(t, pods(t, c), "the running pod is deleted")
}

// Deleted in the background, a Job's pods are deleted and lose the
// tracking finalizer (the orphan queue), so they go.
func TestDeletedJobsPodsGo(t *testing.T) {
	t.Parallel()
	srv, c := start(t, nil)
	create(t, c, newJob("gone", 2, 2))
	apiservertest.WaitIdle(t, srv)
	require.Len(t, pods(t, c), 2)
	require.NoError(t, c.BatchV1().Jobs("default").Delete(t.Context(), "gone", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}))
	apiservertest.WaitIdle(t, srv)
	assert.Empty(t, pods(t, c))
}
