// Package nodelifecycle is kube-controller-manager's node lifecycle
// controller: it taints nodes by their conditions (NoSchedule for
// not-ready, unreachable, pressure and cordoned nodes; NoExecute for
// not-ready and unreachable ones, which the taint eviction controller acts
// on), marks a node whose kubelet stopped renewing its Lease Unknown once
// the grace period is over (on the server's clock), and marks the pods of
// a Ready node it turns Unknown not Ready (and a pod bound to such a node
// later), as v1.37.2 does: pods of a node its kubelet reports NotReady
// keep their conditions.
package nodelifecycle

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

// kube-controller-manager's defaults: --node-monitor-grace-period and
// --node-startup-grace-period.
const (
	gracePeriod        = 50 * time.Second
	startupGracePeriod = 60 * time.Second
)

// Controller is the node lifecycle controller.
type Controller struct {
	controller.Parts
	client kubernetes.Interface
	clock  clock.WithTickerAndDelayedExecution
	nodes  corev1listers.NodeLister
	pods   corev1listers.PodLister
	leases coordinationlisters.LeaseLister
	queue  *controller.Queue
	// initial are the simulated nodes the server registers at start.
	initial []string

	mu sync.Mutex
	// health is what the controller observed of each node's heartbeats.
	health map[string]*health
	timers map[string]clock.Timer
}

// health is when the controller last saw a node's kubelet report: a new
// Ready heartbeat or Lease renewal, observed at probed.
type health struct {
	heartbeat, renewed time.Time
	probed             time.Time
	registered, ready  bool
}

// New returns the controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	c := &Controller{client: cfg.Client, clock: cfg.Clock, nodes: cfg.Informers.Core().V1().Nodes().Lister(),
		pods: cfg.Informers.Core().V1().Pods().Lister(), leases: cfg.Informers.Coordination().V1().Leases().Lister(),
		queue: controller.NewQueue("node_lifecycle_controller", cfg.QueueMetrics), health: map[string]*health{}, timers: map[string]clock.Timer{}}
	for _, n := range cfg.Nodes {
		c.initial = append(c.initial, n.Name)
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	c.Name, c.Observer, c.Queues = string(controllers.NodeLifecycle), controller.NewObserver(cfg.Revisions), []*controller.Queue{c.queue}
	c.Events = controller.NewEvents(c.client)
	node := func(obj any) {
		if n, ok := deleted(obj).(*corev1.Node); ok {
			c.queue.Add(n.Name)
		}
	}
	if err := c.Observer.Watch(corev1.Resource("nodes"), cfg.Informers.Core().V1().Nodes().Informer(),
		cache.ResourceEventHandlerFuncs{AddFunc: node, UpdateFunc: func(_, o any) { node(o) }, DeleteFunc: node}); err != nil {
		return nil, err
	}
	lease := func(obj any) {
		if l, ok := deleted(obj).(*coordinationv1.Lease); ok && l.Namespace == corev1.NamespaceNodeLease {
			c.queue.Add(l.Name)
		}
	}
	if err := c.Observer.Watch(coordinationv1.Resource("leases"), cfg.Informers.Coordination().V1().Leases().Informer(),
		cache.ResourceEventHandlerFuncs{AddFunc: lease, UpdateFunc: func(_, o any) { lease(o) }}); err != nil {
		return nil, err
	}
	pod := func(obj any) { // a pod newly bound to a node that is not ready is marked too
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			c.queue.Add(podKey(p))
		}
	}
	return c, c.Observer.Watch(corev1.Resource("pods"), cfg.Informers.Core().V1().Pods().Informer(),
		cache.ResourceEventHandlerFuncs{AddFunc: pod, UpdateFunc: func(o, n any) {
			if o.(*corev1.Pod).Spec.NodeName == "" {
				pod(n)
			}
		}})
}

func deleted(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	defer c.ShutDown()
	defer c.stopTimers()
	defer c.Events.Start()()
	c.queue.Run(ctx, 2, c.sync)
}

func (c *Controller) recorder() record.EventRecorder {
	return c.Events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "node-controller"})
}

// WaitStarted waits until the server's initial nodes are Ready and have
// lost the taint of their not-ready state (the not-ready taint admission
// gives a new node), and so has every other node that reports Ready, as
// this controller sees them: Start returns with its nodes schedulable.
func (c *Controller) WaitStarted(ctx context.Context) error {
	notReady := matching(corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule})
	return controller.Wait(ctx, func() error {
		for _, name := range c.initial {
			n, err := c.nodes.Get(name)
			if err != nil || readyStatus(n) != corev1.ConditionTrue || slices.ContainsFunc(n.Spec.Taints, notReady) {
				return errNotUntainted(name)
			}
		}
		nodes, err := c.nodes.List(labels.Everything())
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if readyStatus(n) == corev1.ConditionTrue && slices.ContainsFunc(n.Spec.Taints, notReady) {
				return errNotUntainted(n.Name)
			}
		}
		return nil
	})
}

// sync brings one node's conditions, taints and pods in line.
func (c *Controller) sync(ctx context.Context, name string) error {
	if strings.HasPrefix(name, "pod/") {
		return c.syncPod(ctx, name)
	}
	n, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		c.forget(name)
		return nil
	}
	if err != nil {
		return err
	}
	c.registered(n)
	if n, err = c.monitorHealth(ctx, n); err != nil {
		return err
	}
	return c.taint(ctx, n)
}

func (c *Controller) stopTimers() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, t := range c.timers {
		t.Stop()
		delete(c.timers, name)
	}
}

func (c *Controller) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.health, name)
	if t := c.timers[name]; t != nil {
		t.Stop()
		delete(c.timers, name)
	}
}

// registered records RegisteredNode for a node seen for the first time.
func (c *Controller) registered(n *corev1.Node) {
	c.mu.Lock()
	h := c.health[n.Name]
	if h == nil {
		h = &health{probed: c.clock.Now()}
		c.health[n.Name] = h
	}
	first := !h.registered
	h.registered = true
	c.mu.Unlock()
	if first {
		ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}
		c.recorder().Eventf(ref, corev1.EventTypeNormal, "RegisteredNode", "Node %s event: Registered Node %s in Controller", n.Name, n.Name)
	}
}

type errNotUntainted string

func (e errNotUntainted) Error() string {
	return "node " + string(e) + " still has its not-ready taints"
}

func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}
