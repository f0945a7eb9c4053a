// Package tainteviction is kube-controller-manager's taint eviction
// controller: a pod on a node with a NoExecute taint it does not tolerate
// is deleted at once; one that tolerates it for tolerationSeconds is
// deleted that long after the controller saw the taint (on the server's
// clock), unless the taint goes first. Before deleting, it records
// TaintManagerEviction and adds the DisruptionTarget condition, as
// v1.37.2 does.
//
// As v1.37.2's, it acts on changes of a node's NoExecute taints and of a
// pod's node or tolerations only (a pod's other updates, such as the
// status it gets as it is evicted, are not looked at: it is evicted
// once), keeps the taints it last saw of each node, and runs each
// eviction once: one due at once cannot be cancelled, one scheduled for
// later can (recorded as cancelled).
package tainteviction

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
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

	// processing serializes the syncs of nodes and pods (upstream's node
	// and pod updates of one node go to one worker, nodes first): the
	// evictions run alongside.
	processing sync.Mutex

	mu sync.Mutex
	// tainted are the NoExecute taints of each node that has some, as
	// the last sync of the node saw them.
	tainted map[string][]corev1.Taint
	// due are the pods' evictions (namespace/name) not finished, as
	// upstream's TimedWorkerQueue holds them; works those whose eviction
	// is queued, by their number in the queue's key.
	due   map[string]*eviction
	works map[uint64]*eviction
	seq   uint64
}

// eviction is a pod's eviction: at once (running from the start: a
// cancel neither stops it nor records it, as upstream's nil worker), or
// at a time, with a timer, until cancelled.
type eviction struct {
	key         string
	n           uint64 // its number in works
	created, at time.Time
	timer       clock.Timer
	immediate   bool
}

// The queue's keys: a node's taints changed, a pod's node or tolerations
// changed (the node it was on, its namespace and name), a pod's eviction
// is due (its number in works).
const (
	nodeKey  = "node/"
	podKey   = "pod/"
	evictKey = "evict/"
)

// New returns the controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	c := &Controller{client: cfg.Client, clock: cfg.Clock, nodes: cfg.Informers.Core().V1().Nodes().Lister(),
		pods: cfg.Informers.Core().V1().Pods().Lister(), queue: controller.NewQueue("taint_eviction_controller", cfg.QueueMetrics),
		tainted: map[string][]corev1.Taint{}, due: map[string]*eviction{}, works: map[uint64]*eviction{}}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	c.Name, c.Observer, c.Queues = string(controllers.TaintEviction), controller.NewObserver(cfg.Revisions), []*controller.Queue{c.queue}
	c.Events = controller.NewEvents(c.client)
	if err := c.Observer.Watch(corev1.Resource("pods"), cfg.Informers.Core().V1().Pods().Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { c.podChanged(nil, o) },
		UpdateFunc: c.podChanged,
		DeleteFunc: func(o any) { c.podChanged(o, nil) },
	}); err != nil {
		return nil, err
	}
	return c, c.Observer.Watch(corev1.Resource("nodes"), cfg.Informers.Core().V1().Nodes().Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { c.nodeChanged(nil, o) },
		UpdateFunc: c.nodeChanged,
		DeleteFunc: func(o any) { c.nodeChanged(o, nil) },
	})
}

// podChanged queues a pod added or deleted, or whose node or tolerations
// changed (upstream's PodUpdated).
func (c *Controller) podChanged(oldObj, newObj any) {
	old, cur := podOf(oldObj), podOf(newObj)
	if old != nil && cur != nil && old.Spec.NodeName == cur.Spec.NodeName && equality.Semantic.DeepEqual(old.Spec.Tolerations, cur.Spec.Tolerations) {
		return
	}
	p := cur
	if p == nil {
		p = old
	}
	if p != nil && p.Spec.NodeName != "" {
		c.queue.Add(podKey + p.Spec.NodeName + "/" + p.Namespace + "/" + p.Name)
	}
}

// nodeChanged queues a node added or deleted, or whose NoExecute taints
// changed (upstream's NodeUpdated).
func (c *Controller) nodeChanged(oldObj, newObj any) {
	old, cur := nodeOf(oldObj), nodeOf(newObj)
	if old != nil && cur != nil && equality.Semantic.DeepEqual(noExecute(old.Spec.Taints), noExecute(cur.Spec.Taints)) {
		return
	}
	if n := cmp.Or(cur, old); n != nil {
		c.queue.Add(nodeKey + n.Name)
	}
}

