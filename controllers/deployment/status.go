package deployment

// The Deployment's status and its Available, Progressing and
// ReplicaFailure conditions.

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func (c *Controller) newCondition(t appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason, message string) appsv1.DeploymentCondition {
	now := metav1.NewTime(c.clock.Now())
	return appsv1.DeploymentCondition{Type: t, Status: status, LastUpdateTime: now, LastTransitionTime: now, Reason: reason, Message: message}
}

func condition(conds []appsv1.DeploymentCondition, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// setCondition is upstream's SetDeploymentCondition: the same status and
// reason leave it as it is; the same status keeps its transition time; it
// moves to the end.
func setCondition(s *appsv1.DeploymentStatus, c appsv1.DeploymentCondition) {
	cur := condition(s.Conditions, c.Type)
	if cur != nil && cur.Status == c.Status && cur.Reason == c.Reason {
		return
	}
	if cur != nil && cur.Status == c.Status {
		c.LastTransitionTime = cur.LastTransitionTime
	}
	removeCondition(s, c.Type)
	s.Conditions = append(s.Conditions, c)
}

func removeCondition(s *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) {
	var out []appsv1.DeploymentCondition
	for _, c := range s.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	s.Conditions = out
}

// calculateStatus counts the ReplicaSets' replicas and sets Available.
func (c *Controller) calculateStatus(d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) appsv1.DeploymentStatus {
	s := appsv1.DeploymentStatus{ObservedGeneration: d.Generation, CollisionCount: d.Status.CollisionCount,
		TerminatingReplicas: terminating(all)}
	var total int32
	for _, rs := range all {
		if rs == nil {
			continue
		}
		s.Replicas += rs.Status.Replicas
		s.ReadyReplicas += rs.Status.ReadyReplicas
		s.AvailableReplicas += rs.Status.AvailableReplicas
		total += *rs.Spec.Replicas
	}
	if newRS != nil {
		s.UpdatedReplicas = newRS.Status.Replicas
	}
	s.UnavailableReplicas = max(0, total-s.AvailableReplicas)
	for _, cond := range d.Status.Conditions {
		s.Conditions = append(s.Conditions, cond)
	}
	if s.AvailableReplicas >= *d.Spec.Replicas-maxUnavailable(d) {
		setCondition(&s, c.newCondition(appsv1.DeploymentAvailable, corev1.ConditionTrue, "MinimumReplicasAvailable", "Deployment has minimum availability."))
	} else {
		setCondition(&s, c.newCondition(appsv1.DeploymentAvailable, corev1.ConditionFalse, "MinimumReplicasUnavailable", "Deployment does not have minimum availability."))
	}
	return s
}

// terminating sums the ReplicaSets' terminating replicas; nil when one that
// has been observed does not say.
func terminating(all []*appsv1.ReplicaSet) *int32 {
	var n int32
	for _, rs := range all {
		if rs == nil || rs.Status.ObservedGeneration == 0 && rs.Status.TerminatingReplicas == nil {
			continue
		}
		if rs.Status.TerminatingReplicas == nil {
			return nil
		}
		n += *rs.Status.TerminatingReplicas
	}
	return ptr.To(n)
}

// syncDeploymentStatus writes the counted status, if it changed.
func (c *Controller) syncDeploymentStatus(ctx context.Context, d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) error {
	s := c.calculateStatus(d, all, newRS)
	if apiequality.Semantic.DeepEqual(d.Status, s) {
		return nil
	}
	d.Status = s
	_, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	return err
}

// syncRolloutStatus writes the status with the rollout's progress.
func (c *Controller) syncRolloutStatus(ctx context.Context, d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) error {
	s := c.calculateStatus(d, all, newRS)
	if !hasProgressDeadline(d) {
		removeCondition(&s, appsv1.DeploymentProgressing)
	}
	cur := condition(d.Status.Conditions, appsv1.DeploymentProgressing)
	complete := s.Replicas == s.UpdatedReplicas && cur != nil && cur.Reason == "NewReplicaSetAvailable"
	if hasProgressDeadline(d) && !complete {
		c.progress(d, &s, cur, newRS)
	}
	failures := replicaFailures(all, newRS)
	if len(failures) > 0 {
		setCondition(&s, failures[0])
	} else {
		removeCondition(&s, appsv1.DeploymentReplicaFailure)
	}
	if apiequality.Semantic.DeepEqual(d.Status, s) {
		c.requeueStuck(d, s)
		return nil
	}
	d.Status = s
	_, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	return err
}

// progress sets Progressing: complete, progressing (its update time
// refreshed), or timed out.
func (c *Controller) progress(d *appsv1.Deployment, s *appsv1.DeploymentStatus, cur *appsv1.DeploymentCondition, newRS *appsv1.ReplicaSet) {
	subject := fmt.Sprintf("Deployment %q", d.Name)
	if newRS != nil {
		subject = fmt.Sprintf("ReplicaSet %q", newRS.Name)
	}
	switch {
	case deploymentComplete(d, s):
		setCondition(s, c.newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, "NewReplicaSetAvailable", subject+" has successfully progressed."))
	case progressing(&d.Status, s):
		cond := c.newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, "ReplicaSetUpdated", subject+" is progressing.")
		if cur != nil && cur.Status == corev1.ConditionTrue {
			cond.LastTransitionTime = cur.LastTransitionTime
		}
		removeCondition(s, appsv1.DeploymentProgressing)
		setCondition(s, cond)
	case c.timedOut(d, s):
		setCondition(s, c.newCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, "ProgressDeadlineExceeded", subject+" has timed out progressing."))
	}
}

