// Package tainteviction is kube-controller-manager's taint eviction
// controller: a pod on a node with a NoExecute taint it does not tolerate
// is deleted at once; one that tolerates it for tolerationSeconds is
// deleted that long after the controller saw the taint (on the server's
// clock), unless the taint goes first. Before deleting, it records
// TaintManagerEviction and adds the DisruptionTarget condition, as
// v1.37.2 does.
package tainteviction

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

// Controller is the taint eviction controller.
type Controller struct {
	controller.Parts
	client kubernetes.Interface
	clock  clock.WithTickerAndDelayedExecution
	nodes  corev1listers.NodeLister
	pods   corev1listers.PodLister
	queue  *controller.Queue

	mu sync.Mutex
	// due are the pods' scheduled evictions (namespace/name), with their
	// timers.
	due map[string]*eviction
}

type eviction struct {
	at    time.Time
	timer clock.Timer
}

// New returns the controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	c := &Controller{client: cfg.Client, clock: cfg.Clock, nodes: cfg.Informers.Core().V1().Nodes().Lister(),
		pods: cfg.Informers.Core().V1().Pods().Lister(), queue: controller.NewQueue("taint_eviction_controller", cfg.QueueMetrics),
		due: map[string]*eviction{}}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	c.Name, c.Observer, c.Queues = string(controllers.TaintEviction), controller.NewObserver(cfg.Revisions), []*controller.Queue{c.queue}
	c.Events = controller.NewEvents(c.client)
	pod := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			c.queue.Add(p.Namespace + "/" + p.Name)
		}
	}
	if err := c.Observer.Watch(corev1.Resource("pods"), cfg.Informers.Core().V1().Pods().Informer(),
		cache.ResourceEventHandlerFuncs{AddFunc: pod, UpdateFunc: func(_, o any) { pod(o) }, DeleteFunc: pod}); err != nil {
		return nil, err
	}
	node := func(obj any) { c.nodeChanged(obj) }
	return c, c.Observer.Watch(corev1.Resource("nodes"), cfg.Informers.Core().V1().Nodes().Informer(),
		cache.ResourceEventHandlerFuncs{AddFunc: node, UpdateFunc: func(_, o any) { node(o) }})
}

// nodeChanged looks again at the node's pods.
func (c *Controller) nodeChanged(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	pods, _ := c.pods.List(labels.Everything())
	for _, p := range pods {
		if p.Spec.NodeName == n.Name {
			c.queue.Add(p.Namespace + "/" + p.Name)
		}
	}
}

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	defer c.ShutDown()
	defer c.stopTimers()
	defer c.Events.Start()()
	c.queue.Run(ctx, 2, c.sync)
}

// sync schedules, cancels or carries out the eviction of a pod.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	pod, err := c.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && (pod.DeletionTimestamp != nil || pod.Spec.NodeName == "")) {
		c.cancel(key, nil)
		return nil
	}
	if err != nil {
		return err
	}
	node, err := c.nodes.Get(pod.Spec.NodeName)
	if err != nil {
		c.cancel(key, pod)
		return nil
	}
	wait, evict := tolerated(node, pod)
	if !evict {
		c.cancel(key, pod)
		return nil
	}
	at := c.schedule(key, wait)
	if c.clock.Now().Before(at) {
		return nil
	}
	return c.evict(ctx, key, pod)
}

// tolerated: whether a NoExecute taint of the node calls for the pod's
// eviction, and after how long (the least tolerationSeconds of the
// tolerations that match; 0 when one taint is not tolerated at all).
func tolerated(node *corev1.Node, pod *corev1.Pod) (time.Duration, bool) {
	wait, evict := time.Duration(math.MaxInt64), false
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		var matched []corev1.Toleration
		for _, tol := range pod.Spec.Tolerations {
			if tol.ToleratesTaint(klog.Background(), t, false) {
				matched = append(matched, tol)
			}
		}
		if len(matched) == 0 && !corev1helpers.TolerationsTolerateTaint(klog.Background(), pod.Spec.Tolerations, t, false) {
			return 0, true
		}
		for _, tol := range matched {
			if tol.TolerationSeconds != nil {
				wait, evict = min(wait, time.Duration(max(0, *tol.TolerationSeconds))*time.Second), true
			}
		}
	}
	return wait, evict
}

// schedule returns when the pod's eviction is due: wait after the first
// time it was called for, with a timer that syncs the pod then.
func (c *Controller) schedule(key string, wait time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.due[key]; e != nil {
		return e.at
	}
	e := &eviction{at: c.clock.Now().Add(wait)}
	if wait > 0 {
		e.timer = c.clock.AfterFunc(wait, func() { c.queue.Add(key) })
	}
	c.due[key] = e
	return e.at
}

// cancel drops a scheduled eviction; with pod, one that was pending is
// recorded as cancelled, as upstream.
func (c *Controller) cancel(key string, pod *corev1.Pod) {
	c.mu.Lock()
	e := c.due[key]
	delete(c.due, key)
	c.mu.Unlock()
	if e == nil {
		return
	}
	if e.timer != nil {
		e.timer.Stop()
	}
	if pod != nil && c.clock.Now().Before(e.at) {
		c.recorder().Eventf(ref(pod), corev1.EventTypeNormal, "TaintManagerEviction", "Cancelling deletion of Pod %s/%s", pod.Namespace, pod.Name)
	}
}

func ref(pod *corev1.Pod) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name}
}

func (c *Controller) recorder() record.EventRecorder {
	return c.Events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "taint-eviction-controller"})
}

// evict records the eviction, marks the pod a disruption target and
// deletes it gracefully.
func (c *Controller) evict(ctx context.Context, key string, pod *corev1.Pod) error {
	c.recorder().Eventf(ref(pod), corev1.EventTypeNormal, "TaintManagerEviction", "Marking for deletion Pod %s/%s", pod.Namespace, pod.Name)
	if err := c.markDisruptionTarget(ctx, pod); err != nil {
		return err
	}
	err := c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("evict pod %s: %w", key, err)
	}
	c.mu.Lock()
	delete(c.due, key)
	c.mu.Unlock()
	return nil
}

// markDisruptionTarget adds the DisruptionTarget condition, a strategic
// merge patch of the pod's status.
func (c *Controller) markDisruptionTarget(ctx context.Context, pod *corev1.Pod) error {
	status := pod.Status.DeepCopy()
	status.Conditions = append(status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: "DeletionByTaintManager", Message: "Taint manager: deleting due to NoExecute taint",
		ObservedGeneration: pod.Generation, LastTransitionTime: metav1.NewTime(c.clock.Now())})
	patch, err := controller.TwoWayPatch(&corev1.Pod{Status: pod.Status}, &corev1.Pod{Status: *status})
	if err != nil {
		return err
	}
	_, err = c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (c *Controller) stopTimers() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, e := range c.due {
		if e.timer != nil {
			e.timer.Stop()
		}
		delete(c.due, key)
	}
}
