package namespace

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/discovery"

	"github.com/kubeembed/apiserver/internal/controller"
)

// finalizerEstimate is how long kube-controller-manager expects content
// held by finalizers to take, in seconds.
const finalizerEstimate = 15

// sync deletes the content of namespace name if it is terminating, and
// finalizes it once empty.
func (c *Controller) sync(ctx context.Context, name string) error {
	ns, err := c.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || ns.DeletionTimestamp == nil {
		return err
	}
	if ns.Status.Phase != corev1.NamespaceTerminating {
		ns.Status.Phase = corev1.NamespaceTerminating
		if ns, err = c.client.CoreV1().Namespaces().UpdateStatus(ctx, ns, metav1.UpdateOptions{}); err != nil {
			return ignoreNotFound(err)
		}
	}
	if !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		return nil
	}
	estimate, err := c.deleteAllContent(ctx, ns)
	if err != nil {
		return err
	}
	if estimate > 0 {
		return &controller.Later{After: time.Duration(estimate/2+1) * time.Second, Reason: "content remains in namespace " + name}
	}
	return c.finalize(ctx, ns)
}

// finalize removes the kubernetes finalizer, retrying on conflicts.
func (c *Controller) finalize(ctx context.Context, ns *corev1.Namespace) error {
	for {
		ns = ns.DeepCopy()
		ns.Spec.Finalizers = slices.DeleteFunc(ns.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == corev1.FinalizerKubernetes })
		_, err := c.client.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			return ignoreNotFound(err)
		}
		latest, err := c.client.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{})
		if err != nil {
			return ignoreNotFound(err)
		}
		if latest.UID != ns.UID {
			return fmt.Errorf("namespace uid has changed across retries")
		}
		ns = latest
	}
}

// remaining is what is left in a namespace after a deletion pass.
type remaining struct {
	estimate    int64
	byResource  map[schema.GroupVersionResource]int
	byFinalizer map[string]int
	errs        []error
	conditions  conditions
}

// deleteAllContent deletes every resource in ns, pods first (the rest waits
// until they are gone), updates its conditions, and estimates in seconds how
// long what remains will take.
func (c *Controller) deleteAllContent(ctx context.Context, ns *corev1.Namespace) (int64, error) {
	r := &remaining{byResource: map[schema.GroupVersionResource]int{}, byFinalizer: map[string]int{}}
	lists, err := discovery.ServerPreferredNamespacedResourcesWithContext(ctx, discovery.ToDiscoveryInterfaceWithContext(c.discovery))
	if err != nil {
		r.errs = append(r.errs, err)
		r.conditions.discoveryFailed(err)
	}
	gvrs, err := discovery.GroupVersionResources(discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"delete"}}, lists))
	if err != nil {
		r.errs = append(r.errs, err)
		r.conditions.groupVersionFailed(err)
	}
	if _, ok := gvrs[podsResource]; ok {
		r.deleteResource(ctx, c, podsResource, ns)
		if r.byResource[podsResource] > 0 {
			c.updateConditions(ctx, ns, r)
			return r.estimate, utilerrors.NewAggregate(r.errs)
		}
	}
	for gvr := range gvrs {
		if gvr != podsResource {
			r.deleteResource(ctx, c, gvr, ns)
		}
	}
	r.conditions.contentTotals(r.byResource, r.byFinalizer)
	c.updateConditions(ctx, ns, r)
	return r.estimate, utilerrors.NewAggregate(r.errs)
}

func (r *remaining) deleteResource(ctx context.Context, c *Controller, gvr schema.GroupVersionResource, ns *corev1.Namespace) {
	left, err := c.deleteContent(ctx, gvr, ns)
	if err != nil {
		r.conditions.contentFailed(err)
		if gvr == podsResource {
			err = fmt.Errorf("failed to delete pods for namespace: %s, err: %w", ns.Name, err)
		}
		r.errs = append(r.errs, err)
	}
	r.estimate = max(r.estimate, left.estimate)
	if left.count > 0 {
		r.byResource[gvr] = left.count
		for f, n := range left.finalizers {
			r.byFinalizer[f] += n
		}
	}
}

func (c *Controller) updateConditions(ctx context.Context, ns *corev1.Namespace, r *remaining) {
	if r.conditions.apply(&ns.Status) {
		// As kube-controller-manager: a failed status update is retried
		// with the next pass, not reported.
		_, _ = c.client.CoreV1().Namespaces().UpdateStatus(ctx, ns, metav1.UpdateOptions{})
	}
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
