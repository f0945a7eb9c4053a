// Package namespace is the namespace controller, as kube-controller-manager
// runs it: a terminating namespace has every namespaced resource in it
// deleted (discovered, built-in and custom), its deletion conditions set
// with kube-controller-manager's reasons and messages, and once it is empty
// its "kubernetes" finalizer removed, so that the namespace goes.
//
// It is quicker than kube-controller-manager where it can be without
// changing the outcome: it takes a namespace at once (not after 5 s), and it
// watches the content of terminating namespaces, so it finishes as soon as
// the last object (held by someone else's finalizer) is gone rather than at
// its next 8 s check.
package namespace

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

// Controller is the namespace controller.
type Controller struct {
	controller.Parts
	client     kubernetes.Interface
	metadata   metadata.Interface
	discovery  discovery.DiscoveryInterface
	namespaces corev1listers.NamespaceLister
	queue      *controller.Queue
}

// New returns the namespace controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	c := &Controller{
		client: cfg.Client, metadata: cfg.Metadata, discovery: cfg.Discovery,
		namespaces: cfg.Informers.Core().V1().Namespaces().Lister(),
		queue:      controller.NewQueue("namespace", cfg.QueueMetrics),
	}
	c.Name, c.Observer, c.Queues = string(controllers.Namespace), controller.NewObserver(cfg.Revisions), []*controller.Queue{c.queue}
	enqueue := func(obj any) {
		if ns, ok := obj.(*corev1.Namespace); ok && ns.DeletionTimestamp != nil {
			c.queue.Add(ns.Name)
		}
	}
	err := c.Observer.Watch(corev1.Resource("namespaces"), cfg.Informers.Core().V1().Namespaces().Informer(),
		cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }})
	cfg.Monitors.Subscribe(c.resourcesChanged)
	return c, err
}

// Run deletes the content of terminating namespaces until ctx ends.
func (c *Controller) Run(ctx context.Context) { c.queue.Run(ctx, 1, c.sync) }

// resourcesChanged watches the namespaced resources monitored: the
// deletion of an object in a terminating namespace enqueues the namespace.
func (c *Controller) resourcesChanged(added, removed []controllers.Resource) {
	for _, r := range removed {
		if r.Namespaced {
			c.Observer.Unwatch(r.GroupResource())
		}
	}
	for _, r := range added {
		if !r.Namespaced {
			continue
		}
		_ = c.Observer.Watch(r.GroupResource(), r.Informer, cache.ResourceEventHandlerFuncs{DeleteFunc: c.contentDeleted})
	}
}

func (c *Controller) contentDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	if ns, err := c.namespaces.Get(m.GetNamespace()); err == nil && ns.DeletionTimestamp != nil {
		c.queue.Add(ns.Name)
	}
}

var podsResource = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
