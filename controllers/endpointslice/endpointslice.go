// Package endpointslice is kube-controller-manager's EndpointSlice
// controller (endpointslice-controller): each Service with a selector gets
// EndpointSlices of the pods it selects (ready, serving and terminating),
// one set per address family and per port mapping, up to 100 endpoints a
// slice, owned by the Service and labelled kubernetes.io/service-name and
// endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io.
// A Service with no pod gets an empty placeholder slice per family.
//
// The slices are computed and written by k8s.io/endpointslice's
// Reconciler, the library kube-controller-manager's controller is built on;
// this package is that controller's shell (handlers, queue, syncService),
// as upstream writes it. Services without a selector are left to their
// owners and to the endpointslicemirroring controller; slices of a deleted
// Service go with it through the garbage collector (ownerReferences).
package endpointslice

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	corev1listers "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/endpointslice"
	"k8s.io/endpointslice/topologycache"
	endpointsliceutil "k8s.io/endpointslice/util"
	"k8s.io/klog/v2"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

// ControllerName is the endpointslice.kubernetes.io/managed-by label of the
// slices this controller keeps, as upstream names it.
const ControllerName = "endpointslice-controller.k8s.io"

// Upstream's names and defaults.
const (
	// clientName ends the controller's user agent, as
	// kube-controller-manager names its client.
	clientName = "endpointslice-controller"
	// eventComponent is its events' source.
	eventComponent = "endpoint-slice-controller"
	// maxEndpointsPerSlice is --max-endpoints-per-slice's default.
	maxEndpointsPerSlice = 100
	// workers is --concurrent-service-endpoint-syncs' default.
	workers = 5
	// maxRetries is how often a failing service is retried before it is
	// dropped (until its next change).
	maxRetries = 15
)

// Controller is the EndpointSlice controller.
type Controller struct {
	controller.Parts
	client   kubernetes.Interface
	services corev1listers.ServiceLister
	pods     corev1listers.PodLister
	nodes    corev1listers.NodeLister
	slices   discoverylisters.EndpointSliceLister
	queue    *controller.Queue

	// tracker is shared with the reconciler: the generations of the slices
	// written, so that the controller's own writes coming back through the
	// informer are not mistaken for someone else's.
	tracker  *endpointsliceutil.EndpointSliceTracker
	triggers *endpointsliceutil.TriggerTimeTracker
	topology *topologycache.TopologyCache
	waits    *nodeWaits

	// recorder and reconciler are made by Run before its workers start.
	recorder   record.EventRecorder
	reconciler *endpointslice.Reconciler
}

// New returns the controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	client, err := controller.NamedClient(cfg, clientName)
	if err != nil {
		return nil, err
	}
	core, discovery := cfg.Informers.Core().V1(), cfg.Informers.Discovery().V1()
	c := &Controller{
		client: client, services: core.Services().Lister(), pods: core.Pods().Lister(),
		nodes: core.Nodes().Lister(), slices: discovery.EndpointSlices().Lister(),
		queue:   controller.NewQueue("endpoint_slice", cfg.QueueMetrics),
		tracker: endpointsliceutil.NewEndpointSliceTracker(), triggers: endpointsliceutil.NewTriggerTimeTracker(),
		topology: topologycache.NewTopologyCache(), waits: newNodeWaits(),
	}
	c.Name, c.Observer, c.Queues = string(controllers.EndpointSlice), controller.NewObserver(cfg.Revisions), []*controller.Queue{c.queue}
	c.Events = controller.NewEvents(client)
	err = errors.Join(
		c.Observer.Watch(corev1.Resource("services"), core.Services().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.enqueue, UpdateFunc: func(_, cur any) { c.enqueue(cur) }, DeleteFunc: c.enqueue}),
		c.Observer.Watch(corev1.Resource("pods"), core.Pods().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: func(cur any) { c.podChanged(nil, cur) }, UpdateFunc: c.podChanged, DeleteFunc: func(old any) { c.podChanged(old, nil) }}),
		c.Observer.Watch(discoveryv1.Resource("endpointslices"), discovery.EndpointSlices().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.sliceAdded, UpdateFunc: c.sliceUpdated, DeleteFunc: c.sliceDeleted}),
		c.Observer.Watch(corev1.Resource("nodes"), core.Nodes().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { c.nodesChanged(); c.waits.wake(c.queue) }, UpdateFunc: c.nodeUpdated, DeleteFunc: func(any) { c.nodesChanged() }}),
	)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Run keeps the slices until ctx ends, from when the informers have
