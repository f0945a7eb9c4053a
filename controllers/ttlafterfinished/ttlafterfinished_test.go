package ttlafterfinished_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// env is a server with the TTL-after-finished controller on a fake clock
// and the garbage collector (foreground deletion). No Job controller runs:
// the tests finish Jobs by writing their status.
type env struct {
	t   *testing.T
	srv *apiserver.Server
	c   kubernetes.Interface
	clk *clocktesting.FakeClock
}

func start(t *testing.T) *env {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Now())
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Clock: clk,
		Controllers: []controllers.Name{controllers.ServiceAccount, controllers.GarbageCollector, controllers.TTLAfterFinished}}))
	client, err := srv.Clientset()
	require.NoError(t, err)
	return &env{t: t, srv: srv, c: client, clk: clk}
}

// finishedJob creates a Job with ttl (nil: none) and writes its status as
// the Job controller finishes it, now on the fake clock.
func (e *env) finishedJob(name string, ttl *int32, complete bool) {
	e.t.Helper()
	job, err := e.c.BatchV1().Jobs("default").Create(e.t.Context(), &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{TTLSecondsAfterFinished: ttl, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}}}}}, metav1.CreateOptions{})
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
}

func (e *env) exists(name string) bool {
	e.t.Helper()
	_, err := e.c.BatchV1().Jobs("default").Get(e.t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(e.t, err)
	return true
}

func (e *env) step(d time.Duration) {
	e.t.Helper()
	e.clk.Step(d)
	apiservertest.WaitIdle(e.t, e.srv)
}

// A finished Job stays until its TTL has passed on the clock, then is
// deleted; one without a TTL stays; a failed one goes too.
func TestTTLAfterFinishedDeletesOnceExpired(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.finishedJob("done", ptr.To[int32](60), true)
	e.finishedJob("failed", ptr.To[int32](120), false)
	e.finishedJob("kept", nil, true)
	e.step(59 * time.Second)
	assert.True(t, e.exists("done"), "not expired yet")
	e.step(2 * time.Second)
	assert.False(t, e.exists("done"), "deleted once expired")
	assert.True(t, e.exists("failed"))
	e.step(time.Minute)
	assert.False(t, e.exists("failed"))
	e.step(time.Hour)
	assert.True(t, e.exists("kept"), "no TTL")
}

// A TTL of 0 deletes the Job as it finishes; a Job's pods go before it
// (foreground deletion).
func TestTTLAfterFinishedZeroDeletesInTheForeground(t *testing.T) {
	t.Parallel()
	e := start(t)
	_, err := e.c.CoreV1().Pods("default").Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"example.com/hold"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	e.finishedJob("now", ptr.To[int32](0), true)
	assert.False(t, e.exists("now"))

	// A Job whose pod holds on: foreground deletion waits for it.
	e.finishedJob("owner", nil, true)
	job, err := e.c.BatchV1().Jobs("default").Get(t.Context(), "owner", metav1.GetOptions{})
	require.NoError(t, err)
	pod, err := e.c.CoreV1().Pods("default").Get(t.Context(), "held", metav1.GetOptions{})
	require.NoError(t, err)
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "owner", UID: job.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	_, err = e.c.CoreV1().Pods("default").Update(t.Context(), pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	job.Spec.TTLSecondsAfterFinished = ptr.To[int32](0)
	_, err = e.c.BatchV1().Jobs("default").Update(t.Context(), job, metav1.UpdateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, e.srv)
	job, err = e.c.BatchV1().Jobs("default").Get(t.Context(), "owner", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotNil(t, job.DeletionTimestamp)
	assert.Equal(t, []string{metav1.FinalizerDeleteDependents}, job.Finalizers)
}

// A TTL lengthened after the Job finished: the Job waits for the new one.
func TestTTLAfterFinishedFollowsAChangedTTL(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.finishedJob("job", ptr.To[int32](60), true)
	job, err := e.c.BatchV1().Jobs("default").Get(t.Context(), "job", metav1.GetOptions{})
	require.NoError(t, err)
	job.Spec.TTLSecondsAfterFinished = ptr.To[int32](3600)
	_, err = e.c.BatchV1().Jobs("default").Update(t.Context(), job, metav1.UpdateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, e.srv)
	e.step(2 * time.Minute)
	assert.True(t, e.exists("job"))
	e.step(time.Hour)
	assert.False(t, e.exists("job"))
}
