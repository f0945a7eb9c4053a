// Package endpoint is kube-controller-manager's endpoints controller
// (endpoint-controller): each Service with a selector gets an Endpoints
// object of its name (the v1 API, deprecated since v1.33 but still kept by
// kube-controller-manager v1.37) listing the pods it selects, ready ones in
// addresses and the others in notReadyAddresses, in the canonical layout of
// internal/endpoints.RepackSubsets, labelled as the Service plus
// endpoints.kubernetes.io/managed-by: endpoint-controller. Terminating
// pods are left out unless the Service publishes not-ready addresses. The
// Endpoints of a deleted Service are deleted (they have no owner
// reference), and so, when the controller starts, is any Endpoints object
// whose Service is gone, except leader-election records.
package endpoint

import (
	"context"
	"errors"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	endpointsliceutil "k8s.io/endpointslice/util"
	"k8s.io/klog/v2"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

// The managed-by label of the Endpoints this controller keeps, as upstream
// names it.
const (
	LabelManagedBy = "endpoints.kubernetes.io/managed-by"
	ControllerName = "endpoint-controller"
)

// Upstream's names and defaults.
const (
	// clientName ends the controller's user agent, as
	// kube-controller-manager names its client.
	clientName = "endpoint-controller"
	// workers is --concurrent-endpoint-syncs' default.
	workers = 5
	// maxRetries is how often a failing service is retried before it is
	// dropped (until its next change).
	maxRetries = 15
	// maxCapacity is the most addresses an Endpoints object holds; past
	// it they are truncated and the object annotated overCapacity.
	maxCapacity = 1000
	truncated   = "truncated"
)

// Controller is the endpoints controller.
type Controller struct {
	controller.Parts
	client    kubernetes.Interface
	services  corev1listers.ServiceLister
	pods      corev1listers.PodLister
	endpoints corev1listers.EndpointsLister
	queue     *controller.Queue
	triggers  *endpointsliceutil.TriggerTimeTracker
	stale     *staleEndpoints

	// recorder is made by Run before its workers start.
	recorder record.EventRecorder
}

// New returns the controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	client, err := controller.NamedClient(cfg, clientName)
	if err != nil {
		return nil, err
	}
	core := cfg.Informers.Core().V1()
	c := &Controller{
		client: client, services: core.Services().Lister(), pods: core.Pods().Lister(), endpoints: core.Endpoints().Lister(),
		queue:    controller.NewQueue("endpoint", cfg.QueueMetrics),
		triggers: endpointsliceutil.NewTriggerTimeTracker(), stale: &staleEndpoints{rv: map[types.NamespacedName]string{}},
	}
	c.Name, c.Observer, c.Queues = string(controllers.Endpoint), controller.NewObserver(cfg.Revisions), []*controller.Queue{c.queue}
	c.Events = controller.NewEvents(client)
	err = errors.Join(
		c.Observer.Watch(corev1.Resource("services"), core.Services().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.enqueue, UpdateFunc: func(_, cur any) { c.enqueue(cur) }, DeleteFunc: c.enqueue}),
		c.Observer.Watch(corev1.Resource("pods"), core.Pods().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: func(cur any) { c.podChanged(nil, cur) }, UpdateFunc: c.podChanged, DeleteFunc: func(old any) { c.podChanged(old, nil) }}),
		// Only deletions matter: someone deleted the object of a Service.
		c.Observer.Watch(corev1.Resource("endpoints"), core.Endpoints().Informer(), cache.ResourceEventHandlerFuncs{
			DeleteFunc: c.enqueue}),
	)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Run keeps the Endpoints until ctx ends, from when the informers have
// listed.
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
	c.recorder = c.Events.NewRecorder(clientgoscheme.Scheme, corev1.EventSource{Component: ControllerName})
	c.checkLeftoverEndpoints()
	c.queue.Run(ctx, workers, c.work)
}

// checkLeftoverEndpoints queues every Endpoints object, so that those whose
// Service went while the controller was not running are deleted. Leader
// election records (Endpoints without a Service) are kept.
func (c *Controller) checkLeftoverEndpoints() {
	list, err := c.endpoints.List(labels.Everything())
	if err != nil {
		return
	}
	for _, ep := range list {
		if _, ok := ep.Annotations[resourcelock.LeaderElectionRecordAnnotationKey]; !ok {
			c.enqueue(ep)
		}
	}
}

// enqueue queues the key of a Service or of its Endpoints.
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

// staleEndpoints is, per Endpoints object, the resourceVersion it had
// before the controller's last update: if the informer still hands that
// one out, it has not caught up, and the sync waits (upstream issues
// 127370, 126578: an update may come back unchanged).
type staleEndpoints struct {
	mu sync.Mutex
	rv map[types.NamespacedName]string
}

func (s *staleEndpoints) mark(ep *corev1.Endpoints) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv[types.NamespacedName{Namespace: ep.Namespace, Name: ep.Name}] = ep.ResourceVersion
}

func (s *staleEndpoints) is(ep *corev1.Endpoints) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	rv, ok := s.rv[types.NamespacedName{Namespace: ep.Namespace, Name: ep.Name}]
	return ok && rv == ep.ResourceVersion
}

func (s *staleEndpoints) forget(ns, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.rv, types.NamespacedName{Namespace: ns, Name: name})
}
