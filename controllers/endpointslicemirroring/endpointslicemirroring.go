// Package endpointslicemirroring is kube-controller-manager's
// EndpointSlice mirroring controller (endpointslicemirroring-controller):
// the Endpoints of a Service without a selector (written by its owner, not
// by the endpoints controller) are mirrored into EndpointSlices, one per
// address family and port set (up to 1000 addresses per subset), owned by
// the Endpoints and labelled as them plus kubernetes.io/service-name and
// endpointslice.kubernetes.io/managed-by:
// endpointslicemirroring-controller.k8s.io. Endpoints labelled
// endpointslice.kubernetes.io/skip-mirror: "true" (the API server's own
// kubernetes Endpoints) or carrying a leader-election record are not
// mirrored, and mirrored slices go when their Endpoints or Service go or
// the Service gets a selector.
package endpointslicemirroring

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	corev1listers "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	endpointsliceutil "k8s.io/endpointslice/util"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

// ControllerName is the endpointslice.kubernetes.io/managed-by label of the
// slices this controller keeps, as upstream names it.
const ControllerName = "endpointslicemirroring-controller.k8s.io"

// Upstream's names and defaults.
const (
	// clientName ends the controller's user agent, as
	// kube-controller-manager names its client.
	clientName = "endpointslicemirroring-controller"
	// eventComponent is its events' source.
	eventComponent = "endpoint-slice-mirroring-controller"
	// maxEndpointsPerSubset is --mirroring-max-endpoints-per-subset's
	// default.
	maxEndpointsPerSubset = 1000
	// workers is --mirroring-concurrent-service-endpoint-syncs' default.
	workers = 5
	// maxRetries is how often failing Endpoints are retried before they
	// are dropped (until their next change).
	maxRetries = 15
)

// Controller is the EndpointSlice mirroring controller.
type Controller struct {
	controller.Parts
	client    kubernetes.Interface
	endpoints corev1listers.EndpointsLister
	services  corev1listers.ServiceLister
	slices    discoverylisters.EndpointSliceLister
	queue     *controller.Queue
	// tracker holds the generations of the slices written, so that the
	// controller's own writes coming back are not mistaken for someone
	// else's.
	tracker *endpointsliceutil.EndpointSliceTracker

	// recorder is made by Run before its workers start.
	recorder record.EventRecorder
}

