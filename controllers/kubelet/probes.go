package kubelet

// Liveness and startup probes the test fails (SetLive, SetStarted): the
// kubelet's prober runs a container's probe every periodSeconds once its
// initialDelaySeconds are over (liveness only once the startup probe
// passed); failureThreshold failures in a row (Unhealthy events,
// "Liveness probe failed: ") make the kubelet kill the container
// ("Container app failed liveness probe, will be restarted"), which its
// restart policy restarts, with the crash back-off.

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// failingProbe is a probe the test fails: failures in a row so far, the
// next at checkAt (zero: none due, the instance does not run it).
type failingProbe struct {
	on       bool
	failures int32
	checkAt  time.Time
}

// probeKind names a probe as the kubelet's messages do.
type probeKind string

const (
	liveness probeKind = "Liveness"
	startup  probeKind = "Startup"
)

// word is the kind as a message's word: liveness, startup.
func (k probeKind) word() string { return strings.ToLower(string(k)) }

// SetLive sets the container's liveness probe result from now on, for its
// running and later instances: failing, the probe fails at each of its
// periods (the first now, or when its initialDelaySeconds are over and the
// container started; failing again restarts the count) and
// the container is killed at its failureThreshold-th failure, then
// restarted as its restart policy says (failing again: CrashLoopBackOff);
// live again, it passes. The container must have a liveness probe.
func (k *Kubelet) SetLive(ctx context.Context, namespace, pod, containerName string, live bool) error {
	return k.setProbe(namespace, pod, containerName, liveness, live)
}

// SetStarted sets the container's startup probe result from now on, for
// an instance that has not passed it yet and later ones: failing, the
// container is not started (nor ready), its probe fails at each period
// once its initialDelaySeconds are over, and it is killed at the
// failureThreshold-th failure, then restarted as its restart policy says;
// passing again, it is started now. The container must have a startup
// probe.
func (k *Kubelet) SetStarted(ctx context.Context, namespace, pod, containerName string, started bool) error {
	return k.setProbe(namespace, pod, containerName, startup, started)
}

func (k *Kubelet) setProbe(namespace, pod, containerName string, kind probeKind, pass bool) error {
	return k.act(namespace, pod, func(r *podRuntime, now time.Time) error {
		for _, c := range r.all() {
			if c.spec.Name != containerName {
				continue
			}
			spec, p := c.probe(kind)
			if spec == nil {
				return fmt.Errorf("set %s: container %q of pod %s/%s has no %s probe", kind.word(), containerName, namespace, pod, kind.word())
			}
			if kind == startup && c.started(now) {
				p.on = !pass // the running instance passed it: later ones fail
				return nil
			}
			*p = failingProbe{on: !pass}
			if kind == startup && pass && c.instance.running() {
				c.startupAt = now
			}
			if !pass && c.instance.running() {
				p.checkAt = latest(now, c.instance.started.Add(seconds(spec.InitialDelaySeconds)))
				if kind == startup {
					c.startupAt = time.Time{} // not started until it passes
				}
			}
			return nil
		}
		return fmt.Errorf("set %s: no container %q in pod %s/%s", kind.word(), containerName, namespace, pod)
	})
}

// probe is the container's probe of kind and its test-set failure.
func (c *container) probe(kind probeKind) (*corev1.Probe, *failingProbe) {
	if kind == startup {
		return c.spec.StartupProbe, &c.failingStartup
	}
	return c.spec.LivenessProbe, &c.failingLive
}

// probeFailures makes the container's failing probes' next failure, if it
// is due, and kills the container at the failure threshold; it reports
// whether it changed anything.
func (c *container) probeFailures(pod *corev1.Pod, now time.Time, plans planner) bool {
	if !c.instance.running() {
		return false
	}
	if !c.started(now) {
		return c.probeFailure(pod, now, plans, startup)
	}
	return c.probeFailure(pod, now, plans, liveness)
}

func (c *container) probeFailure(pod *corev1.Pod, now time.Time, plans planner, kind probeKind) bool {
	spec, p := c.probe(kind)
	if kind == liveness && !p.checkAt.IsZero() {
		p.checkAt = latest(p.checkAt, c.startupAt) // probed once started (worker.go)
	}
	if !p.on || spec == nil || p.checkAt.IsZero() || now.Before(p.checkAt) {
		return false
	}
	if !c.exitAt.IsZero() && !c.exitAt.After(p.checkAt) {
		return false // it exits before the probe fails
	}
	p.failures++
	c.record(event{corev1.EventTypeWarning, "Unhealthy", string(kind) + " probe failed: "})
	if p.failures < max(spec.FailureThreshold, 1) {
		p.checkAt = p.checkAt.Add(seconds(max(spec.PeriodSeconds, 1)))
		return true
	}
	msg := fmt.Sprintf("Container %s failed %s probe", c.spec.Name, kind.word())
	restart := pod.Spec.RestartPolicy != corev1.RestartPolicyNever
	if rp := c.spec.RestartPolicy; rp != nil {
		restart = *rp != corev1.ContainerRestartPolicyNever
	}
	switch {
	case c.sidecar: // computeInitContainerActions' wording
		msg = fmt.Sprintf("Init container %s failed %s probe", c.spec.Name, kind.word())
	case restart:
		msg += ", will be restarted"
	}
	c.record(event{corev1.EventTypeNormal, "Killing", msg})
	_, code := plans.stopPlan(pod)
	c.exit(p.checkAt, Exit{Code: code})
	c.probeKilled = true
	p.failures, p.checkAt = 0, time.Time{}
	return true
}

// startProbes starts the failing probes of an instance started at
// started, which the kubelet sees running at seen (after its postStart
// hook): their delays count from its start, their checks begin once seen.
// A failing startup probe holds it not started.
func (c *container) startProbes(started, seen time.Time) {
	for _, kind := range []probeKind{liveness, startup} {
		spec, p := c.probe(kind)
		p.failures, p.checkAt = 0, time.Time{}
		if p.on && spec != nil {
			p.checkAt = later(seen, started.Add(seconds(spec.InitialDelaySeconds)))
		}
	}
	if c.failingStartup.on && c.spec.StartupProbe != nil {
		c.startupAt = time.Time{} // not started until it passes (SetStarted)
	}
}

// nextProbe is when the container's next probe failure is due, or zero.
func (c *container) nextProbe(now time.Time) time.Time {
	if !c.instance.running() {
		return time.Time{}
	}
	if !c.started(now) {
		return c.failingStartup.checkAt
	}
	if c.failingLive.checkAt.IsZero() {
		return time.Time{}
	}
	return latest(c.failingLive.checkAt, c.startupAt)
}

func seconds[T int32 | int64](s T) time.Duration { return time.Duration(s) * time.Second }

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
