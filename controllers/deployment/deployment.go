// Package deployment is kube-controller-manager's Deployment controller
// ("deployment"), as v1.37.2 runs it:
//
//   - a Deployment owns the ReplicaSets its selector matches (adopting
//     orphans, releasing the others, as the ReplicaSet controller its
//     pods); the one whose template equals its own (the pod-template-hash
//     label aside) is the new one, created when missing as
//     "<name>-<pod-template-hash>" (upstream's hash of the template and
//     status.collisionCount), labelled and annotated as upstream
//     (deployment.kubernetes.io/revision, desired-replicas, max-replicas,
//     revision-history, the Deployment's own annotations);
//   - RollingUpdate scales the new ReplicaSet up within maxSurge and the old
//     ones down within maxUnavailable (unhealthy replicas first), reading
//     availability from the ReplicaSets' status; Recreate scales the old
//     ones to zero, waits until their pods are gone, then scales the new
//     one up; a change of replicas during a rollout is spread over the
//     ReplicaSets in proportion; a paused Deployment only scales;
//   - old ReplicaSets beyond revisionHistoryLimit are deleted, oldest
//     revision first;
//   - the status counts the ReplicaSets' replicas; the Available and
//     Progressing conditions carry upstream's reasons and messages,
//     progressDeadlineSeconds included (on the server's clock);
//     ReplicaFailure is copied from a ReplicaSet.
//
// `kubectl rollout undo` patches the template, which this handles as any
// template change. Writes are made as deployment-controller (field manager
// kube-controller-manager), events with that source. As upstream, a sync
// never rereads what it wrote: a second write of the Deployment in one sync
// meets a conflict and the sync is retried. Left out: the deprecated
// rollback annotation (deprecated.deployment.rollback.to, from the
// extensions/v1beta1 rollback API, which no client of apps/v1 sends).
package deployment

import (
	"context"
	"errors"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

const (
	clientName = "deployment-controller"
	workers    = 5
)

// Controller is the Deployment controller.
type Controller struct {
	controller.Parts
	client      kubernetes.Interface
	deployments appslisters.DeploymentLister
	replicaSets appslisters.ReplicaSetLister
	pods        corev1listers.PodLister
	queue       *controller.Queue
	clock       clock.WithTickerAndDelayedExecution
}

// New returns the controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	client, err := controller.NamedClient(cfg, clientName)
	if err != nil {
		return nil, err
	}
	apps := cfg.Informers.Apps().V1()
	c := &Controller{client: client, deployments: apps.Deployments().Lister(), replicaSets: apps.ReplicaSets().Lister(),
		pods: cfg.Informers.Core().V1().Pods().Lister(), queue: controller.NewQueue("deployment", cfg.QueueMetrics), clock: cfg.Clock}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	c.Name, c.Observer, c.Queues = string(controllers.Deployment), controller.NewObserver(cfg.Revisions), []*controller.Queue{c.queue}
	c.Events = controller.NewEvents(client)
	d := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if d, ok := obj.(*appsv1.Deployment); ok {
			c.queue.Add(d.Namespace + "/" + d.Name)
		}
	}
	return c, errors.Join(
		c.Observer.Watch(appsv1.Resource("deployments"), apps.Deployments().Informer(),
			cache.ResourceEventHandlerFuncs{AddFunc: d, UpdateFunc: func(_, o any) { d(o) }, DeleteFunc: d}),
		c.Observer.Watch(appsv1.Resource("replicasets"), apps.ReplicaSets().Informer(),
			cache.ResourceEventHandlerFuncs{AddFunc: c.replicaSetAdded, UpdateFunc: c.replicaSetUpdated, DeleteFunc: c.replicaSetDeleted}),
		c.Observer.Watch(corev1.Resource("pods"), cfg.Informers.Core().V1().Pods().Informer(),
			cache.ResourceEventHandlerFuncs{DeleteFunc: c.podDeleted}),
	)
}

// Run syncs until ctx ends, with upstream's 5 workers.
func (c *Controller) Run(ctx context.Context) {
	defer c.Events.Start()()
	c.queue.Run(ctx, workers, c.sync)
}

func (c *Controller) recorder() record.EventRecorder {
	return c.Events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: clientName})
}

// owner is the key of the Deployment the controller reference names, if
// it is there.
func (c *Controller) owner(ns string, ref *metav1.OwnerReference) string {
	if ref == nil || ref.Kind != "Deployment" {
		return ""
	}
	d, err := c.deployments.Deployments(ns).Get(ref.Name)
	if err != nil || d.UID != ref.UID {
		return ""
	}
	return ns + "/" + d.Name
}

// selecting queues the Deployments whose selector matches an orphan
// ReplicaSet's labels.
func (c *Controller) selecting(rs *appsv1.ReplicaSet) {
	if len(rs.Labels) == 0 {
		return
	}
	all, err := c.deployments.Deployments(rs.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, d := range all {
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(rs.Labels)) {
			continue
		}
		c.queue.Add(d.Namespace + "/" + d.Name)
	}
}

func (c *Controller) replicaSetAdded(obj any) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		return
	}
	if rs.DeletionTimestamp != nil {
		c.replicaSetDeleted(rs)
		return
	}
	if ref := metav1.GetControllerOf(rs); ref != nil {
		if k := c.owner(rs.Namespace, ref); k != "" {
			c.queue.Add(k)
		}
		return
	}
	c.selecting(rs)
}

func (c *Controller) replicaSetUpdated(oldObj, newObj any) {
	old, ok1 := oldObj.(*appsv1.ReplicaSet)
	rs, ok2 := newObj.(*appsv1.ReplicaSet)
	if !ok1 || !ok2 || rs.ResourceVersion == old.ResourceVersion {
		return
	}
	oldRef, ref := metav1.GetControllerOf(old), metav1.GetControllerOf(rs)
	refChanged := !apiequality.Semantic.DeepEqual(oldRef, ref)
	if refChanged && oldRef != nil {
		if k := c.owner(old.Namespace, oldRef); k != "" {
			c.queue.Add(k)
		}
	}
	if ref != nil {
		if k := c.owner(rs.Namespace, ref); k != "" {
			c.queue.Add(k)
		}
		return
	}
	if refChanged || !apiequality.Semantic.DeepEqual(old.Labels, rs.Labels) {
		c.selecting(rs)
	}
}

func (c *Controller) replicaSetDeleted(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if rs, ok := obj.(*appsv1.ReplicaSet); ok {
		if k := c.owner(rs.Namespace, metav1.GetControllerOf(rs)); k != "" {
			c.queue.Add(k)
		}
	}
}

// podDeleted queues a Recreate Deployment whose old pods may be gone.
func (c *Controller) podDeleted(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "ReplicaSet" {
		return
	}
	rs, err := c.replicaSets.ReplicaSets(pod.Namespace).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return
	}
	k := c.owner(rs.Namespace, metav1.GetControllerOf(rs))
	if k == "" {
		return
	}
	if d, err := c.deployments.Deployments(rs.Namespace).Get(strings.TrimPrefix(k, rs.Namespace+"/")); err == nil &&
		d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		c.queue.Add(k)
	}
}
