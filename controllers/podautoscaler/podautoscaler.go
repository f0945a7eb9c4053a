// Package podautoscaler is kube-controller-manager's
// horizontalpodautoscaling controller, as v1.37.2 runs it over
// autoscaling/v2 HorizontalPodAutoscalers (v1 is the API's conversion of
// them):
//
//   - every 15 s (the sync period, on the server's clock) and when an
//     HPA's spec changes (its generation), it reads the target's /scale
//     subresource, found through a discovery-based RESTMapper (reset when
//     a kind is unknown): Deployments, ReplicaSets, StatefulSets,
//     ReplicationControllers, custom resources with a scale subresource;
//   - it computes a replica count for each metric: resource and container
//     resource metrics (Utilization of the pods' requests, or
//     AverageValue) from metrics.k8s.io, pods and object metrics from
//     custom.metrics.k8s.io, external metrics from external.metrics.k8s.io,
//     with upstream's replica calculation: the tolerance (0.1, or the
//     behavior's per-direction tolerance), pods pending, failed or deleted,
//     pods not yet ready within the 5 minute cpu initialisation period
//     (30 s readiness delay), pods without metrics taken as using 0 % on a
//     scale up and 100 % on a scale down; the largest proposal wins;
//   - it keeps the count within minReplicas and maxReplicas, the default
//     scale-up limit (double, at least 4) and the 5 minute scale-down
//     stabilisation, or the HPA's behavior (scaleUp and scaleDown
//     policies, selectPolicy, stabilizationWindowSeconds), all on the
//     server's clock so that a test's fake clock moves them;
//   - it writes the target's scale (retried on conflicts), and the HPA's
//     status: currentReplicas, desiredReplicas, lastScaleTime,
//     currentMetrics, observedGeneration and the AbleToScale,
//     ScalingActive, ScalingLimited and ScaledToZero conditions with
//     upstream's reasons and messages; events SuccessfulRescale,
//     FailedGetScale, FailedGetResourceMetric, FailedComputeMetricsReplicas
//     and the others, as horizontal-pod-autoscaler.
//
// Writes are made with a client named horizontal-pod-autoscaler (field
// manager kube-controller-manager). The behavior defaults the API server
// gives (default policies, selectPolicy Max) are applied here to HPAs that
// lack them. Left out: the read-your-writes wait of
// StaleControllerConsistencyHPA (an in-process server's informers catch
// up within the sync), the controller's Prometheus metrics, and the
// custom and external metrics APIs themselves (kubeembed serves neither:
// such metrics fail as upstream's do without an adapter).
package podautoscaler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

// Upstream's defaults (kube-controller-manager's HPAController
// configuration).
const (
	clientName                   = "horizontal-pod-autoscaler"
	workers                      = 5
	syncPeriod                   = 15 * time.Second
	downscaleStabilisationWindow = 5 * time.Minute
	defaultTolerance             = 0.1
	cpuInitializationPeriod      = 5 * time.Minute
	initialReadinessDelay        = 30 * time.Second
)

// Controller is the horizontalpodautoscaling controller.
type Controller struct {
	controller.Parts
	client  kubernetes.Interface
	targets *targets
	metrics *metricsClient
	hpas    autoscalinglisters.HorizontalPodAutoscalerLister
	pods    corelisters.PodLister
	queue   *controller.Queue
	clock   clock.WithTickerAndDelayedExecution

	selectors *selectorStore
	history   *history
}

