package controller

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
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

// OwnerIndex is the index of the pod informer that the workload
// controllers share (upstream's controllers each keep one of the same
// keys): a pod by its controller, "namespace/Kind/name/uid", and an
// orphan by its namespace.
const OwnerIndex = "controller/owner"

func podOwnerKeys(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		return []string{pod.Namespace + "/" + ref.Kind + "/" + ref.Name + "/" + string(ref.UID)}, nil
	}
	return []string{pod.Namespace}, nil
}

// AddOwnerIndex adds OwnerIndex to the pod informer's indexer, unless a
// controller built before did.
func AddOwnerIndex(pods cache.Indexer) error {
	if _, ok := pods.GetIndexers()[OwnerIndex]; ok {
		return nil
	}
	if err := pods.AddIndexers(cache.Indexers{OwnerIndex: podOwnerKeys}); err != nil {
		return fmt.Errorf("index pods by owner: %w", err)
	}
	return nil
}

// ControlledAndOrphans are the pods owner (of kind) controls and the
// orphans of its namespace: what it may claim.
func ControlledAndOrphans(pods cache.Indexer, kind string, owner metav1.Object) ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	ns := owner.GetNamespace()
	for _, key := range []string{ns + "/" + kind + "/" + owner.GetName() + "/" + string(owner.GetUID()), ns} {
		objs, err := pods.ByIndex(OwnerIndex, key)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			out = append(out, o.(*corev1.Pod))
		}
	}
	return out, nil
}
