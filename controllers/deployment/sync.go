package deployment

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// maxRetries is how often a failing Deployment is retried before it is
// dropped until its next change, as upstream.
const maxRetries = 15

// sync brings one Deployment's ReplicaSets and status in line.
func (c *Controller) sync(ctx context.Context, k string) error {
	err := c.syncDeployment(ctx, k)
	if err == nil || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return nil
	}
	if c.queue.NumRequeues(k) >= maxRetries {
		return nil // dropped, as upstream
	}
	return err
}

func (c *Controller) syncDeployment(ctx context.Context, k string) error {
	ns, name, _ := strings.Cut(k, "/")
	cached, err := c.deployments.Deployments(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	d := cached.DeepCopy()
	if apiequality.Semantic.DeepEqual(d.Spec.Selector, &metav1.LabelSelector{}) {
		c.recorder().Eventf(d, corev1.EventTypeWarning, "SelectingAll", "This deployment is selecting all pods. A non-empty selector is required.")
		if d.Status.ObservedGeneration < d.Generation {
			d.Status.ObservedGeneration = d.Generation
			_, _ = c.client.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{})
		}
		return nil
	}
	rss, err := c.claimReplicaSets(ctx, d)
	if err != nil {
		return err
	}
	if d.DeletionTimestamp != nil {
		newRS, old, err := c.replicaSetsAndRevision(ctx, d, rss, false)
		if err != nil {
			return err
		}
		return c.syncDeploymentStatus(ctx, d, append(old, newRS), newRS)
	}
	if err := c.checkPausedConditions(ctx, d); err != nil {
		return err
	}
	if d.Spec.Paused {
		return c.scaleAndSync(ctx, d, rss)
	}
	scaling, err := c.isScalingEvent(ctx, d, rss)
	if err != nil {
		return err
	}
	if scaling {
		return c.scaleAndSync(ctx, d, rss)
	}
	switch d.Spec.Strategy.Type {
	case appsv1.RecreateDeploymentStrategyType:
		return c.rolloutRecreate(ctx, d, rss)
	case appsv1.RollingUpdateDeploymentStrategyType:
		return c.rolloutRolling(ctx, d, rss)
	}
	return fmt.Errorf("unexpected deployment strategy type: %s", d.Spec.Strategy.Type)
}

// isScalingEvent: an active ReplicaSet was last sized for another number
// of replicas than the Deployment's.
func (c *Controller) isScalingEvent(ctx context.Context, d *appsv1.Deployment, rss []*appsv1.ReplicaSet) (bool, error) {
	newRS, old, err := c.replicaSetsAndRevision(ctx, d, rss, false)
	if err != nil {
		return false, err
	}
	for _, rs := range active(append(old, newRS)) {
		v, err := strconv.ParseUint(rs.Annotations[desiredReplicasAnnotation], 10, 32)
		if err != nil || v > 1<<31-1 {
			continue
		}
		if int32(v) != *d.Spec.Replicas {
			return true, nil
		}
	}
	return false, nil
}

// claimReplicaSets adopts the orphans d's selector matches and releases
// its own it no longer matches; it returns those it owns.
func (c *Controller) claimReplicaSets(ctx context.Context, d *appsv1.Deployment) ([]*appsv1.ReplicaSet, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("deployment %s/%s has invalid label selector: %v", d.Namespace, d.Name, err)
	}
	all, err := c.replicaSets.ReplicaSets(d.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var owned []*appsv1.ReplicaSet
	var errs []error
	var canAdopt func() error
	for _, rs := range all {
		matches := sel.Matches(labels.Set(rs.Labels))
		if ref := metav1.GetControllerOf(rs); ref != nil {
			switch {
			case ref.UID != d.UID:
			case matches:
				owned = append(owned, rs)
			case d.DeletionTimestamp == nil:
				body := fmt.Sprintf(`{"metadata":{"uid":%q,"ownerReferences":[{"$patch":"delete","uid":%q}]}}`, rs.UID, d.UID)
				if err := c.patch(ctx, rs, body); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsInvalid(err) {
					errs = append(errs, err)
				}
			}
			continue
		}
		if d.DeletionTimestamp != nil || !matches || rs.DeletionTimestamp != nil || rs.Namespace != d.Namespace {
			continue
		}
		if canAdopt == nil {
			canAdopt = c.recheck(ctx, d)
		}
		err := canAdopt()
		if err == nil {
			err = c.patch(ctx, rs, fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":%q,"uid":%q,"controller":true,"blockOwnerDeletion":true}],"uid":%q}}`,
				d.Name, d.UID, rs.UID))
		} else {
			err = fmt.Errorf("can't adopt ReplicaSet %v/%v (%v): %v", rs.Namespace, rs.Name, rs.UID, err)
		}
		switch {
		case err == nil:
			owned = append(owned, rs)
		case !apierrors.IsNotFound(err):
			errs = append(errs, err)
		}
	}
	return owned, errors.Join(errs...)
}

func (c *Controller) patch(ctx context.Context, rs *appsv1.ReplicaSet, body string) error {
	_, err := c.client.AppsV1().ReplicaSets(rs.Namespace).Patch(ctx, rs.Name, types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{})
	return err
}

// recheck reads d uncached, once, before a sync's first adoption.
func (c *Controller) recheck(ctx context.Context, d *appsv1.Deployment) func() error {
	var done bool
	var err error
	return func() error {
		if done {
			return err
		}
		done = true
		fresh, getErr := c.client.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
		switch {
		case getErr != nil:
			err = fmt.Errorf("can't recheck DeletionTimestamp: %v", getErr)
		case fresh.UID != d.UID:
			err = fmt.Errorf("can't recheck DeletionTimestamp: original Deployment %v/%v is gone: got uid %v, wanted %v", d.Namespace, d.Name, fresh.UID, d.UID)
		case fresh.DeletionTimestamp != nil:
			err = fmt.Errorf("%v/%v has just been deleted at %v", d.Namespace, d.Name, fresh.DeletionTimestamp)
		}
		return err
	}
}