// New returns the horizontalpodautoscaling controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	if cfg.RESTConfig == nil || cfg.Discovery == nil {
		return nil, errors.New("horizontalpodautoscaling: needs the server's REST config and discovery")
	}
	client, err := controller.NamedClient(cfg, clientName)
	if err != nil {
		return nil, err
	}
	c := &Controller{client: client, clock: cfg.Clock, queue: controller.NewQueue("horizontalpodautoscaler", cfg.QueueMetrics),
		selectors: newSelectorStore(), history: newHistory()}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.targets, err = newTargets(cfg.RESTConfig, cfg.Discovery); err != nil {
		return nil, err
	}
	if c.metrics, err = newMetricsClient(cfg.RESTConfig, cfg.Discovery, c.targets.mapper); err != nil {
		return nil, err
	}
	hpas, pods := cfg.Informers.Autoscaling().V2().HorizontalPodAutoscalers(), cfg.Informers.Core().V1().Pods()
	c.hpas, c.pods = hpas.Lister(), pods.Lister()
	c.Name, c.Observer, c.Queues = string(controllers.HorizontalPodAutoscaling), controller.NewObserver(cfg.Revisions), []*controller.Queue{c.queue}
	c.Events = controller.NewEvents(client)
	return c, errors.Join(
		c.Observer.Watch(autoscalingv2.Resource("horizontalpodautoscalers"), hpas.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.hpaAdded, UpdateFunc: c.hpaUpdated, DeleteFunc: c.hpaDeleted}),
		// Read through the lister only: watched so that WaitIdle knows it
		// has caught up.
		c.Observer.Watch(corev1.Resource("pods"), pods.Informer(), cache.ResourceEventHandlerFuncs{}),
	)
}

// Run syncs until ctx ends, with upstream's 5 workers; the custom metrics
// API's discovery is forgotten every sync period, as upstream does.
func (c *Controller) Run(ctx context.Context) {
	defer c.Events.Start()()
	var wg sync.WaitGroup
	wg.Go(func() { c.metrics.invalidate(ctx, syncPeriod) })
	wg.Go(func() { c.queue.Run(ctx, workers, c.sync) })
	wg.Wait()
}

// recorder records events, written once Run has started.
func (c *Controller) recorder() record.EventRecorder {
	return c.Events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: clientName})
}

func hpaKey(obj any) (string, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Key, true
	}
	hpa, ok := obj.(*autoscalingv2.HorizontalPodAutoscaler)
	if !ok {
		return "", false
	}
	return hpa.Namespace + "/" + hpa.Name, true
}

// hpaAdded registers the HPA with a selector that selects nothing (its
// target's comes with its first sync) and syncs it now.
func (c *Controller) hpaAdded(obj any) {
	key, ok := hpaKey(obj)
	if !ok {
		return
	}
	c.selectors.putIfAbsent(key, labels.Nothing())
	c.queue.Add(key)
}

// hpaUpdated syncs an HPA whose spec changed (its generation) now, and
// leaves any other change (its status, written by the last sync) to the
// next periodic sync, as upstream does to avoid a hot loop.
func (c *Controller) hpaUpdated(oldObj, obj any) {
	old, ok1 := oldObj.(*autoscalingv2.HorizontalPodAutoscaler)
	cur, ok2 := obj.(*autoscalingv2.HorizontalPodAutoscaler)
	if ok1 && ok2 && old.Generation != cur.Generation {
		c.hpaAdded(cur)
		return
	}
	if key, ok := hpaKey(obj); ok {
		c.syncLater(key)
	}
}

func (c *Controller) hpaDeleted(obj any) {
	if key, ok := hpaKey(obj); ok {
		c.selectors.delete(key)
	}
}

// syncLater syncs key again after the sync period, on the server's clock;
// a sync already put off stands, as in upstream's queue.
func (c *Controller) syncLater(key string) { c.queue.AddAfterOn(c.clock, key, syncPeriod) }

// sync reconciles one HPA. Its failures are in its status and events: as
// upstream, they are logged and the HPA is synced again after the sync
// period, as it is after a success.
func (c *Controller) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	hpa, err := c.hpas.HorizontalPodAutoscalers(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		c.history.forget(key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get horizontal pod autoscaler: %w", err)
	}
	if err := c.reconcile(ctx, hpa.DeepCopy(), key); err != nil {
		klog.FromContext(ctx).V(2).Info("Horizontal pod autoscaler sync failed", "hpa", key, "err", err)
	}
	c.syncLater(key)
	return nil
}
