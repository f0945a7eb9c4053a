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

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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
			c.replicaSetEvents()),
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

// replicaSetEvents routes ReplicaSet events to the Deployments. An update
// that marks a ReplicaSet deleted is as any other: a Deployment does not
// replace ReplicaSets, it makes a new one when its template changes.
func (c *Controller) replicaSetEvents() *controller.Dependents[*appsv1.ReplicaSet, *appsv1.Deployment] {
	return &controller.Dependents[*appsv1.ReplicaSet, *appsv1.Deployment]{
		Queue: c.queue, Kind: "Deployment", Get: c.getDeployment,
		List: func(ns string) ([]*appsv1.Deployment, error) {
			return c.deployments.Deployments(ns).List(labels.Everything())
		},
		Selector: func(d *appsv1.Deployment) *metav1.LabelSelector { return d.Spec.Selector },
	}
}

func (c *Controller) getDeployment(ns, name string) (*appsv1.Deployment, error) {
	return c.deployments.Deployments(ns).Get(name)
}

// podDeleted queues a Recreate Deployment whose old pods may be gone: it
// scales the new ReplicaSet up only once they are.
func (c *Controller) podDeleted(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	rs, ok := controller.Resolve(pod.Namespace, metav1.GetControllerOf(pod), "ReplicaSet",
		func(ns, name string) (*appsv1.ReplicaSet, error) { return c.replicaSets.ReplicaSets(ns).Get(name) })
	if !ok {
		return
	}
	d, ok := controller.Resolve(rs.Namespace, metav1.GetControllerOf(rs), "Deployment", c.getDeployment)
	if ok && d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		c.queue.Add(d.Namespace + "/" + d.Name)
	}
}
