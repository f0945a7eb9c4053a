package deployment

import (
	"context"
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

	"github.com/kubeembed/apiserver/internal/controller"
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
	return controller.Claim(ctx, controller.Claimer{Owner: d, OwnerKind: appsv1.SchemeGroupVersion.WithKind("Deployment"), Selector: sel,
		Kind: "ReplicaSet",
		Live: func(ctx context.Context) (metav1.Object, error) {
			return c.client.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
		},
		Patch: func(ctx context.Context, o metav1.Object, body string) error {
			_, err := c.client.AppsV1().ReplicaSets(o.GetNamespace()).Patch(ctx, o.GetName(), types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{})
			return err
		}}, all)
}
