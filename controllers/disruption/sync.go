package disruption

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubeembed/apiserver/internal/controller"
)

// sync writes one budget's status; a failure other than a conflict writes
// the fail-safe status instead, and is not retried once that is written.
func (c *Controller) sync(ctx context.Context, k string) error {
	ns, name := splitKey(k)
	pdb, err := c.pdbs.PodDisruptionBudgets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	err = c.trySync(ctx, pdb)
	if err == nil || apierrors.IsConflict(err) {
		return err
	}
	return c.failSafe(ctx, pdb, err)
}

func (c *Controller) trySync(ctx context.Context, pdb *policyv1.PodDisruptionBudget) error {
	pods, err := c.podsOf(pdb)
	if err != nil {
		c.recorder().Eventf(pdb, corev1.EventTypeWarning, "NoPods", "Failed to get pods: %v", err)
		return err
	}
	if len(pods) == 0 {
		c.recorder().Eventf(pdb, corev1.EventTypeNormal, "NoPods", "No matching pods found")
	}
	expected, desired, unmanaged, err := c.expectedCount(ctx, pdb, pods)
	if err != nil {
		c.recorder().Eventf(pdb, corev1.EventTypeWarning, "CalculateExpectedPodCountFailed", "Failed to calculate the number of expected pods: %v", err)
		return err
	}
	if len(unmanaged) > 0 {
		c.recorder().Eventf(pdb, corev1.EventTypeWarning, "UnmanagedPods", "Pods selected by this PodDisruptionBudget (selector: %v) were found "+
			"to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. "+
			"To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value.", pdb.Spec.Selector)
	}
	now := c.clock.Now()
	disrupted, recheck := c.disruptedPods(pdb, pods, now)
	healthy := healthyCount(pods, disrupted, now)
	if err := c.writeStatus(ctx, pdb, healthy, desired, expected, disrupted); err != nil {
		return err
	}
	if !recheck.IsZero() {
		c.queue.AddAfterOn(c.clock, pdb.Namespace+"/"+pdb.Name, recheck.Sub(now))
	}
	return nil
}

// podsOf are the pods of the budget's namespace its selector matches (a
// nil selector matches none, an empty one all).
func (c *Controller) podsOf(pdb *policyv1.PodDisruptionBudget) ([]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		return nil, err
	}
	return c.pods.Pods(pdb.Namespace).List(sel)
}

// expectedCount is how many pods the budget expects and how many of them it
// wants healthy, and the covered pods no controller owns (counted only for
// maxUnavailable and percentages).
func (c *Controller) expectedCount(ctx context.Context, pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod) (expected, desired int32, unmanaged []string, err error) {
	switch {
	case pdb.Spec.MaxUnavailable != nil:
		if expected, unmanaged, err = c.expectedScale(ctx, pdb, pods); err != nil {
			return 0, 0, nil, err
		}
		n, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, int(expected), true)
		if err != nil {
			return 0, 0, nil, err
		}
		return expected, max(0, expected-int32(n)), unmanaged, nil
	case pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.Type == intstr.Int:
		return int32(len(pods)), pdb.Spec.MinAvailable.IntVal, nil, nil
	case pdb.Spec.MinAvailable != nil:
		if expected, unmanaged, err = c.expectedScale(ctx, pdb, pods); err != nil {
			return 0, 0, nil, err
		}
		n, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, int(expected), true)
		if err != nil {
			return 0, 0, nil, err
		}
		return expected, int32(n), unmanaged, nil
	}
	return 0, 0, nil, nil
}

// disruptedPods prunes the budget's disrupted pods (evicted, awaiting
// deletion): gone when deleted or no longer covered, or when overdue (with
// a NotDeleted warning on the pod); it returns when to look again.
func (c *Controller) disruptedPods(pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod, now time.Time) (map[string]metav1.Time, time.Time) {
	out := map[string]metav1.Time{}
	var recheck time.Time
	if pdb.Status.DisruptedPods == nil {
		return out, recheck
	}
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		at, ok := pdb.Status.DisruptedPods[p.Name]
		if !ok {
			continue
		}
		due := at.Add(deletionTimeout)
		if due.Before(now) {
			// Upstream names the budget's namespace twice.
			c.recorder().Eventf(p, corev1.EventTypeWarning, "NotDeleted", "Pod was expected by PDB %s/%s to be deleted but it wasn't",
				pdb.Namespace, pdb.Namespace)
			continue
		}
		out[p.Name] = at
		if recheck.IsZero() || due.Before(recheck) {
			recheck = due
		}
	}
	return out, recheck
}

