package statefulset

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"

	"github.com/kubeembed/apiserver/internal/controller"
)

func metaSelector(set *appsv1.StatefulSet) (labels.Selector, error) {
	return metav1.LabelSelectorAsSelector(set.Spec.Selector)
}

// countStatus recounts status's replicas over the pod lists (slots not yet
// created count nowhere but in what they are).
func countStatus(status *appsv1.StatefulSetStatus, minReady int32, current, update *appsv1.ControllerRevision, now time.Time, lists ...[]*corev1.Pod) {
	status.Replicas, status.ReadyReplicas, status.AvailableReplicas, status.CurrentReplicas, status.UpdatedReplicas = 0, 0, 0, 0, 0
	for _, pods := range lists {
		for _, p := range pods {
			if isCreated(p) {
				status.Replicas++
			}
			if isRunningAndReady(p) {
				status.ReadyReplicas++
				if controller.PodAvailable(p, minReady, now) {
					status.AvailableReplicas++
				}
			}
			if isCreated(p) && !isTerminating(p) {
				switch r := podRevision(p); {
				case r == current.Name && r == update.Name:
					status.CurrentReplicas++
					status.UpdatedReplicas++
				case r == current.Name:
					status.CurrentReplicas++
				case r == update.Name:
					status.UpdatedReplicas++
				}
			}
		}
	}
}

// rollingUpdate deletes the pods at or above the partition that are not of
// the update revision, highest first, within maxUnavailable (upstream's
// updateStatefulSetAfterInvariantEstablished, MaxUnavailableStatefulSet
// being on).
func (c *Controller) rollingUpdate(ctx context.Context, set *appsv1.StatefulSet, replicas []*corev1.Pod, update *appsv1.ControllerRevision, status *appsv1.StatefulSetStatus, now time.Time) (*appsv1.StatefulSetStatus, error) {
	minReady := set.Spec.MinReadySeconds
	partition, budget := 0, 1
	if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		if ru.Partition != nil {
			partition = int(*ru.Partition)
		}
		var err error
		if budget, err = maxUnavailable(set); err != nil {
			return status, err
		}
	}
	parallel := set.Spec.PodManagementPolicy == appsv1.ParallelPodManagement
	unavailable, unavailableOld := 0, 0
	for _, p := range replicas {
		if isUnavailable(p, minReady, now) {
			unavailable++
			if parallel && podRevision(p) != update.Name && !isTerminating(p) {
				unavailableOld++
			}
		}
	}
	if unavailable >= budget && unavailableOld == 0 {
		return status, nil
	}
	old := func(p *corev1.Pod) bool { return podRevision(p) != update.Name }
	if parallel {
		// Unavailable old pods first, then available ones within the budget.
		for t := len(replicas) - 1; t >= partition; t-- {
			if p := replicas[t]; old(p) && !controller.PodAvailable(p, minReady, now) && !isTerminating(p) {
				if err := c.deletePod(ctx, set, p); err != nil {
					return status, err
				}
				status.CurrentReplicas--
			}
		}
		left := budget - unavailable
		for t := len(replicas) - 1; t >= partition && left > 0; t-- {
			if p := replicas[t]; old(p) && !isUnavailable(p, minReady, now) {
				if err := c.deletePod(ctx, set, p); err != nil {
					return status, err
				}
				left--
				status.CurrentReplicas--
			}
		}
		return status, nil
	}
	deleted := 0
	for t := len(replicas) - 1; t >= partition && deleted < budget-unavailable; t-- {
		if p := replicas[t]; old(p) && !isTerminating(p) {
			if err := c.deletePod(ctx, set, p); err != nil {
				return status, err
			}
			deleted++
			status.CurrentReplicas--
		}
	}
	return status, nil
}

// writeStatus completes an update every pod has reached, then PUTs status
// when it differs from set's, retried on conflict with the cached set.
func (c *Controller) writeStatus(ctx context.Context, set *appsv1.StatefulSet, status *appsv1.StatefulSetStatus) error {
	if status == nil {
		return nil
	}
	want := *set.Spec.Replicas
	if status.UpdatedReplicas == want && status.ReadyReplicas == want && status.Replicas == want {
		status.CurrentReplicas = status.UpdatedReplicas
		status.CurrentRevision = status.UpdateRevision
	}
	if _, err := maxUnavailable(set); err != nil {
		return err
	}
	s := set.Status
	if status.ObservedGeneration <= s.ObservedGeneration && status.Replicas == s.Replicas && status.CurrentReplicas == s.CurrentReplicas &&
		status.ReadyReplicas == s.ReadyReplicas && status.UpdatedReplicas == s.UpdatedReplicas && status.CurrentRevision == s.CurrentRevision &&
		status.AvailableReplicas == s.AvailableReplicas && status.UpdateRevision == s.UpdateRevision &&
		apiequality.Semantic.DeepEqual(s.Conditions, status.Conditions) {
		return nil
	}
	next := set.DeepCopy()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		next.Status = *status
		written, err := c.client.AppsV1().StatefulSets(next.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{})
		if err == nil {
			c.written.wrote(key(next), written.UID, "statefulsets", written.ResourceVersion)
			return nil
		}
		if cached, getErr := c.sets.StatefulSets(next.Namespace).Get(next.Name); getErr == nil {
			next = cached.DeepCopy()
		}
		return err
	})
}