func progressing(old, s *appsv1.DeploymentStatus) bool {
	return s.UpdatedReplicas > old.UpdatedReplicas || s.Replicas-s.UpdatedReplicas < old.Replicas-old.UpdatedReplicas ||
		s.ReadyReplicas > old.ReadyReplicas || s.AvailableReplicas > old.AvailableReplicas
}

func (c *Controller) timedOut(d *appsv1.Deployment, s *appsv1.DeploymentStatus) bool {
	cond := condition(s.Conditions, appsv1.DeploymentProgressing)
	if cond == nil || cond.Reason == "NewReplicaSetAvailable" {
		return false
	}
	if cond.Reason == "ProgressDeadlineExceeded" {
		return true
	}
	deadline := cond.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second)
	return deadline.Before(c.clock.Now())
}

// replicaFailures are the ReplicaFailure conditions of the new
// ReplicaSet, or else of any, as Deployment conditions.
func replicaFailures(all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) []appsv1.DeploymentCondition {
	of := func(rs *appsv1.ReplicaSet) []appsv1.DeploymentCondition {
		var out []appsv1.DeploymentCondition
		for _, c := range rs.Status.Conditions {
			if c.Type == appsv1.ReplicaSetReplicaFailure {
				out = append(out, appsv1.DeploymentCondition{Type: appsv1.DeploymentReplicaFailure, Status: c.Status, Reason: c.Reason,
					Message: c.Message, LastUpdateTime: c.LastTransitionTime, LastTransitionTime: c.LastTransitionTime})
			}
		}
		return out
	}
	if newRS != nil {
		if out := of(newRS); len(out) > 0 {
			return out
		}
	}
	var out []appsv1.DeploymentCondition
	for _, rs := range all {
		if rs != nil {
			out = append(out, of(rs)...)
		}
	}
	return out
}

// requeueStuck looks at a rollout again when its deadline passes.
func (c *Controller) requeueStuck(d *appsv1.Deployment, s appsv1.DeploymentStatus) {
	cur := condition(d.Status.Conditions, appsv1.DeploymentProgressing)
	if !hasProgressDeadline(d) || cur == nil || deploymentComplete(d, &s) || cur.Reason == "ProgressDeadlineExceeded" {
		return
	}
	after := cur.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second).Sub(c.clock.Now())
	k := d.Namespace + "/" + d.Name
	if after < time.Second {
		c.queue.AddRateLimited(k)
		return
	}
	c.queue.AddAfterOn(c.clock, k, after+time.Second)
}

// checkPausedConditions says in Progressing that the rollout is paused or
// resumed.
func (c *Controller) checkPausedConditions(ctx context.Context, d *appsv1.Deployment) error {
	if !hasProgressDeadline(d) {
		return nil
	}
	cur := condition(d.Status.Conditions, appsv1.DeploymentProgressing)
	if cur != nil && cur.Reason == "ProgressDeadlineExceeded" {
		return nil
	}
	paused := cur != nil && cur.Reason == "DeploymentPaused"
	switch {
	case d.Spec.Paused && !paused:
		setCondition(&d.Status, c.newCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, "DeploymentPaused", "Deployment is paused"))
	case !d.Spec.Paused && paused:
		setCondition(&d.Status, c.newCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, "DeploymentResumed", "Deployment is resumed"))
	default:
		return nil
	}
	_, err := c.client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	return err
}