// healthyCount counts the pods that are Ready, not being deleted and not
// disrupted within the deletion timeout.
func healthyCount(pods []*corev1.Pod, disrupted map[string]metav1.Time, now time.Time) int32 {
	var n int32
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if at, ok := disrupted[p.Name]; ok && at.Add(deletionTimeout).After(now) {
			continue
		}
		if controller.PodReady(p) {
			n++
		}
	}
	return n
}

// writeStatus PUTs the budget's status unless it says the same already.
func (c *Controller) writeStatus(ctx context.Context, pdb *policyv1.PodDisruptionBudget, healthy, desired, expected int32,
	disrupted map[string]metav1.Time) error {
	allowed := healthy - desired
	if expected <= 0 || allowed <= 0 {
		allowed = 0
	}
	s := pdb.Status
	if s.CurrentHealthy == healthy && s.DesiredHealthy == desired && s.ExpectedPods == expected && s.DisruptionsAllowed == allowed &&
		apiequality.Semantic.DeepEqual(s.DisruptedPods, disrupted) && s.ObservedGeneration == pdb.Generation && conditionUpToDate(pdb, allowed) {
		return nil
	}
	next := pdb.DeepCopy()
	next.Status = policyv1.PodDisruptionBudgetStatus{CurrentHealthy: healthy, DesiredHealthy: desired, ExpectedPods: expected,
		DisruptionsAllowed: allowed, DisruptedPods: disrupted, ObservedGeneration: pdb.Generation, Conditions: next.Status.Conditions}
	status, reason := metav1.ConditionFalse, policyv1.InsufficientPodsReason
	if allowed > 0 {
		status, reason = metav1.ConditionTrue, policyv1.SufficientPodsReason
	}
	apimeta.SetStatusCondition(&next.Status.Conditions, metav1.Condition{Type: policyv1.DisruptionAllowedCondition, Status: status,
		Reason: reason, ObservedGeneration: pdb.Generation, LastTransitionTime: metav1.NewTime(c.clock.Now())})
	_, err := c.client.PolicyV1().PodDisruptionBudgets(pdb.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{})
	return err
}

// conditionUpToDate is upstream's ConditionsAreUpToDate.
func conditionUpToDate(pdb *policyv1.PodDisruptionBudget, allowed int32) bool {
	cond := apimeta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
	if cond == nil || pdb.Status.ObservedGeneration != pdb.Generation {
		return false
	}
	if allowed > 0 {
		return cond.Status == metav1.ConditionTrue && cond.Reason == policyv1.SufficientPodsReason
	}
	return cond.Status == metav1.ConditionFalse && cond.Reason == policyv1.InsufficientPodsReason
}

// failSafe writes that no disruption is allowed because the sync failed,
// keeping the rest of the status.
func (c *Controller) failSafe(ctx context.Context, pdb *policyv1.PodDisruptionBudget, syncErr error) error {
	next := pdb.DeepCopy()
	next.Status.DisruptionsAllowed = 0
	if next.Status.Conditions == nil {
		next.Status.Conditions = []metav1.Condition{}
	}
	apimeta.SetStatusCondition(&next.Status.Conditions, metav1.Condition{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse,
		Reason: policyv1.SyncFailedReason, Message: syncErr.Error(), ObservedGeneration: pdb.Status.ObservedGeneration,
		LastTransitionTime: metav1.NewTime(c.clock.Now())})
	if _, err := c.client.PolicyV1().PodDisruptionBudgets(pdb.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("write fail-safe status after %v: %w", syncErr, err)
	}
	return nil
}
