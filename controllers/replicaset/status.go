package replicaset

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/internal/controller"
)

// status computes rs's status from its active and terminating pods and
// the error of managing them, as upstream's calculateStatus.
func (c *Controller) status(rs *appsv1.ReplicaSet, active []*corev1.Pod, terminating int, manageErr error, now time.Time) appsv1.ReplicaSetStatus {
	s := *rs.Status.DeepCopy()
	template := labels.Set(rs.Spec.Template.Labels)
	s.Replicas, s.FullyLabeledReplicas, s.ReadyReplicas, s.AvailableReplicas = int32(len(active)), 0, 0, 0
	for _, p := range active {
		if labels.SelectorFromSet(template).Matches(labels.Set(p.Labels)) {
			s.FullyLabeledReplicas++
		}
		if controller.PodReady(p) {
			s.ReadyReplicas++
			if controller.PodAvailable(p, rs.Spec.MinReadySeconds, now) {
				s.AvailableReplicas++
			}
		}
	}
	s.TerminatingReplicas = nil
	if c.kind.terminating {
		s.TerminatingReplicas = ptr.To(int32(terminating))
	}
	i := failureCondition(s.Conditions)
	switch {
	case manageErr != nil && i < 0:
		reason := ""
		switch want := *rs.Spec.Replicas; {
		case int32(len(active)) < want:
			reason = "FailedCreate"
		case int32(len(active)) > want:
			reason = "FailedDelete"
		}
		s.Conditions = append(s.Conditions, appsv1.ReplicaSetCondition{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue,
			Reason: reason, Message: manageErr.Error(), LastTransitionTime: metav1.NewTime(now)})
	case manageErr == nil && i >= 0:
		s.Conditions = append(s.Conditions[:i:i], s.Conditions[i+1:]...)
	}
	return s
}

func failureCondition(conds []appsv1.ReplicaSetCondition) int {
	for i, c := range conds {
		if c.Type == appsv1.ReplicaSetReplicaFailure {
			return i
		}
	}
	return -1
}

// writeStatus PUTs status unless nothing changed, retrying once on a fresh
// read, as upstream's updateReplicaSetStatus. It returns the object as
// written (rs when nothing was).
func (c *Controller) writeStatus(ctx context.Context, rs *appsv1.ReplicaSet, s appsv1.ReplicaSetStatus) (*appsv1.ReplicaSet, error) {
	old := rs.Status
	if old.Replicas == s.Replicas && old.FullyLabeledReplicas == s.FullyLabeledReplicas && old.ReadyReplicas == s.ReadyReplicas &&
		old.AvailableReplicas == s.AvailableReplicas && ptr.Equal(old.TerminatingReplicas, s.TerminatingReplicas) &&
		apiequality.Semantic.DeepEqual(old.Conditions, s.Conditions) && rs.Generation == old.ObservedGeneration {
		return rs, nil
	}
	s.ObservedGeneration = rs.Generation
	next := rs.DeepCopy()
	next.Status = s
	written, err := c.kind.writeStatus(ctx, next)
	if err == nil {
		return written, nil
	}
	fresh, getErr := c.kind.live(ctx, rs.Namespace, rs.Name)
	if getErr != nil {
		return nil, getErr
	}
	fresh.Status = s
	return c.kind.writeStatus(ctx, fresh)
}
