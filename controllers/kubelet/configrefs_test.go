package kubelet_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// A pod whose ConfigMap volume is missing stays Pending, its container
// ContainerCreating, with the volume manager's FailedMount events, until
// the ConfigMap exists and the volume manager tries again; an optional one
// does not hold it.
func TestMissingConfigMapVolumeHoldsThePod(t *testing.T) {
	t.Parallel()
	e := start(t)
	pod := simplePod("mounts")
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
		{Name: "maybe", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "absent", Optional: ptr.To(true)}}},
	}
	p := e.createPod(t, pod)
	ev := e.events(t, "default", "mounts", "FailedMount")
	assert.Equal(t, `MountVolume.SetUp failed for volume "cfg" : configmap "settings" not found`, ev[0].Message)
	assert.Equal(t, corev1.EventTypeWarning, ev[0].Type)
	apiservertest.WaitIdle(t, e.srv)
	p, err := e.client.CoreV1().Pods("default").Get(t.Context(), "mounts", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.PodPending, p.Status.Phase)
	assert.Equal(t, "ContainerCreating", status(p, "app").State.Waiting.Reason)
	assert.Empty(t, p.Status.PodIP, "no sandbox yet")

	_, err = e.client.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, e.srv)
	e.clock.Step(time.Second) // the volume manager's next try
	e.waitPod(t, p, ready)

	withItem := simplePod("items")
	withItem.Spec.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Items: []corev1.KeyToPath{{Key: "app.yaml", Path: "app.yaml"}}}}}}
	e.createPod(t, withItem)
	ev = e.events(t, "default", "items", "FailedMount")
	assert.Equal(t, `MountVolume.SetUp failed for volume "cfg" : configmap references non-existent config key: app.yaml`, ev[0].Message)
}

// A container whose environment names a missing Secret or key waits with
// CreateContainerConfigError and the kubelet's Failed event, and is
// created once the pod worker tries again after the Secret has the key.
func TestMissingEnvSecretHoldsTheContainer(t *testing.T) {
	t.Parallel()
	e := start(t)
	pod := simplePod("envs", "app", "side")
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "password"}}}}
	pod.Spec.Containers[1].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "none"}, Optional: ptr.To(true)}}}
	pod.Spec.Containers[1].Env = []corev1.EnvVar{{Name: "MAYBE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "none"}, Key: "k", Optional: ptr.To(true)}}}}
	waitingFor := func(msg string) func(*corev1.Pod) bool {
		return func(p *corev1.Pod) bool {
			w := status(p, "app").State.Waiting
			return w != nil && w.Reason == "CreateContainerConfigError" && w.Message == msg
		}
	}
	p := e.waitPod(t, e.createPod(t, pod), waitingFor(`secret "creds" not found`))
	assert.NotNil(t, status(p, "side").State.Running, "the other container runs")
	assert.Equal(t, corev1.PodPending, p.Status.Phase)
	ev := e.eventsOf(t, "default", "envs", "spec.containers{app}", "Failed", "Pulled")
	for _, x := range ev {
		if x.Reason == "Failed" {
			assert.Equal(t, `Error: secret "creds" not found`, x.Message)
		}
	}

	_, err := e.client.CoreV1().Secrets("default").Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		Data: map[string][]byte{"user": []byte("u")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, e.srv) // the kubelet has seen it
	e.clock.Step(10 * time.Second)
	p = e.waitPod(t, p, waitingFor(`couldn't find key password in Secret default/creds`))

	_, err = e.client.CoreV1().Secrets("default").Update(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		Data: map[string][]byte{"password": []byte("p")}}, metav1.UpdateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, e.srv)
	got, err := e.client.CoreV1().Pods("default").Get(t.Context(), "envs", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, status(got, "app").State.Running, "not before the pod worker's back-off")
	e.clock.Step(10 * time.Second)
	e.waitPod(t, p, ready)
}

// A ConfigMap or Secret created just before the pod that names it is
// found, though the kubelet's cache may not have it yet.
func TestConfigCreatedJustBeforeThePod(t *testing.T) {
	t.Parallel()
	e := start(t)
	for i := range 20 {
		name := fmt.Sprintf("fresh-%d", i)
		_, err := e.client.CoreV1().Secrets("default").Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name},
			Data: map[string][]byte{"k": []byte("v")}}, metav1.CreateOptions{})
		require.NoError(t, err)
		pod := simplePod(name)
		pod.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: name}}}}
		pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "K", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "k"}}}}
		e.waitPod(t, e.createPod(t, pod), ready)
	}
}
