package kubelet

// Liveness probes the test fails (SetLive): the kubelet's prober runs a
// container's liveness probe every periodSeconds once its
// initialDelaySeconds are over; failureThreshold failures in a row
// (Unhealthy events, "Liveness probe failed: ") make the kubelet kill the
// container ("Container app failed liveness probe, will be restarted"),
// which its restart policy restarts, with the crash back-off.

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// SetLive sets the container's liveness probe result from now on, for its
// running and later instances: failing, the probe fails at each of its
// periods (the first now, or when its initialDelaySeconds are over) and
// the container is killed at its failureThreshold-th failure, then
// restarted as its restart policy says (failing again: CrashLoopBackOff);
// live again, it passes. The container must have a liveness probe.
func (k *Kubelet) SetLive(ctx context.Context, namespace, pod, containerName string, live bool) error {
	return k.act(namespace, pod, func(r *podRuntime, now time.Time) error {
		for _, c := range r.all() {
			if c.spec.Name != containerName {
				continue
			}
			if c.spec.LivenessProbe == nil {
				return fmt.Errorf("set live: container %q of pod %s/%s has no liveness probe", containerName, namespace, pod)
			}
			c.failingLiveness = !live
			c.liveFailures, c.liveCheckAt = 0, time.Time{}
			if !live && c.instance.running() {
				c.liveCheckAt = latest(now, c.instance.started.Add(seconds(c.spec.LivenessProbe.InitialDelaySeconds)))
			}
			return nil
		}
		return fmt.Errorf("set live: no container %q in pod %s/%s", containerName, namespace, pod)
	})
}

// probeLiveness makes the container's liveness probe's next failure, if
// it is due, and kills the container at the failure threshold; it reports
// whether it changed anything.
func (c *container) probeLiveness(pod *corev1.Pod, now time.Time, plans planner) bool {
	if !c.failingLiveness || !c.instance.running() || c.liveCheckAt.IsZero() || now.Before(c.liveCheckAt) {
		return false
	}
	if !c.exitAt.IsZero() && !c.exitAt.After(c.liveCheckAt) {
		return false // it exits before the probe fails
	}
	p := c.spec.LivenessProbe
	c.liveFailures++
	c.events = append(c.events, event{corev1.EventTypeWarning, "Unhealthy", "Liveness probe failed: "})
	if c.liveFailures < max(p.FailureThreshold, 1) {
		c.liveCheckAt = c.liveCheckAt.Add(seconds(max(p.PeriodSeconds, 1)))
		return true
	}
	msg := fmt.Sprintf("Container %s failed liveness probe", c.spec.Name)
	restart := pod.Spec.RestartPolicy != corev1.RestartPolicyNever
	if p := c.spec.RestartPolicy; p != nil {
		restart = *p != corev1.ContainerRestartPolicyNever
	}
	if restart {
		msg += ", will be restarted"
	}
	c.events = append(c.events, event{corev1.EventTypeNormal, "Killing", msg})
	_, code := plans.stopPlan(pod)
	c.exit(c.liveCheckAt, Exit{Code: code})
	c.liveFailures, c.liveCheckAt = 0, time.Time{}
	return true
}

// startLiveness starts the failing liveness probe of an instance that
// starts now.
func (c *container) startLiveness(now time.Time) {
	c.liveFailures, c.liveCheckAt = 0, time.Time{}
	if c.failingLiveness && c.spec.LivenessProbe != nil {
		c.liveCheckAt = now.Add(seconds(c.spec.LivenessProbe.InitialDelaySeconds))
	}
}

func seconds(s int32) time.Duration { return time.Duration(s) * time.Second }

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
