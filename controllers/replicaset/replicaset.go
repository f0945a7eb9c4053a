// Package replicaset is kube-controller-manager's ReplicaSet controller
// ("replicaset") and, the same code over a conversion, its
// ReplicationController manager ("replicationcontroller"), as v1.37.2 runs
// them:
//
//   - a ReplicaSet owns the active pods (not terminal, not being deleted)
//     its selector matches: it adopts orphans (a strategic merge patch of
//     the pod's ownerReferences, guarded by the pod's uid, after reading
//     itself uncached to see it is not being deleted) and releases the pods
//     whose labels no longer match;
//   - it creates the missing pods from its template (generateName
//     "<name>-", the template's labels, annotations and finalizers, a
//     controller reference) in slow-start batches of 1, 2, 4, ... (at most
//     500 a sync), recording SuccessfulCreate or FailedCreate; it deletes
//     the pods over its replicas, all at once, the cheapest first by
//     upstream's ranking (unscheduled, pending, not ready, deletion cost,
//     pods on crowded nodes, recently ready, restarted, new), recording
//     SuccessfulDelete or FailedDelete;
//   - expectations keep a sync from creating or deleting again before the
//     informer has seen its last creates and deletes (or 5 minutes pass);
//   - its status counts replicas, fully labeled, ready, available (ready
//     for minReadySeconds) and, for ReplicaSets, terminating pods; the
//     ReplicaFailure condition carries a create or delete error; it is
//     written with a PUT of /status, retried once on a fresh read.
//
// Writes are made with a client named replicaset-controller or
// replication-controller (field manager kube-controller-manager), events
// with those names as their source. Left out: the read-your-writes wait of
// StaleControllerConsistencyReplicaSet (the informers of an in-process
// server catch up within the sync; expectations and resource versions
// guard the writes) and the 12 h informer resync.
package replicaset

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

// Upstream's figures.
const (
	burstReplicas = 500
	workers       = 5
)

// Controller is the ReplicaSet controller, or the ReplicationController
// manager.
type Controller struct {
	controller.Parts
	kind   *kind
	client kubernetes.Interface
	pods   cache.Indexer
	queue  *controller.Queue
	clock  clock.WithTickerAndDelayedExecution
	expect *controller.Expectations
}

// NewReplicaSets returns the ReplicaSet controller of cfg's server.
func NewReplicaSets(cfg controllers.Config) (*Controller, error) {
	return newController(cfg, replicaSets(cfg))
}

// NewReplicationControllers returns the ReplicationController manager of
// cfg's server.
func NewReplicationControllers(cfg controllers.Config) (*Controller, error) {
	return newController(cfg, replicationControllers(cfg))
}

func newController(cfg controllers.Config, k *kind) (*Controller, error) {
	client, err := controller.NamedClient(cfg, k.clientName)
	if err != nil {
		return nil, err
	}
	k.bind(client)
	pods := cfg.Informers.Core().V1().Pods().Informer()
	c := &Controller{kind: k, client: client, pods: pods.GetIndexer(), queue: controller.NewQueue(k.queueName, cfg.QueueMetrics),
		clock: cfg.Clock, expect: controller.NewExpectations()}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	c.Name, c.Observer, c.Queues = string(k.name), controller.NewObserver(cfg.Revisions), []*controller.Queue{c.queue}
	c.Events = controller.NewEvents(client)
	if _, ok := c.pods.GetIndexers()[ownerIndex]; !ok {
		if err := c.pods.AddIndexers(cache.Indexers{ownerIndex: podOwnerKeys}); err != nil {
			return nil, fmt.Errorf("index pods by owner: %w", err)
		}
	}
	return c, errors.Join(
		c.Observer.Watch(k.resource, k.informer, cache.ResourceEventHandlerFuncs{
			AddFunc: c.ownerChanged, UpdateFunc: c.ownerUpdated, DeleteFunc: c.ownerDeleted}),
		c.Observer.Watch(corev1.Resource("pods"), pods, cache.ResourceEventHandlerFuncs{
			AddFunc: c.podAdded, UpdateFunc: c.podUpdated, DeleteFunc: c.podDeleted}),
	)
}