// New returns the controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	client, err := controller.NamedClient(cfg, clientName)
	if err != nil {
		return nil, err
	}
	core, discovery := cfg.Informers.Core().V1(), cfg.Informers.Discovery().V1()
	c := &Controller{
		client: client, endpoints: core.Endpoints().Lister(), services: core.Services().Lister(),
		slices: discovery.EndpointSlices().Lister(), queue: controller.NewQueue("endpoint_slice_mirroring", cfg.QueueMetrics),
		tracker: endpointsliceutil.NewEndpointSliceTracker(),
	}
	c.Name, c.Observer, c.Queues = string(controllers.EndpointSliceMirroring), controller.NewObserver(cfg.Revisions), []*controller.Queue{c.queue}
	c.Events = controller.NewEvents(client)
	err = errors.Join(
		c.Observer.Watch(corev1.Resource("endpoints"), core.Endpoints().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.endpointsChanged, UpdateFunc: c.endpointsUpdated, DeleteFunc: c.endpointsChanged}),
		c.Observer.Watch(corev1.Resource("services"), core.Services().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.serviceChanged, UpdateFunc: c.serviceUpdated, DeleteFunc: c.serviceChanged}),
		c.Observer.Watch(discoveryv1.Resource("endpointslices"), discovery.EndpointSlices().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.sliceAdded, UpdateFunc: c.sliceUpdated, DeleteFunc: c.sliceDeleted}),
	)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Run mirrors until ctx ends, from when the informers have listed (a sync
// before would find no slice and create duplicates).
func (c *Controller) Run(ctx context.Context) {
	defer c.ShutDown() // also when ctx ends before the informers list
	err := controller.Wait(ctx, func() error {
		if !c.Observer.Synced() {
			return errors.New("informers not synced")
		}
		return nil
	})
	if err != nil {
		return
	}
	defer c.Events.Start()()
	c.recorder = c.Events.NewRecorder(clientgoscheme.Scheme, corev1.EventSource{Component: eventComponent})
	c.queue.Run(ctx, workers, c.work)
}

// enqueue queues the key of Endpoints or of their Service.
func (c *Controller) enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

// shouldMirror reports whether ep are mirrored: not labelled skip-mirror
// "true", not a leader-election record.
func shouldMirror(ep *corev1.Endpoints) bool {
	_, leader := ep.Annotations[resourcelock.LeaderElectionRecordAnnotationKey]
	return ep.Labels[discoveryv1.LabelSkipMirror] != "true" && !leader
}

func (c *Controller) endpointsChanged(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if ep, ok := obj.(*corev1.Endpoints); ok && shouldMirror(ep) {
		c.enqueue(ep)
	}
}

// endpointsUpdated queues Endpoints mirrored before or after the change
// (a skip-mirror label added must remove the slices).
func (c *Controller) endpointsUpdated(oldObj, obj any) {
	old, ok1 := oldObj.(*corev1.Endpoints)
	ep, ok2 := obj.(*corev1.Endpoints)
	if ok1 && ok2 && (shouldMirror(old) || shouldMirror(ep)) {
		c.enqueue(ep)
	}
}

// serviceChanged queues the Endpoints of a Service without a selector that
// came or went.
func (c *Controller) serviceChanged(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if svc, ok := obj.(*corev1.Service); ok && svc.Spec.Selector == nil {
		c.enqueue(svc)
	}
}

// serviceUpdated queues the Endpoints of a Service that gained or lost its
// selector.
func (c *Controller) serviceUpdated(oldObj, obj any) {
	old, ok1 := oldObj.(*corev1.Service)
	svc, ok2 := obj.(*corev1.Service)
	if ok1 && ok2 && (old.Spec.Selector == nil) != (svc.Spec.Selector == nil) {
		c.enqueue(svc)
	}
}

// managed reports whether this controller keeps slice.
func managed(slice *discoveryv1.EndpointSlice) bool {
	return slice.Labels[discoveryv1.LabelManagedBy] == ControllerName
}

// sliceAdded queues the Endpoints of a slice of ours the controller did not
// write (or has not recorded writing yet).
func (c *Controller) sliceAdded(obj any) {
	if slice, ok := obj.(*discoveryv1.EndpointSlice); ok && managed(slice) && c.tracker.ShouldSync(slice) {
		c.enqueueSliceEndpoints(slice)
	}
}

// sliceUpdated queues the Endpoints of a slice someone else changed, or of
// both names when its service-name label changed.
func (c *Controller) sliceUpdated(oldObj, obj any) {
	old, ok1 := oldObj.(*discoveryv1.EndpointSlice)
	slice, ok2 := obj.(*discoveryv1.EndpointSlice)
	switch {
	case !ok1 || !ok2:
	case old.Labels[discoveryv1.LabelServiceName] != slice.Labels[discoveryv1.LabelServiceName]:
		c.enqueueSliceEndpoints(slice)
		c.enqueueSliceEndpoints(old)
	case managed(old) != managed(slice) || managed(slice) && c.tracker.ShouldSync(slice):
		c.enqueueSliceEndpoints(slice)
	}
}

// sliceDeleted queues the Endpoints of a slice of ours deleted by someone
// else.
func (c *Controller) sliceDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	slice, ok := obj.(*discoveryv1.EndpointSlice)
	if ok && managed(slice) && c.tracker.Has(slice) && !c.tracker.HandleDeletion(slice) {
		c.enqueueSliceEndpoints(slice)
	}
}

// enqueueSliceEndpoints queues the Endpoints a slice names (upstream waits
// the batch period first, which is 0 by default).
func (c *Controller) enqueueSliceEndpoints(slice *discoveryv1.EndpointSlice) {
	if name := slice.Labels[discoveryv1.LabelServiceName]; name != "" {
		c.queue.Add(slice.Namespace + "/" + name)
	}
}
