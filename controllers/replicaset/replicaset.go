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

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	if err := controller.AddOwnerIndex(c.pods); err != nil {
		return nil, err
	}
	return c, errors.Join(
		c.Observer.Watch(k.resource, k.informer, cache.ResourceEventHandlerFuncs{
			AddFunc: c.ownerChanged, UpdateFunc: c.ownerUpdated, DeleteFunc: c.ownerDeleted}),
		c.Observer.Watch(corev1.Resource("pods"), pods, c.podEvents()),
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

// podEvents routes pod events to the controllers of this kind: a pod
// seen created or deleted settles its owner's expectations; one being
// deleted is handled as deleted at once (and its old labels' owner too),
// so that its replacement is not held up by its grace period.
func (c *Controller) podEvents() *controller.Dependents[*corev1.Pod, *appsv1.ReplicaSet] {
	return &controller.Dependents[*corev1.Pod, *appsv1.ReplicaSet]{
		Queue: c.queue, Kind: c.kind.gvk.Kind, Get: c.kind.get, List: c.kind.list,
		Selector:    func(rs *appsv1.ReplicaSet) *metav1.LabelSelector { return rs.Spec.Selector },
		Terminating: controller.TerminatingDeletesRelabelled,
		Created:     func(rs *appsv1.ReplicaSet, _ *corev1.Pod) { c.expect.Created(key(rs)) },
		Updated:     c.podReadied,
		Deleted:     func(rs *appsv1.ReplicaSet, pod *corev1.Pod) { c.expect.Deleted(key(rs), key(pod)) },
	}
}

// podReadied queues rs again after minReadySeconds when its pod just
// became ready, to count it available then.
func (c *Controller) podReadied(rs *appsv1.ReplicaSet, old, pod *corev1.Pod) {
	if !controller.PodReady(old) && controller.PodReady(pod) && rs.Spec.MinReadySeconds > 0 {
		c.queue.AddAfterOn(c.clock, key(rs), seconds(rs.Spec.MinReadySeconds))
	}
}
