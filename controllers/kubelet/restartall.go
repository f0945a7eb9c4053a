package kubelet

// A pod restarted in place (RestartAllContainersOnContainerExits, beta and
// on in v1.37): a container that exits with a code its
// restartPolicyRules give the action RestartAllContainers makes the
// kubelet kill and remove every init and regular container of the pod
// (not its ephemeral ones), its sandbox and address kept, and run the pod
// again from its first init container, at once (no back-off: the runtime
// has no exited container left to back off from). Read from kubelet
// v1.37.2: ShouldAllContainersRestart, computePodActions'
// ContainersToReset, SyncPod's removal, GenerateAllContainersRestarting
// Condition and convertToAPIContainerStatuses' RestartingAllContainers.
//
// Three statuses tell it: the one that sees the exit (the container
// terminated, AllContainersRestarting True); the one after the removal
// (the containers that were running or terminated waiting with reason
// RestartingAllContainers, a last state of exit code 137 with it, their
// restart count one more; the condition False again); then the pod as
// its containers start again, Pending while its regular init containers
// run.

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

const (
	restartingAll     = "RestartingAllContainers"
	restartingAllNote = "The container is removed because RestartAllContainers in place"
)

// matchingRule is the first of the container's restartPolicyRules whose
// exit codes match code (FindMatchingContainerRestartRule).
func matchingRule(spec *corev1.Container, code int32) (corev1.ContainerRestartRule, bool) {
	for _, rule := range spec.RestartPolicyRules {
		if rule.ExitCodes == nil {
			continue
		}
		in := slices.Contains(rule.ExitCodes.Values, code)
		if in && rule.ExitCodes.Operator == corev1.ContainerRestartRuleOnExitCodesOpIn ||
			!in && rule.ExitCodes.Operator == corev1.ContainerRestartRuleOnExitCodesOpNotIn {
			return rule, true
		}
	}
	return corev1.ContainerRestartRule{}, false
}

// restartsAll: the container's exit with code restarts the whole pod.
func restartsAll(spec *corev1.Container, code int32) bool {
	rule, ok := matchingRule(spec, code)
	return ok && rule.Action == corev1.ContainerRestartRuleActionRestartAllContainers
}

// mayRestartAll: a container of the pod has a RestartAllContainers rule
// (AllContainersCouldRestart): its status has the condition.
func mayRestartAll(spec *corev1.PodSpec) bool {
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		if slices.ContainsFunc(c.RestartPolicyRules, func(r corev1.ContainerRestartRule) bool {
			return r.Action == corev1.ContainerRestartRuleActionRestartAllContainers
		}) {
			return true
		}
	}
	return false
}

// restartAllDue: an init or regular container's last instance exited with
// a code that restarts the pod. An instance a probe killed, to be
// restarted at once, is not seen exited: the kubelet restarts it in the
// sync that kills it (one that must wait out a back-off is seen exited in
// the next).
func (r *podRuntime) restartAllDue() bool {
	for _, c := range slices.Concat(r.init, r.main) {
		if c.instance.terminated() && !c.restartsAtOnce() && restartsAll(c.spec, c.instance.exitCode) {
			return true
		}
	}
	return false
}

// resetHolds: the pod restarts in place, and until its containers are
// removed and shown so, its sync does nothing else (computePodActions
// returns the reset alone): nothing starts, exits, fails a probe or is
// resized, for up to a relist when the restart waits for one (resetDue).
func (r *podRuntime) resetHolds() bool { return r.restartingAll || r.restartAllDue() }

// restartsAtOnce: a probe killed the instance, and it restarts with no
// back-off (restartAfterKill).
func (c *container) restartsAtOnce() bool {
	return c.probeKilled || !c.restartAt.IsZero() && !c.restartAt.After(c.instance.finished)
}

// removed: no init or regular container of the pod is in the runtime
// (AllContainersRestartCleanedUp).
func (r *podRuntime) removed() bool {
	return !slices.ContainsFunc(slices.Concat(r.init, r.main), func(c *container) bool { return !c.instance.started.IsZero() })
}

// restartingCondition is the pod's AllContainersRestarting condition, if
// it has one: True from the status that sees the exit until the one that
// sees the containers removed.
func restartingCondition(pod *corev1.Pod, r *podRuntime, phase corev1.PodPhase) (corev1.PodCondition, bool) {
	if !mayRestartAll(&pod.Spec) {
		return corev1.PodCondition{}, false
	}
	c := corev1.PodCondition{Type: corev1.AllContainersRestarting, Status: corev1.ConditionFalse}
	switch {
	case phase == corev1.PodSucceeded:
		c.Reason = "PodCompleted"
	case phase == corev1.PodFailed:
		c.Reason = "PodFailed"
	case !r.resetHolds() || r.removed():
	default:
		c.Status, c.Reason, c.Message = corev1.ConditionTrue, "RestartAllContainersStarted", "container exited with restart policy rule"
	}
	return c, true
}

