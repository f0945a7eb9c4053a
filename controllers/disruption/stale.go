package disruption

// A pod's DisruptionTarget condition left True on a pod that was not
// deleted is reset after stalePodDisruptionTimeout, as upstream.

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// staleDisruption reports whether the pod carries a DisruptionTarget
// condition that may go stale, and how long until it does.
func staleDisruption(pod *corev1.Pod, now time.Time) (time.Duration, bool) {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return 0, false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.DisruptionTarget || c.Status != corev1.ConditionTrue || c.Reason == corev1.PodReasonTerminationByKubelet {
			continue
		}
		if c.LastTransitionTime.IsZero() {
			return 0, true
		}
		return max(0, stalePodDisruptionTimeout-now.Sub(c.LastTransitionTime.Time)), true
	}
	return 0, false
}

// syncStalePod sets a stale DisruptionTarget condition False, with no
// reason or message, by a PUT of the pod's status.
func (c *Controller) syncStalePod(ctx context.Context, k string) error {
	ns, name := splitKey(k)
	pod, err := c.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	now := c.clock.Now()
	wait, stale := staleDisruption(pod, now)
	if !stale {
		return nil
	}
	if wait > 0 {
		c.stale.AddAfterOn(c.clock, k, wait)
		return nil
	}
	next := pod.DeepCopy()
	for i, cond := range next.Status.Conditions {
		if cond.Type == corev1.DisruptionTarget {
			next.Status.Conditions[i] = corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionFalse,
				ObservedGeneration: pod.Generation, LastTransitionTime: metav1.NewTime(now)}
		}
	}
	_, err = c.client.CoreV1().Pods(ns).UpdateStatus(ctx, next, metav1.UpdateOptions{})
	return err
}
