package kubelet_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// An image the test makes unpullable holds its container as the kubelet's
// image manager holds it: ErrImagePull with the runtime's error (Pulling,
// then Failed events), tried again every 10 s, ImagePullBackOff while the
// back-off holds; it starts once the image can be pulled and the back-off
// lets the kubelet try; with pull policy Never, ErrImageNeverPull.
func TestImagePullFailures(t *testing.T) {
	t.Parallel()
	e := start(t)
	remove := e.k.FailImagePulls("registry.example.com/app:v2", "")
	waiting := func(reason string) func(*corev1.Pod) bool {
		return func(p *corev1.Pod) bool {
			w := status(p, "app").State.Waiting
			return w != nil && w.Reason == reason
		}
	}
	pod := simplePod("pulls")
	pod.Spec.Containers[0].Image = "registry.example.com/app:v2"
	p := e.waitPod(t, e.createPod(t, pod), waiting("ErrImagePull"))
	notFound := `rpc error: code = NotFound desc = failed to pull and unpack image "registry.example.com/app:v2": ` +
		`failed to resolve reference "registry.example.com/app:v2": registry.example.com/app:v2: not found`
	assert.Equal(t, notFound, status(p, "app").State.Waiting.Message)
	assert.Equal(t, corev1.PodPending, p.Status.Phase)
	apiservertest.WaitIdle(t, e.srv) // the three events are written
	events := e.eventsOf(t, "default", "pulls", "spec.containers{app}", "Pulling", "Failed")
	var messages []string
	for _, ev := range events {
		messages = append(messages, ev.Message)
	}
	assert.ElementsMatch(t, []string{`Pulling image "registry.example.com/app:v2"`,
		`Failed to pull image "registry.example.com/app:v2": ` + notFound, "Error: ErrImagePull"}, messages)

	e.clock.Step(time.Second) // the relist that sees the sandbox syncs the pod: in the back-off (10 s)
	p = e.waitPod(t, p, waiting("ImagePullBackOff"))
	assert.Equal(t, `Back-off pulling image "registry.example.com/app:v2": ErrImagePull: `+notFound, status(p, "app").State.Waiting.Message)
	e.events(t, "default", "pulls", "BackOff")

	e.clock.Step(10 * time.Second) // the pod worker's retry (10 s), the back-off over: pulled and failed again
	p = e.waitPod(t, p, waiting("ErrImagePull"))
	e.clock.Step(10 * time.Second) // in the back-off (20 s)
	p = e.waitPod(t, p, waiting("ImagePullBackOff"))

	remove()
	e.clock.Step(10 * time.Second) // 20 s after the last pull: it pulls
	e.waitPod(t, p, ready)

	e.k.FailImagePulls("busybox", "")
	never := simplePod("never")
	never.Spec.Containers[0].Image = "docker.io/library/busybox:latest"
	never.Spec.Containers[0].ImagePullPolicy = corev1.PullNever
	n := e.waitPod(t, e.createPod(t, never), waiting("ErrImageNeverPull"))
	assert.Equal(t, `Container image "docker.io/library/busybox:latest" is not present with pull policy of Never`, status(n, "app").State.Waiting.Message)
}
