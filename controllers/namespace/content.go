package namespace

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// left is what remains of one resource in a namespace.
type left struct {
	count      int
	finalizers map[string]int
	estimate   int64
}

// deleteContent deletes every object of gvr in ns (a collection delete, or
// one by one where the resource has none), then counts what is left.
func (c *Controller) deleteContent(ctx context.Context, gvr schema.GroupVersionResource, ns *corev1.Namespace) (left, error) {
	estimate, err := c.estimate(ctx, gvr, ns)
	if err != nil {
		return left{}, err
	}
	client := c.metadata.Resource(gvr).Namespace(ns.Name)
	background := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &background}
	err = client.DeleteCollection(ctx, opts, metav1.ListOptions{})
	if apierrors.IsMethodNotSupported(err) || apierrors.IsNotFound(err) {
		err = c.deleteEach(ctx, gvr, ns.Name, opts)
	}
	if err != nil {
		return left{estimate: estimate}, err
	}
	list, err := client.List(ctx, metav1.ListOptions{})
	if apierrors.IsMethodNotSupported(err) || apierrors.IsNotFound(err) {
		return left{estimate: estimate}, nil
	}
	if err != nil || len(list.Items) == 0 {
		return left{estimate: estimate}, err
	}
	l := left{count: len(list.Items), finalizers: map[string]int{}, estimate: estimate}
	for _, item := range list.Items {
		for _, f := range item.Finalizers {
			l.finalizers[f]++
		}
	}
	switch {
	case estimate != 0:
	case len(l.finalizers) > 0:
		l.estimate = finalizerEstimate
	default:
		return l, fmt.Errorf("unexpected items still remain in namespace: %s for gvr: %v", ns.Name, gvr)
	}
	return l, nil
}

func (c *Controller) deleteEach(ctx context.Context, gvr schema.GroupVersionResource, ns string, opts metav1.DeleteOptions) error {
	client := c.metadata.Resource(gvr).Namespace(ns)
	list, err := client.List(ctx, metav1.ListOptions{})
	if apierrors.IsMethodNotSupported(err) || apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, item := range list.Items {
		err := client.Delete(ctx, item.Name, opts)
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsMethodNotSupported(err) {
			return err
		}
	}
	return nil
}

// estimate is how long the pods of ns that are not finished may take to
// terminate, in seconds, until that long has passed since the namespace's
// deletion; 0 for other resources.
func (c *Controller) estimate(ctx context.Context, gvr schema.GroupVersionResource, ns *corev1.Namespace) (int64, error) {
	if gvr.GroupResource() != podsResource.GroupResource() {
		return 0, nil
	}
	pods, err := c.client.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	var estimate int64
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if g := p.Spec.TerminationGracePeriodSeconds; g != nil {
			estimate = max(estimate, *g)
		}
	}
	if time.Since(ns.DeletionTimestamp.Time) >= time.Duration(estimate)*time.Second {
		return 0, nil
	}
	return estimate, nil
}
