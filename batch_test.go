package apiserver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

func jobTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{{Name: "work", Image: "busybox:1.36", Command: []string{"true"}}},
	}}
}

func TestJobsAndCronJobs(t *testing.T) {
	t.Parallel()
	// The API's defaults and validation: the Job controller does not
	// write the Job meanwhile.
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Controllers: withoutWorkloads}))
	b := clientset(t, srv).BatchV1()
	ctx := t.Context()

	job, err := b.Jobs("default").Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "once"}, Spec: batchv1.JobSpec{Template: jobTemplate()},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	uid := string(job.UID)
	assert.EqualValues(t, 1, *job.Spec.Completions)
	assert.EqualValues(t, 1, *job.Spec.Parallelism)
	assert.EqualValues(t, 6, *job.Spec.BackoffLimit)
	assert.Equal(t, batchv1.NonIndexedCompletion, *job.Spec.CompletionMode)
	assert.False(t, *job.Spec.Suspend)
	assert.Equal(t, batchv1.TerminatingOrFailed, *job.Spec.PodReplacementPolicy)
	assert.Equal(t, &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: uid}}, job.Spec.Selector)
	assert.Equal(t, map[string]string{
		"controller-uid": uid, batchv1.ControllerUidLabel: uid, "job-name": "once", batchv1.JobNameLabel: "once",
	}, job.Spec.Template.Labels)
	assert.Equal(t, corev1.PullIfNotPresent, job.Spec.Template.Spec.Containers[0].ImagePullPolicy)

	job.Spec.Template.Spec.Containers[0].Image = "busybox:1.37"
	_, err = b.Jobs("default").Update(ctx, job, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "the template of a running job is immutable: %v", err)
	assert.Contains(t, err.Error(), `spec.template: Invalid value: {"labels":{`, "the internal type's JSON, as kube-apiserver's")
	assert.Contains(t, err.Error(), `"Spec":{"Volumes":null,"InitContainers":null,"Containers":[{"Name":"work","Image":"busybox:1.37"`)

	always := jobTemplate()
	always.Spec.RestartPolicy = corev1.RestartPolicyAlways
	_, err = b.Jobs("default").Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: batchv1.JobSpec{Template: always}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	assert.Contains(t, err.Error(), "spec.template.spec.restartPolicy")

	cj, err := b.CronJobs("default").Create(ctx, &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly"},
		Spec: batchv1.CronJobSpec{Schedule: "0 3 * * mon-fri",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: jobTemplate()}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, batchv1.AllowConcurrent, cj.Spec.ConcurrencyPolicy)
	assert.EqualValues(t, 3, *cj.Spec.SuccessfulJobsHistoryLimit)
	assert.EqualValues(t, 1, *cj.Spec.FailedJobsHistoryLimit)
	// As kube-apiserver 1.37.2 (measured by parity/): the job spec inside a
	// CronJob is defaulted when each Job is created, not here.
	assert.Nil(t, cj.Spec.JobTemplate.Spec.BackoffLimit)
	assert.Nil(t, cj.Spec.JobTemplate.Spec.Selector, "selectors are generated per Job")

	for _, schedule := range []string{"61 * * * *", "* * *", "@sometimes"} {
		_, err = b.CronJobs("default").Create(ctx, &batchv1.CronJob{
			ObjectMeta: metav1.ObjectMeta{Name: "bad-schedule"},
			Spec: batchv1.CronJobSpec{Schedule: schedule,
				JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: jobTemplate()}}},
		}, metav1.CreateOptions{})
		require.True(t, apierrors.IsInvalid(err), "schedule %q: %v", schedule, err)
		assert.Contains(t, err.Error(), "spec.schedule", schedule)
	}
}
