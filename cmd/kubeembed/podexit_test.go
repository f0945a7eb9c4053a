package main

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeembed/apiserver/controllers/kubelet"
)

func TestPodExitFlag(t *testing.T) {
	t.Parallel()
	r, err := parsePodExit("owner=Job, code=0, after=1s")
	require.NoError(t, err)
	assert.Equal(t, kubelet.Rule{OwnerKind: "Job", Exit: &kubelet.Exit{Code: 0, After: time.Second}}, r)
	r, err = parsePodExit("code=3,namespace=ci,container=app,selector=app in (a,b),tier!=web")
	require.NoError(t, err)
	assert.Equal(t, "ci", r.Namespace)
	assert.Equal(t, "app", r.Container)
	assert.Equal(t, int32(3), r.Exit.Code)
	assert.True(t, r.Selector.Matches(labels.Set{"app": "b"}))
	assert.False(t, r.Selector.Matches(labels.Set{"app": "b", "tier": "web"}), "the selector's commas are its own")
	r, err = parsePodExit(" code = 1 , selector = app=x ")
	require.NoError(t, err, "spaces around = and ,")
	assert.True(t, r.Selector.Matches(labels.Set{"app": "x"}))
	for in, want := range map[string]string{
		"owner=Job":                      `"owner=Job": code=N is required`,
		"code=256":                       "code=256: want an exit code, 0 to 255",
		"code=x":                         "code=x: want an exit code",
		"code=0,after=soon":              "after=soon: want a duration",
		"code=0,after=-1s":               "after=-1s: want a duration",
		"code=0,owner":                   `"owner": want key=value`,
		"code=0,pod=x":                   "pod=x: unknown key",
		"code=0,selector=(":              "selector=(:",
		"code=1,selector=app=x,after=1s": "selector=app=x,after=1s: holds after=, a field of --pod-exit: the selector must come last",
		"code=1,code=2":                  "code given twice",
		"code=1,owner=":                  "owner=: no value",
		"code=1,namespace= ":             "namespace=: no value",
		"code=1,owner=job":               "owner=job: want a kind, such as Job",
	} {
		_, err := parsePodExit(in)
		if assert.Error(t, err, in) {
			assert.Contains(t, err.Error(), want, in)
		}
	}
	err = run(context.Background(), []string{"--pod-exit", "code=x", "--kubeconfig", filepath.Join(t.TempDir(), "kc")}, io.Discard, io.Discard)
	assert.ErrorContains(t, err, `invalid value "code=x" for flag -pod-exit`)
	err = run(context.Background(), []string{"--profile", "envtest", "--pod-exit", "code=0", "--kubeconfig", filepath.Join(t.TempDir(), "kc")},
		io.Discard, io.Discard)
	assert.ErrorContains(t, err, "--pod-exit: the simulated kubelet does not run")
}

// --pod-exit decides how containers end for clients that cannot call the
// kubelet's Go API: a Job's pod succeeds and the Job completes (what helm's
// hooks and kubectl wait --for=condition=complete wait for), a selected
// pod fails with its code, and the first rule, which every pod of the
// namespace matches, decides only for the pods no later rule matches.
func TestCLIPodExit(t *testing.T) {
	t.Parallel()
	kc := filepath.Join(t.TempDir(), "kc")
	runUntilServing(t, "--kubeconfig", kc, "--pod-exit", "code=7,namespace=default",
		"--pod-exit", "owner=Job,code=0,after=100ms", "--pod-exit", "code=3,selector=fails=yes", "--fail-image-pull", "example.com/missing:v1")
	c, _ := clientsOf(t, kc)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "migrate"}, Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "m", Image: "busybox"}}}}}}
	_, err := c.BatchV1().Jobs("default").Create(t.Context(), job, metav1.CreateOptions{})
	require.NoError(t, err)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bad", Labels: map[string]string{"fails": "yes"}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}
	_, err = c.CoreV1().Pods("default").Create(t.Context(), pod, metav1.CreateOptions{})
	require.NoError(t, err)

	plain := pod.DeepCopy()
	plain.Name, plain.Labels = "plain", nil
	_, err = c.CoreV1().Pods("default").Create(t.Context(), plain, metav1.CreateOptions{})
	require.NoError(t, err)

	unpullable := plain.DeepCopy()
	unpullable.Name, unpullable.Spec.Containers[0].Image = "unpullable", "example.com/missing:v1"
	_, err = c.CoreV1().Pods("default").Create(t.Context(), unpullable, metav1.CreateOptions{})
	require.NoError(t, err)

	waitJobComplete(t, c, "default", "migrate")
	for name, code := range map[string]int32{"bad": 3, "plain": 7} {
		failed := waitPodPhase(t, c, "default", name, corev1.PodFailed)
		require.Len(t, failed.Status.ContainerStatuses, 1)
		require.NotNil(t, failed.Status.ContainerStatuses[0].State.Terminated)
		assert.Equal(t, code, failed.Status.ContainerStatuses[0].State.Terminated.ExitCode, name)
		assert.Equal(t, "Error", failed.Status.ContainerStatuses[0].State.Terminated.Reason, name)
	}
	waitPod(t, c, "default", "unpullable", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
			p.Status.ContainerStatuses[0].State.Waiting.Reason == "ErrImagePull"
	})
}

func waitJobComplete(t *testing.T, c kubernetes.Interface, namespace, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	w, err := c.BatchV1().Jobs(namespace).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	require.NoError(t, err)
	defer w.Stop()
	for ev := range w.ResultChan() {
		if j, ok := ev.Object.(*batchv1.Job); ok {
			for _, cond := range j.Status.Conditions {
				if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
					return
				}
			}
		}
	}
	t.Fatalf("job %s/%s did not complete: %v", namespace, name, ctx.Err())
}

func waitPodPhase(t *testing.T, c kubernetes.Interface, namespace, name string, phase corev1.PodPhase) *corev1.Pod {
	t.Helper()
	return waitPod(t, c, namespace, name, func(p *corev1.Pod) bool { return p.Status.Phase == phase })
}

func waitPod(t *testing.T, c kubernetes.Interface, namespace, name string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	w, err := c.CoreV1().Pods(namespace).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	require.NoError(t, err)
	defer w.Stop()
	for ev := range w.ResultChan() {
		if p, ok := ev.Object.(*corev1.Pod); ok && cond(p) {
			return p
		}
	}
	t.Fatalf("pod %s/%s: condition not met: %v", namespace, name, ctx.Err())
	return nil
}