// resetDue: the status just computed says AllContainersRestarting and the
// pod's sync goes on to remove its containers (not a pod being stopped or
// over, nor one whose sync a postStart hook holds). An exit is seen a
// relist (1 s) after the last restart in place at the soonest: the
// kubelet learns of its containers' exits from the runtime's relist, so a
// pod whose containers end as they start restarts once a second, not in
// a loop at one instant of the clock.
func (r *podRuntime) resetDue(now time.Time, phase corev1.PodPhase) bool {
	return r.sandbox && r.stopping.IsZero() && !r.killing && !r.over && !r.pastDeadline && !phaseOver(phase) &&
		!r.postStarting(now) && r.restartAllDue() && !now.Before(r.nextReset())
}

// nextReset is the soonest the pod may restart in place again.
func (r *podRuntime) nextReset() time.Time {
	if r.resetAt.IsZero() {
		return r.resetAt
	}
	return r.resetAt.Add(plegRelist)
}

// resetAll kills the running init and regular containers at once (a grace
// period of 0: no preStop hook; Killing "killing", the regular ones first)
// and removes every instance of them, after status, which shows what they
// were: the next status shows them removed, and the sync after it starts
// the pod again (its ephemeral containers run on).
func (r *podRuntime) resetAll(status corev1.PodStatus, now time.Time) {
	shown := map[string]corev1.ContainerStatus{}
	for _, s := range slices.Concat(status.InitContainerStatuses, status.ContainerStatuses) {
		shown[s.Name] = s
	}
	for _, c := range slices.Concat(r.main, r.init) {
		if c.instance.running() {
			c.record(event{corev1.EventTypeNormal, "Killing", "killing"})
		}
	}
	for _, c := range slices.Concat(r.init, r.main) {
		c.remove(shown[c.spec.Name])
	}
	r.restartingAll, r.resetAt = true, now
}

// remove takes the container's instances out of the runtime; shown is
// its status before. One that was running or terminated shows as removed
// (RestartingAllContainers) in the next status, counted as a restart;
// one that waited to restart (a back-off, a failed postStart hook) keeps
// its last state and why it waits, as the kubelet's reason cache does,
// and counts the restart when it starts.
func (c *container) remove(shown corev1.ContainerStatus) {
	switch {
	case shown.State.Waiting == nil:
		s := removedStatus(shown, c.spec)
		c.shownRemoved, c.restarts = &s, s.RestartCount
		c.last = &run{exitCode: sigkillExitCode, reason: restartingAll, message: restartingAllNote}
	case !c.instance.started.IsZero():
		previous := c.instance
		c.last, c.recount = &previous, true
		if w := shown.State.Waiting; w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			c.waiting = w.DeepCopy()
		}
	}
	c.instance = run{}
	c.exitAt, c.exitAs, c.exitUnseen, c.probeKilled = time.Time{}, Exit{}, false, false
	c.restartAt, c.hookError, c.waitedBackOff = time.Time{}, "", false
	c.readyAt, c.startupAt = time.Time{}, time.Time{}
}

// removedStatus is the status of a container just removed, shown as its
// status was before: a terminated one's as it was (its IDs, image,
// resources, and a completed init container's readiness, which the prober
// leaves), a running one's as a container not in the runtime (its name,
// image and mounts; not ready); waiting RestartingAllContainers, its last
// state exit code 137, its restart count one more, not started
// (convertToAPIContainerStatuses, the prober's UpdatePodStatus).
func removedStatus(shown corev1.ContainerStatus, spec *corev1.Container) corev1.ContainerStatus {
	s := *shown.DeepCopy()
	if shown.State.Terminated == nil {
		s = corev1.ContainerStatus{Name: spec.Name, Image: spec.Image, VolumeMounts: mounts(spec), RestartCount: shown.RestartCount}
	}
	s.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: restartingAll, Message: restartingAllNote}}
	s.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: sigkillExitCode, Reason: restartingAll, Message: restartingAllNote}}
	s.RestartCount++
	s.Started = new(bool)
	return s
}

// restartedAll ends a restart in place once a status has shown the
// containers removed: the pod's next sync starts them.
func (r *podRuntime) restartedAll() {
	r.restartingAll = false
	for _, c := range r.all() {
		c.shownRemoved = nil
	}
}