func podOf(obj any) *corev1.Pod {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, _ := obj.(*corev1.Pod)
	return p
}

func nodeOf(obj any) *corev1.Node {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	n, _ := obj.(*corev1.Node)
	return n
}

func noExecute(taints []corev1.Taint) []corev1.Taint {
	out := []corev1.Taint{}
	for _, t := range taints {
		if t.Effect == corev1.TaintEffectNoExecute {
			out = append(out, t)
		}
	}
	return out
}

// Run runs the controller until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	defer c.ShutDown()
	defer c.stopTimers()
	defer c.Events.Start()()
	c.queue.Run(ctx, 2, c.sync)
}

func (c *Controller) sync(ctx context.Context, key string) error {
	switch {
	case strings.HasPrefix(key, nodeKey):
		return c.syncNode(strings.TrimPrefix(key, nodeKey))
	case strings.HasPrefix(key, podKey):
		node, pod, _ := strings.Cut(strings.TrimPrefix(key, podKey), "/")
		return c.syncPod(node, pod)
	case strings.HasPrefix(key, evictKey):
		n, _ := strconv.ParseUint(strings.TrimPrefix(key, evictKey), 10, 64)
		c.evict(ctx, n)
	}
	return nil
}

// syncNode records the node's NoExecute taints and looks at each of its
// pods: with no taint left, their evictions are cancelled.
func (c *Controller) syncNode(name string) error {
	c.processing.Lock()
	defer c.processing.Unlock()
	node, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		c.mu.Lock()
		delete(c.tainted, name)
		c.mu.Unlock()
		return nil
	}
	if err != nil {
		return err
	}
	taints := noExecute(node.Spec.Taints)
	c.mu.Lock()
	if len(taints) == 0 {
		delete(c.tainted, name)
	} else {
		c.tainted[name] = taints
	}
	c.mu.Unlock()
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return err
	}
	now := c.clock.Now()
	for _, p := range pods {
		if p.Spec.NodeName != name {
			continue
		}
		if len(taints) == 0 {
			c.cancel(p.Namespace + "/" + p.Name)
			continue
		}
		c.process(p.Namespace+"/"+p.Name, p.Spec.Tolerations, taints, now)
	}
	return nil
}

// syncPod looks at a pod (namespace/name) that was on node: gone, its
// eviction is cancelled; still there, on a node with NoExecute taints, it
// is processed.
func (c *Controller) syncPod(node, key string) error {
	c.processing.Lock()
	defer c.processing.Unlock()
	ns, name, _ := strings.Cut(key, "/")
	pod, err := c.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.cancel(key)
		return nil
	}
	if err != nil || pod.Spec.NodeName != node {
		return err
	}
	c.mu.Lock()
	taints, ok := c.tainted[node]
	c.mu.Unlock()
	if ok {
		c.process(key, pod.Spec.Tolerations, taints, c.clock.Now())
	}
	return nil
}

// process schedules, keeps or cancels the eviction of the pod (upstream's
// processPodOnNode): a taint not tolerated evicts it now, tolerations
// with tolerationSeconds after the least of them (counted from the first
// time it was scheduled: one scheduled is kept), tolerations for ever not
// at all.
func (c *Controller) process(key string, tolerations []corev1.Toleration, taints []corev1.Taint, now time.Time) {
	if len(taints) == 0 {
		c.cancel(key)
	}
	used, all := matching(taints, tolerations)
	if !all {
		c.cancel(key)
		c.schedule(key, now, now)
		return
	}
	wait := minToleration(used)
	if wait < 0 {
		c.cancel(key)
		return
	}
	c.mu.Lock()
	_, scheduled := c.due[key]
	c.mu.Unlock()
	if scheduled {
		// Upstream keeps it unless it was created at this very instant
		// (then it is cancelled and made again, with an event): on a
		// real clock never, on a test's fake clock always; kept.
		return
	}
	c.schedule(key, now, now.Add(wait))
}

// matching returns, for each taint, the first toleration that tolerates
// it, and whether each is tolerated (upstream's GetMatchingTolerations).
func matching(taints []corev1.Taint, tolerations []corev1.Toleration) ([]corev1.Toleration, bool) {
	var used []corev1.Toleration
	for i := range taints {
		j := slices.IndexFunc(tolerations, func(t corev1.Toleration) bool { return t.ToleratesTaint(klog.Background(), &taints[i], false) })
		if j < 0 {
			return nil, false
		}
		used = append(used, tolerations[j])
	}
	return used, true
}

