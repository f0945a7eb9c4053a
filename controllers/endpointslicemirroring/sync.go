package endpointslicemirroring

import (
	"context"
	"errors"
	"fmt"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// errStaleSlices is upstream's StaleInformerCache error: the informer holds
// older slices than the controller wrote, so the sync waits for it.
var errStaleSlices = errors.New("EndpointSlice informer cache is out of date")

// work syncs the Endpoints of key and retries a failure as upstream's
// handleErr does: with the queue's backoff, at most maxRetries times.
func (c *Controller) work(ctx context.Context, key string) error {
	err := c.syncEndpoints(ctx, key)
	if err != nil && c.queue.NumRequeues(key) >= maxRetries {
		klog.FromContext(ctx).Info("Retry budget exceeded, dropping Endpoints out of the queue", "key", key, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("mirror endpoints %s: %w", key, err)
	}
	return nil
}

// syncEndpoints mirrors the Endpoints of key, or deletes their mirrored
// slices when they are gone, not to be mirrored, or of a Service that is
// gone or has a selector (then the endpointslice controller keeps its
// slices).
func (c *Controller) syncEndpoints(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	ep, err := c.endpoints.Endpoints(ns).Get(name)
	if apierrors.IsNotFound(err) || err == nil && !shouldMirror(ep) {
		return c.deleteMirrored(ctx, ns, name)
	}
	if err != nil {
		return err
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) || err == nil && svc.Spec.Selector != nil {
		return c.deleteMirrored(ctx, ns, name)
	}
	if err != nil {
		return err
	}
	existing, err := c.mirrored(ns, name)
	if err != nil {
		return err
	}
	if c.tracker.StaleSlices(svc, existing) {
		return errStaleSlices
	}
	return c.reconcile(ctx, ep, existing)
}

// mirrored lists the slices mirrored from the Endpoints ns/name.
func (c *Controller) mirrored(ns, name string) ([]*discoveryv1.EndpointSlice, error) {
	return c.slices.EndpointSlices(ns).List(labels.Set{
		discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: ControllerName}.AsSelectorPreValidated())
}

// deleteMirrored deletes every slice mirrored from the Endpoints ns/name.
func (c *Controller) deleteMirrored(ctx context.Context, ns, name string) error {
	c.tracker.DeleteService(ns, name)
	slices, err := c.mirrored(ns, name)
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range slices {
		if err := c.client.DiscoveryV1().EndpointSlices(ns).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("error(s) deleting %d/%d EndpointSlices for %s/%s Endpoints, including: %s", len(errs), len(slices), ns, name, errs[0])
	}
	return nil
}
