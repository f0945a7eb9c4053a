package endpointslice

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubeembed/apiserver/internal/controller"
)

// errStaleSlices is upstream's StaleInformerCache error: the informer holds
// older slices than the controller wrote, so the sync waits for it.
var errStaleSlices = errors.New("EndpointSlice informer cache is out of date")

// work syncs the Service of key and retries a failure as upstream's
// handleErr does: with the queue's backoff, at most maxRetries times.
func (c *Controller) work(ctx context.Context, key string) error {
	nodes := c.waits.nodesAdded()
	err := c.syncService(ctx, key)
	switch {
	case err == nil:
		c.waits.forget(key)
		return nil
	case onlyMissingNodes(err):
		return c.waits.later(ctx, key, err, nodes)
	case c.queue.NumRequeues(key) >= maxRetries:
		klog.FromContext(ctx).Info("Retry budget exceeded, dropping service out of the queue", "key", key, "err", err)
		return nil
	}
	return fmt.Errorf("sync service %s: %w", key, err)
}

// syncService reconciles the slices of the Service of key with the pods it
// selects, as upstream's syncService.
func (c *Controller) syncService(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	svc, err := c.services.Services(ns).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		// Its slices go with it (the garbage collector).
		c.triggers.DeleteService(ns, name)
		c.reconciler.DeleteService(ns, name)
		c.tracker.DeleteService(ns, name)
		return nil
	case err != nil:
		return err
	case svc.Spec.Type == corev1.ServiceTypeExternalName, svc.Spec.Selector == nil:
		// No endpoints for these (issue 105986); a selectorless Service's
		// slices are its owner's (or mirrored from its Endpoints).
		return nil
	}
	pods, err := c.pods.Pods(ns).List(labels.Set(svc.Spec.Selector).AsSelectorPreValidated())
	if err != nil {
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "FailedToListPods", "Error listing Pods for Service %s/%s: %v", ns, name, err)
		return err
	}
	existing, err := c.slices.EndpointSlices(ns).List(labels.Set{
		discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: ControllerName}.AsSelectorPreValidated())
	if err != nil {
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "FailedToListEndpointSlices", "Error listing Endpoint Slices for Service %s/%s: %v", ns, name, err)
		return err
	}
	// A slice being deleted would keep the controller waiting for it.
	existing = slices.DeleteFunc(existing, func(s *discoveryv1.EndpointSlice) bool { return s.DeletionTimestamp != nil })
	if c.tracker.StaleSlices(svc, existing) {
		return errStaleSlices
	}
	// Computed on every sync, so that the tracker follows the pods even when
	// nothing is written.
	trigger := c.triggers.ComputeEndpointLastChangeTriggerTime(ns, svc, pods)
	if err := c.reconciler.Reconcile(klog.FromContext(ctx), svc, pods, existing, trigger); err != nil {
		c.recorder.Eventf(svc, corev1.EventTypeWarning, "FailedToUpdateEndpointSlices", "Error updating Endpoint Slices for Service %s/%s: %v", ns, name, err)
		return err
	}
	return nil
}

// onlyMissingNodes reports whether every error of a reconcile is a pod
// skipped because its node is not known (the reconciler still writes the
// other pods' endpoints).
func onlyMissingNodes(err error) bool {
	var agg utilerrors.Aggregate
	if !errors.As(err, &agg) {
		return false
	}
	for _, e := range utilerrors.Flatten(agg).Errors() {
		if msg := e.Error(); !strings.HasPrefix(msg, "skipping Pod ") || !strings.HasSuffix(msg, " Not Found") {
			return false
		}
	}
	return true
}

// nodeWaits counts, per Service, the syncs that found pods on unknown
// nodes. Upstream retries them as failures, 1 s then doubling, 15 times.
// The retries here follow that schedule but as controller.Later: the
// controller waits for someone else (podgc deleting the pods, or the node
// coming back), so WaitIdle need not wait for minutes. A node added wakes
// the waiting Services at once (wake): WaitIdle does not wait for a
// retry, and returned with a slice missing the pods of a node the nodes
// informer had not yet seen when the Service synced (CI, loaded: a test
// read the slice 0.94 s after its start, before the 1 s retry).
type nodeWaits struct {
	mu    sync.Mutex
	count map[string]int
	// added counts the nodes added so far.
	added uint64
}

func newNodeWaits() *nodeWaits { return &nodeWaits{count: map[string]int{}} }

// later returns when to sync the Service of key again, or nil once it has
// been retried maxRetries times.
func (w *nodeWaits) later(ctx context.Context, key string, err error, added uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.added != added {
		// A node came during the sync, maybe one it missed: again now.
		return &controller.Later{After: 0, Reason: err.Error()}
	}
	n := w.count[key]
	if n >= maxRetries {
		delete(w.count, key)
		klog.FromContext(ctx).Info("Retry budget exceeded, dropping service out of the queue", "key", key, "err", err)
		return nil
	}
	w.count[key] = n + 1
	return &controller.Later{After: min(time.Second<<n, 1000*time.Second), Reason: err.Error()}
}

// nodesAdded is how many nodes have been added so far, read before a sync
// for later.
func (w *nodeWaits) nodesAdded() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.added
}

// wake queues the Services waiting for nodes: one has been added.
func (w *nodeWaits) wake(q *controller.Queue) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.added++
	for key := range w.count {
		q.Add(key)
	}
}

func (w *nodeWaits) forget(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.count, key)
}