// minToleration is the least tolerationSeconds of tolerations: 0 for
// none, or one of 0 or less; -1 when none has any (for ever).
func minToleration(tolerations []corev1.Toleration) time.Duration {
	if len(tolerations) == 0 {
		return 0
	}
	least := int64(math.MaxInt64)
	for _, t := range tolerations {
		if t.TolerationSeconds == nil {
			continue
		}
		if *t.TolerationSeconds <= 0 {
			return 0
		}
		least = min(least, *t.TolerationSeconds)
	}
	if least == math.MaxInt64 {
		return -1
	}
	return time.Duration(least) * time.Second
}

// schedule adds the pod's eviction, due at at, unless it has one
// (upstream's AddWork): due at once, it is queued now and counts as
// running; otherwise a timer queues it then.
func (c *Controller) schedule(key string, created, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.due[key] != nil {
		return
	}
	c.seq++
	e, n := &eviction{key: key, n: c.seq, created: created, at: at}, c.seq
	c.due[key], c.works[n] = e, e
	if delay := at.Sub(created); delay > 0 {
		e.timer = c.clock.AfterFunc(delay, func() { c.queue.Add(evictKey + strconv.FormatUint(n, 10)) })
		return
	}
	e.immediate = true
	c.queue.Add(evictKey + strconv.FormatUint(n, 10))
}

// cancel forgets the pod's eviction (upstream's cancelWorkWithEvent): one
// with a timer is stopped and recorded as cancelled; one running at once
// goes on, unrecorded.
func (c *Controller) cancel(key string) {
	c.mu.Lock()
	e := c.due[key]
	delete(c.due, key)
	if e != nil && !e.immediate {
		delete(c.works, e.n) // its timer may have fired: it is not run
	}
	c.mu.Unlock()
	if e == nil || e.immediate {
		return
	}
	e.timer.Stop()
	ns, name, _ := strings.Cut(key, "/")
	c.recorder().Eventf(ref(ns, name), corev1.EventTypeNormal, "TaintManagerEviction", "Cancelling deletion of Pod %s", key)
}

func ref(ns, name string) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: name}
}

func (c *Controller) recorder() record.EventRecorder {
	return c.Events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "taint-eviction-controller"})
}

// evictAttempts is how many times an eviction tries to mark and delete
// its pod before it gives up (deletePodHandler's retries).
const evictAttempts = 5

// evict carries out the eviction numbered n unless it was cancelled
// (upstream's deletePodHandler): records it, marks the pod a disruption
// target and deletes it gracefully, then forgets it, done or not (a
// failure is logged, as upstream's; the pod's next change schedules it
// again).
func (c *Controller) evict(ctx context.Context, n uint64) {
	c.mu.Lock()
	e := c.works[n]
	delete(c.works, n)
	c.mu.Unlock()
	if e == nil {
		return // cancelled
	}
	ns, name, _ := strings.Cut(e.key, "/")
	c.recorder().Eventf(ref(ns, name), corev1.EventTypeNormal, "TaintManagerEviction", "Marking for deletion Pod %s", e.key)
	var err error
	for range evictAttempts {
		if err = c.markAndDelete(ctx, ns, name); err == nil || ctx.Err() != nil || apierrors.IsNotFound(err) {
			break
		}
	}
	if err != nil && !apierrors.IsNotFound(err) { // gone: nothing left to evict
		utilruntime.HandleErrorWithContext(ctx, err, "evict pod", "pod", e.key)
	}
	c.mu.Lock()
	if c.due[e.key] == e {
		delete(c.due, e.key)
	}
	c.mu.Unlock()
}

// markAndDelete adds the DisruptionTarget condition to the pod as the
// server has it, unless it has that condition already, then deletes it
// (upstream's addConditionAndDeletePod).
func (c *Controller) markAndDelete(ctx context.Context, ns, name string) error {
	pods := c.client.CoreV1().Pods(ns)
	pod, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	status := pod.Status.DeepCopy()
	if controller.UpdatePodCondition(status, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		ObservedGeneration: pod.Generation, Reason: "DeletionByTaintManager", Message: "Taint manager: deleting due to NoExecute taint"},
		metav1.NewTime(c.clock.Now())) {
		if _, err := controller.PatchPodStatus(ctx, c.client, pod, *status); err != nil {
			return err
		}
	}
	return pods.Delete(ctx, name, metav1.DeleteOptions{})
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
	clear(c.works)
}