// Run syncs until ctx ends, with upstream's 5 workers.
func (c *Controller) Run(ctx context.Context) {
	defer c.Events.Start()()
	c.queue.Run(ctx, workers, c.sync)
}

func (c *Controller) recorder() record.EventRecorder {
	return c.Events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: c.kind.clientName})
}

func key(m metav1.Object) string { return m.GetNamespace() + "/" + m.GetName() }

func (c *Controller) ownerChanged(obj any) {
	if m, ok := c.kind.meta(obj); ok {
		c.queue.Add(key(m))
	}
}

// ownerUpdated handles an owner replaced under its name (another uid) as
// the old one deleted first.
func (c *Controller) ownerUpdated(oldObj, obj any) {
	if old, ok := c.kind.meta(oldObj); ok {
		if cur, ok := c.kind.meta(obj); ok && old.GetUID() != cur.GetUID() {
			c.ownerDeleted(oldObj)
		}
	}
	c.ownerChanged(obj)
}

func (c *Controller) ownerDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if m, ok := c.kind.meta(obj); ok {
		c.expect.Forget(key(m))
		c.queue.Add(key(m))
	}
}

// owner is the key of the controller of this kind that pod's controller
// reference resolves to ("" when it is another's or gone).
func (c *Controller) owner(pod *corev1.Pod) string {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != c.kind.gvk.Kind {
		return ""
	}
	rs, err := c.kind.get(pod.Namespace, ref.Name)
	if err != nil || rs.UID != ref.UID {
		return ""
	}
	return key(rs)
}

// selecting queues the controllers of this kind whose selector matches an
// orphan pod.
func (c *Controller) selecting(pod *corev1.Pod) {
	if len(pod.Labels) == 0 {
		return
	}
	all, err := c.kind.list(pod.Namespace)
	if err != nil {
		return
	}
	for _, rs := range all {
		sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		c.queue.Add(key(rs))
	}
}

func (c *Controller) podAdded(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if pod.DeletionTimestamp != nil {
		c.podDeleted(pod)
		return
	}
	if metav1.GetControllerOf(pod) != nil {
		if k := c.owner(pod); k != "" {
			c.expect.Created(k)
			c.queue.Add(k)
		}
		return
	}
	c.selecting(pod)
}

func (c *Controller) podUpdated(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Pod)
	pod, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 || pod.ResourceVersion == old.ResourceVersion {
		return
	}
	relabelled := !apiequality.Semantic.DeepEqual(pod.Labels, old.Labels)
	if pod.DeletionTimestamp != nil {
		c.podDeleted(pod)
		if relabelled {
			c.podDeleted(old)
		}
		return
	}
	oldRef, ref := metav1.GetControllerOf(old), metav1.GetControllerOf(pod)
	refChanged := !apiequality.Semantic.DeepEqual(oldRef, ref)
	if refChanged && oldRef != nil {
		if k := c.owner(old); k != "" {
			c.queue.Add(k)
		}
	}
	if ref != nil {
		c.podOfOwnerUpdated(old, pod)
		return
	}
	if relabelled || refChanged {
		c.selecting(pod)
	}
}

// podOfOwnerUpdated queues the owner of a pod that changed, and again
// after minReadySeconds when it just became ready.
func (c *Controller) podOfOwnerUpdated(old, pod *corev1.Pod) {
	k := c.owner(pod)
	if k == "" {
		return
	}
	c.queue.Add(k)
	if isReady(old) || !isReady(pod) {
		return
	}
	if rs, err := c.kind.get(pod.Namespace, metav1.GetControllerOf(pod).Name); err == nil && rs.Spec.MinReadySeconds > 0 {
		c.queue.AddAfterOn(c.clock, k, seconds(rs.Spec.MinReadySeconds))
	}
}

func (c *Controller) podDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok || metav1.GetControllerOf(pod) == nil {
		return
	}
	if k := c.owner(pod); k != "" {
		c.expect.Deleted(k, key(pod))
		c.queue.Add(k)
	}
}
