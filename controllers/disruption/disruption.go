// Package disruption is kube-controller-manager's disruption controller
// ("disruption"), as v1.37.2 runs it: each PodDisruptionBudget's status
// (the pods its selector covers in its namespace, how many are healthy,
// how many the budget wants healthy, how many may be disrupted, the
// DisruptionAllowed condition), which the eviction API reads; and the
// reset of a pod's DisruptionTarget condition left True for 2 minutes on a
// pod that was not deleted.
//
// Expected pods come from the pods' controllers (ReplicationController,
// Deployment through its ReplicaSet, ReplicaSet, StatefulSet, then any
// resource through its /scale subresource) when the budget sets
// maxUnavailable or a minAvailable percentage; a minAvailable number
// counts the covered pods. A sync that fails writes upstream's fail-safe
// status (no disruption allowed, SyncFailed). Events and their messages
// are upstream's (source controllermanager), its quirks included; writes
// are made as disruption-controller (field manager kube-controller-manager).
// As upstream, changes of the controllers do not queue a budget: a pod or
// budget change does.
package disruption

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

// Upstream's timeouts: an evicted pod not deleted within DeletionTimeout
// counts again; a DisruptionTarget condition is stale after
// stalePodDisruptionTimeout.
const (
	deletionTimeout           = 2 * time.Minute
	stalePodDisruptionTimeout = 2 * time.Minute
	clientName                = "disruption-controller"
)

// Controller is the disruption controller.
type Controller struct {
	controller.Parts
	client    kubernetes.Interface
	scales    scale.ScalesGetter
	mapper    *restmapper.DeferredDiscoveryRESTMapper
	discovery discovery.DiscoveryInterface
	clock     clock.WithTickerAndDelayedExecution

	pdbs         policylisters.PodDisruptionBudgetLister
	pods         corev1listers.PodLister
	rcs          corev1listers.ReplicationControllerLister
	replicaSets  appslisters.ReplicaSetLister
	deployments  appslisters.DeploymentLister
	statefulSets appslisters.StatefulSetLister

	queue, stale *controller.Queue
}

// New returns the controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	client, err := controller.NamedClient(cfg, clientName)
	if err != nil {
		return nil, err
	}
	c := &Controller{client: client, discovery: cfg.Discovery, clock: cfg.Clock,
		queue: controller.NewQueue("disruption", cfg.QueueMetrics), stale: controller.NewQueue("stale_pod_disruption", cfg.QueueMetrics)}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if err := c.scaleClient(cfg); err != nil {
		return nil, err
	}
	inf := cfg.Informers
	c.pdbs, c.pods = inf.Policy().V1().PodDisruptionBudgets().Lister(), inf.Core().V1().Pods().Lister()
	c.rcs, c.replicaSets = inf.Core().V1().ReplicationControllers().Lister(), inf.Apps().V1().ReplicaSets().Lister()
	c.deployments, c.statefulSets = inf.Apps().V1().Deployments().Lister(), inf.Apps().V1().StatefulSets().Lister()
	c.Name, c.Observer, c.Queues = string(controllers.Disruption), controller.NewObserver(cfg.Revisions), []*controller.Queue{c.queue, c.stale}
	c.Events = controller.NewEvents(client)
	pdb := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if p, ok := obj.(*policyv1.PodDisruptionBudget); ok {
			c.queue.Add(p.Namespace + "/" + p.Name)
		}
	}
	return c, errors.Join(
		c.Observer.Watch(policyv1.Resource("poddisruptionbudgets"), inf.Policy().V1().PodDisruptionBudgets().Informer(),
			cache.ResourceEventHandlerFuncs{AddFunc: pdb, UpdateFunc: func(_, o any) { pdb(o) }, DeleteFunc: pdb}),
		c.Observer.Watch(corev1.Resource("pods"), inf.Core().V1().Pods().Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.podChanged, UpdateFunc: func(_, o any) { c.podChanged(o) }, DeleteFunc: c.podDeleted}),
		// Read through listers only: watched so that WaitIdle knows they
		// have caught up.
		c.Observer.Watch(corev1.Resource("replicationcontrollers"), inf.Core().V1().ReplicationControllers().Informer(), cache.ResourceEventHandlerFuncs{}),
		c.Observer.Watch(appsv1.Resource("replicasets"), inf.Apps().V1().ReplicaSets().Informer(), cache.ResourceEventHandlerFuncs{}),
		c.Observer.Watch(appsv1.Resource("deployments"), inf.Apps().V1().Deployments().Informer(), cache.ResourceEventHandlerFuncs{}),
		c.Observer.Watch(appsv1.Resource("statefulsets"), inf.Apps().V1().StatefulSets().Informer(), cache.ResourceEventHandlerFuncs{}),
	)
}

// scaleClient builds the client of /scale subresources, with a mapper over
// the server's discovery, as kube-controller-manager gives it.
func (c *Controller) scaleClient(cfg controllers.Config) error {
	if cfg.RESTConfig == nil || cfg.Discovery == nil {
		return nil // no generic scale lookups: pods of other kinds fail as unfound controllers
	}
	rc := *cfg.RESTConfig
	rc.UserAgent += "/" + clientName
	rc.WarningHandler = rest.NoWarnings{}
	c.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cfg.Discovery))
	scales, err := scale.NewForConfig(&rc, c.mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(cfg.Discovery))
	if err != nil {
		return fmt.Errorf("scale client: %w", err)
	}
	c.scales = scales
	return nil
}

// Run keeps budgets until ctx ends: one worker, as upstream's default,
// and the stale condition worker.
func (c *Controller) Run(ctx context.Context) {
	defer c.Events.Start()()
	var wg sync.WaitGroup
	wg.Go(func() { c.queue.Run(ctx, 1, c.sync) })
	wg.Go(func() { c.stale.Run(ctx, 1, c.syncStalePod) })
	wg.Wait()
}

// recorder records events, written once Run has started (before, when the
// informers' first list reaches the pod handlers, they are dropped).
func (c *Controller) recorder() record.EventRecorder {
	return c.Events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "controllermanager"})
}

// podChanged queues the first budget that covers the pod, and the pod
// itself when its DisruptionTarget condition may go stale.
func (c *Controller) podChanged(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	c.queueBudgetOf(pod)
	if wait, stale := staleDisruption(pod, c.clock.Now()); stale {
		c.stale.AddAfterOn(c.clock, pod.Namespace+"/"+pod.Name, wait)
	}
}

func (c *Controller) podDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		c.queueBudgetOf(pod)
	}
}

// queueBudgetOf queues the first budget whose selector matches the pod:
// upstream syncs only that one, and warns on the pod when there are more.
func (c *Controller) queueBudgetOf(pod *corev1.Pod) {
	all, err := c.pdbs.PodDisruptionBudgets(pod.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	var matching []*policyv1.PodDisruptionBudget
	for _, pdb := range all {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() && pdb.Spec.Selector == nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		matching = append(matching, pdb)
	}
	if len(matching) == 0 {
		return
	}
	if len(matching) > 1 {
		c.recorder().Eventf(pod, corev1.EventTypeWarning, "MultiplePodDisruptionBudgets",
			"Pod %q/%q matches multiple PodDisruptionBudgets.  Chose %q arbitrarily.", pod.Namespace, pod.Name, matching[0].Name)
	}
	c.queue.Add(matching[0].Namespace + "/" + matching[0].Name)
}

func splitKey(k string) (string, string) {
	ns, name, _ := strings.Cut(k, "/")
	return ns, name
}
