package kubelet

// The kubelet's active deadline handler (active_deadline.go of kubelet
// v1.37.2): a pod active on its node longer than its
// spec.activeDeadlineSeconds, counted from the startTime the kubelet gave
// it, fails with reason DeadlineExceeded: what still runs in it is
// stopped as when it is deleted (killPod, with its grace period), and its
// phase written Failed once all has stopped (holdPhase).

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

const (
	deadlineReason  = "DeadlineExceeded"
	deadlineMessage = "Pod was active on the node longer than the specified deadline"
	// The kubelet records its event for a pod past its deadline each time
	// it generates the pod's status: SyncPod and SyncTerminatingPod before
	// the kill, SyncTerminatingPod after it and SyncTerminatedPod; its
	// recorder counts them in one Event.
	deadlineEventsBeforeKill, deadlineEventsAfterKill = 2, 2
)

// deadline is when pod's active deadline passes on r; zero when it has
// none. The field may be lowered while the pod runs: it is read at each
// sync, as the kubelet does.
func (r *podRuntime) deadline(pod *corev1.Pod) time.Time {
	if pod.Spec.ActiveDeadlineSeconds == nil || r.startTime.IsZero() {
		return time.Time{}
	}
	return r.startTime.Add(time.Duration(*pod.Spec.ActiveDeadlineSeconds) * time.Second)
}

// checkDeadline marks r past its deadline when it is at now (once, and
// never for a pod that finished or was deleted before it: a deleted pod's
// containers stop as its deletion says) and returns the kubelet's events
// about it until the kill (end records the others once all has stopped).
func (r *podRuntime) checkDeadline(pod *corev1.Pod, now time.Time) []event {
	d := r.deadline(pod)
	if r.pastDeadline || d.IsZero() || now.Before(d) || terminal(pod) || r.over || !r.stopping.IsZero() {
		return nil
	}
	r.pastDeadline = true
	return deadlineExceeded(deadlineEventsBeforeKill)
}

// deadlineExceeded is the active deadline's event, n times.
func deadlineExceeded(n int) []event {
	out := make([]event, n)
	for i := range out {
		out[i] = event{corev1.EventTypeNormal, deadlineReason, deadlineMessage}
	}
	return out
}
