package kubelet

// Images a node cannot pull: the simulated node has every image, but those
// a test makes fail (FailImagePulls), which containers then wait for as the
// kubelet's image manager (kubelet v1.37.2) reports them: ErrImagePull on a
// failed pull, ImagePullBackOff while its back-off (10 s doubling to 5 min)
// holds, ErrImageNeverPull for policy Never.

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

const (
	imageBackOffInitial = 10 * time.Second
	imageBackOffMax     = 300 * time.Second
)

// FailImagePulls makes the simulated nodes fail to pull image from now on
// (as containers name it, or named otherwise: nginx is
// docker.io/library/nginx:latest), with message as the container runtime's
// error ("" for containerd's not found), until remove is called. A
// container of it that is to be created waits: ErrImagePull with the
// runtime's error (Pulling, then Failed events), ImagePullBackOff while the
// kubelet's back-off holds, ErrImageNeverPull if its pull policy is Never;
// it is tried again every 10 s, the pod worker's back-off. Containers
// already running are not affected.
func (k *Kubelet) FailImagePulls(image, message string) (remove func()) {
	name, _ := normalizeImage(image)
	if message == "" {
		message = fmt.Sprintf("rpc error: code = NotFound desc = failed to pull and unpack image %q: failed to resolve reference %q: %s: not found", name, name, name)
	}
	k.outcomes.mu.Lock()
	if k.outcomes.failPulls == nil {
		k.outcomes.failPulls = map[string]string{}
	}
	k.outcomes.failPulls[name] = message
	k.outcomes.mu.Unlock()
	return func() {
		k.outcomes.mu.Lock()
		delete(k.outcomes.failPulls, name)
		k.outcomes.mu.Unlock()
	}
}

// pullFailure is the runtime's error for a pull of image, if it fails.
func (o *outcomes) pullFailure(image string) (string, bool) {
	name, _ := normalizeImage(image)
	o.mu.Lock()
	defer o.mu.Unlock()
	msg, ok := o.failPulls[name]
	return msg, ok
}

// pull is the image manager's EnsureImageExists for the container's image
// when the node cannot have it: the container's waiting state and the
// events, or nil (planner).
func (p plans) pull(c *container, now time.Time) (*corev1.ContainerStateWaiting, []event) {
	msg, failing := p.pullFailure(c.spec.Image)
	if !failing {
		return nil, nil
	}
	image := c.spec.Image
	if c.spec.ImagePullPolicy == corev1.PullNever {
		m := fmt.Sprintf("Container image %q is not present with pull policy of Never", image)
		return &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: m},
			[]event{{corev1.EventTypeWarning, "ErrImageNeverPull", m}, {corev1.EventTypeWarning, "Failed", "Error: ErrImageNeverPull"}}
	}
	if c.pullBackOff > 0 && now.Sub(c.pullUpdate) < c.pullBackOff {
		m := fmt.Sprintf("Back-off pulling image %q", image)
		return &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: m + ": ErrImagePull: " + c.pullErr},
			[]event{{corev1.EventTypeNormal, "BackOff", m}, {corev1.EventTypeWarning, "Failed", "Error: ImagePullBackOff"}}
	}
	if c.pullBackOff == 0 || now.Sub(c.pullUpdate) > 2*imageBackOffMax {
		c.pullBackOff = imageBackOffInitial
	} else {
		c.pullBackOff = min(2*c.pullBackOff, imageBackOffMax)
	}
	c.pullUpdate, c.pullErr = now, msg
	return &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: msg}, []event{
		{corev1.EventTypeNormal, "Pulling", fmt.Sprintf("Pulling image %q", image)},
		{corev1.EventTypeWarning, "Failed", fmt.Sprintf("Failed to pull image %q: %s", image, msg)},
		{corev1.EventTypeWarning, "Failed", "Error: ErrImagePull"},
	}
}
