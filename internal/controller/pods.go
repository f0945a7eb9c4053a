package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// PodReadyCondition is the pod's Ready condition (the first, should it
// have two), nil when it has none.
func PodReadyCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// PodReady reports whether the pod's Ready condition is True (upstream's
// podutil.IsPodReady).
func PodReady(p *corev1.Pod) bool {
	c := PodReadyCondition(p)
	return c != nil && c.Status == corev1.ConditionTrue
}

// PodReadySince is when the pod's Ready condition last changed, zero when
// it has none (or no time).
func PodReadySince(p *corev1.Pod) time.Time {
	if c := PodReadyCondition(p); c != nil {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

// PodAvailable reports whether the pod has been ready for minReady seconds
// at now (upstream's podutil.IsPodAvailable): a ready pod whose condition
// has no time is available only when minReady is 0.
func PodAvailable(p *corev1.Pod, minReady int32, now time.Time) bool {
	if !PodReady(p) {
		return false
	}
	since := PodReadySince(p)
	return minReady == 0 || !since.IsZero() && !since.Add(seconds(minReady)).After(now)
}

// NextAvailable is how long until the next of pods that is ready becomes
// available, as upstream's FindMinNextPodAvailabilityCheck: the soonest at
// the sync's now, measured again from current (0 when due already), as
// the status the sync wrote was computed at now; minReady when no pod is
// waiting. A controller requeues its owner after it to count the pod.
func NextAvailable(pods []*corev1.Pod, minReady int32, now, current time.Time) time.Duration {
	var soonest time.Time
	for _, p := range pods {
		since := PodReadySince(p)
		if !PodReady(p) || since.IsZero() {
			continue
		}
		if at := since.Add(seconds(minReady)); at.After(now) && (soonest.IsZero() || at.Before(soonest)) {
			soonest = at
		}
	}
	if soonest.IsZero() {
		return seconds(minReady)
	}
	return max(0, soonest.Sub(current))
}

func seconds(s int32) time.Duration { return time.Duration(s) * time.Second }