// listed (a sync before would find no slice and create duplicates).
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
	// PreferSameTrafficDistribution is GA and locked on in v1.37.
	c.reconciler = endpointslice.NewReconciler(c.client, c.nodes, maxEndpointsPerSlice, c.tracker, c.topology,
		c.recorder, ControllerName, endpointslice.WithPreferSameTrafficDistributionEnabled(true))
	c.queue.Run(ctx, workers, c.work)
}

// enqueue queues a Service's key.
func (c *Controller) enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

// podChanged queues the Services that select the pod before or after a
// change that matters to endpoints (labels, IPs, readiness, deletion,
// hostname). Upstream passes through a pod queue first; the lookup is the
// same.
func (c *Controller) podChanged(old, cur any) {
	key := endpointsliceutil.GetPodUpdateProjectionKey(old, cur)
	services, err := endpointsliceutil.GetServicesToUpdate(c.services, key)
	if err != nil {
		klog.Background().Error(err, "Finding the services of a pod")
		return
	}
	for svc := range services {
		c.queue.Add(svc)
	}
}

// managed reports whether this controller keeps slice.
func managed(slice *discoveryv1.EndpointSlice) bool {
	return slice.Labels[discoveryv1.LabelManagedBy] == ControllerName
}

// sliceAdded queues the Service of a slice of ours the controller did not
// write (or has not recorded writing yet).
func (c *Controller) sliceAdded(obj any) {
	if slice, ok := obj.(*discoveryv1.EndpointSlice); ok && managed(slice) && c.tracker.ShouldSync(slice) {
		c.enqueueSliceService(slice)
	}
}

// sliceUpdated queues the Service of a slice someone else changed, or both
// Services when its service-name label moved it (generation does not
// change with labels).
func (c *Controller) sliceUpdated(oldObj, obj any) {
	old, ok1 := oldObj.(*discoveryv1.EndpointSlice)
	slice, ok2 := obj.(*discoveryv1.EndpointSlice)
	switch {
	case !ok1 || !ok2:
	case old.Labels[discoveryv1.LabelServiceName] != slice.Labels[discoveryv1.LabelServiceName]:
		c.enqueueSliceService(slice)
		c.enqueueSliceService(old)
	case managed(old) != managed(slice) || managed(slice) && c.tracker.ShouldSync(slice):
		c.enqueueSliceService(slice)
	}
}

// sliceDeleted queues the Service of a slice of ours deleted by someone
// else.
func (c *Controller) sliceDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	slice, ok := obj.(*discoveryv1.EndpointSlice)
	if ok && managed(slice) && c.tracker.Has(slice) && !c.tracker.HandleDeletion(slice) {
		c.enqueueSliceService(slice)
	}
}

// enqueueSliceService queues the Service a slice names. Upstream waits a
// second first, to batch the events of several slices; here the sync is
// queued at once, so that WaitIdle, which does not wait for delayed items,
// sees the repair of a slice someone changed.
func (c *Controller) enqueueSliceService(slice *discoveryv1.EndpointSlice) {
	if key, err := endpointslice.ServiceControllerKey(slice); err == nil {
		c.queue.Add(key)
	}
}

// nodeUpdated redoes the topology when a node's readiness or zone changed
// (a cloud provider may add the zone label late).
func (c *Controller) nodeUpdated(oldObj, obj any) {
	old, ok1 := oldObj.(*corev1.Node)
	node, ok2 := obj.(*corev1.Node)
	if ok1 && ok2 && (nodeReady(old) != nodeReady(node) || old.Labels[corev1.LabelTopologyZone] != node.Labels[corev1.LabelTopologyZone]) {
		c.nodesChanged()
	}
}

// nodesChanged gives the topology cache the nodes and queues the Services
// whose topology hints it finds overloaded. Upstream does it in a topology
// queue's worker; it is quick.
func (c *Controller) nodesChanged() {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	c.topology.SetNodes(klog.Background(), nodes)
	for _, key := range c.topology.GetOverloadedServices() {
		c.queue.Add(key)
	}
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
