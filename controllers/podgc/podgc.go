// Package podgc is kube-controller-manager's pod garbage collector
// (pod-garbage-collector). Every 20 seconds of the server's clock it
// deletes, in upstream's order: terminated pods past the threshold (12500,
// evicted then oldest first); terminating pods on nodes that are not Ready
// and tainted node.kubernetes.io/out-of-service; pods bound to nodes that
// are gone (absent from the informer for 40 s, then confirmed by a live
// read), after marking them Failed with a DisruptionTarget condition
// (DeletionByPodGC); and terminating pods bound to no node. A pod still
// running is marked Failed before it is deleted, with no grace period.
//
// Its passes follow Config.Clock: a test with a fake clock steps it by
// 20 s for a pass, and WaitIdle waits for a pass that is due.
package podgc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

// Upstream's names and defaults.
const (
	// clientName ends the controller's user agent, as
	// kube-controller-manager names its client.
	clientName = "pod-garbage-collector"
	// terminatedPodThreshold is --terminated-pod-gc-threshold's default.
	terminatedPodThreshold = 12500
	// gcCheckPeriod is the time between the end of a pass and the next.
	gcCheckPeriod = 20 * time.Second
	// quarantineTime is how long a node must be missing from the informer
	// before it is read to confirm that it is gone.
	quarantineTime = 40 * time.Second
)

// Controller is the pod garbage collector.
type Controller struct {
	controller.Parts
	client kubernetes.Interface
	pods   corev1listers.PodLister
	nodes  corev1listers.NodeLister
	clock  clock.WithTicker
	// threshold is terminatedPodThreshold; above it terminated pods are
	// deleted (none if it is not positive).
	threshold int
	// quarantine is when each missing node may be read to confirm it is
	// gone; only the pass touches it.
	quarantine map[string]time.Time

	mu sync.Mutex
	// running is set during a pass; due is when the next one runs.
	running bool
	due     time.Time
	passes  atomic.Uint64
}

// New returns the controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	client, err := controller.NamedClient(cfg, clientName)
	if err != nil {
		return nil, err
	}
	core := cfg.Informers.Core().V1()
	c := &Controller{client: client, pods: core.Pods().Lister(), nodes: core.Nodes().Lister(), clock: cfg.Clock,
		threshold: terminatedPodThreshold, quarantine: map[string]time.Time{}}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	c.Name, c.Observer, c.Busy = string(controllers.PodGC), controller.NewObserver(cfg.Revisions), c.busy
	// The passes read the listers only; watching tells WaitIdle when they
	// have caught up.
	err = errors.Join(
		c.Observer.Watch(corev1.Resource("pods"), core.Pods().Informer(), cache.ResourceEventHandlerFuncs{}),
		c.Observer.Watch(corev1.Resource("nodes"), core.Nodes().Informer(), cache.ResourceEventHandlerFuncs{}),
	)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Run collects until ctx ends: a pass once the informers have listed,
// then one gcCheckPeriod after each pass ends (upstream's
// wait.UntilWithContext), on the controller's clock.
func (c *Controller) Run(ctx context.Context) {
	err := controller.Wait(ctx, func() error {
		if !c.Observer.Synced() {
			return errors.New("informers not synced")
		}
		return nil
	})
	if err != nil {
		return
	}
	for {
		c.pass(ctx)
		timer := c.nextPass()
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C():
		}
	}
}

// nextPass starts the timer of the next pass and notes when it is due,
// together: a clock a test steps meanwhile cannot leave a pass due that no
// timer will start (busy would report it until WaitIdle's deadline).
func (c *Controller) nextPass() clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.due = c.clock.Now().Add(gcCheckPeriod)
	return c.clock.NewTimer(gcCheckPeriod)
}

// pass runs the four collections; until the next is due (nextPass), one
// counts as due.
func (c *Controller) pass(ctx context.Context) {
	c.mu.Lock()
	c.running = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.running = false
		c.passes.Add(1)
	}()
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		klog.FromContext(ctx).Error(err, "Error while listing all pods")
		return
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		klog.FromContext(ctx).Error(err, "Error while listing all nodes")
		return
	}
	if c.threshold > 0 {
		c.gcTerminated(ctx, pods)
	}
	c.gcTerminating(ctx, pods)
	c.gcOrphaned(ctx, pods, nodes)
	c.gcUnscheduledTerminating(ctx, pods)
}

// busy reports a pass running or due (the clock has passed its time: a
// fake clock was stepped, and the pass's timer has fired or is about to).
func (c *Controller) busy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.running:
		return errors.New("collecting pods")
	case !c.clock.Now().Before(c.due):
		return fmt.Errorf("a pass is due (at %v)", c.due)
	}
	return nil
}

// Finished counts the passes, so that WaitIdle looks again at what other
// controllers make of a pass's deletions.
func (c *Controller) Finished() uint64 { return c.passes.Load() }
