// Package persistentvolume is kube-controller-manager's PersistentVolume
// controller ("persistentvolume-binder"), written from its source's
// behaviour (pkg/controller/volume/persistentvolume):
//
//   - an unbound claim is bound to the volume pre-bound to it, else to the
//     smallest Available volume that fits (access modes, size, class, volume
//     mode, attributes class, selector: upstream's matching rules, from
//     k8s.io/component-helpers); binding writes the volume (claimRef,
//     bound-by-controller when the controller chose it), its status (Bound),
//     the claim (volumeName, bound-by-controller, bind-completed) and its
//     status (Bound, access modes, capacity), in that order;
//   - with no volume, a claim with no class gets the default class; one of a
//     WaitForFirstConsumer class waits (events WaitForFirstConsumer or
//     WaitForPodScheduled) until the scheduler sets
//     volume.kubernetes.io/selected-node; then, or at once for Immediate
//     classes, it is handed to the class's provisioner: the claim gets the
//     storage-provisioner annotations and the event ExternalProvisioning,
//     and the provisioner's volume (pre-bound to the claim) is bound when
//     it appears. A class that does not exist gives ProvisioningFailed;
//     in-tree provisioners (kubernetes.io/...) are refused as
//     kube-controller-manager refuses them when it has no such plugin;
//   - a volume whose claim is gone is Released; with the Delete reclaim
//     policy an external provisioner's volume is left to it, Retain keeps
//     it, and a claim bound to a volume that is gone is Lost;
//   - everything is synced again every 15 s (the server's clock), when
//     events such as WaitForFirstConsumer repeat, as upstream.
//
// Events are core/v1 events from "persistentvolume-controller". Writes are
// updates (PUT) with the controller's client (field manager
// kube-controller-manager), one claim worker and one volume worker, and the
// controller keeps its own newest copies of what it wrote (upstream's cache)
// so that it does not act on an informer that has not caught up.
//
// Departures, all because kubeembed has no volume plugins: no CSI migration
// (an in-tree provisioner is never translated to its CSI driver), no
// in-tree provisioning (host-path provisioning is off in
// kube-controller-manager too), and the in-tree host-path deleter (under
// /tmp only, as upstream's) and the host-path and NFS recyclers succeed at
// once without touching a disk or running a recycler pod.
package persistentvolume

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corev1listers "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/clock"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
	"github.com/kubeembed/apiserver/internal/volumes"
)

// Component is the source of the controller's events.
const Component = "persistentvolume-controller"

// resyncPeriod is how often every claim and volume is synced again,
// kube-controller-manager's --pvclaimbinder-sync-period default.
const resyncPeriod = 15 * time.Second

// Controller is the PersistentVolume controller.
type Controller struct {
	controller.Parts
	client       kubernetes.Interface
	volumeLister corev1listers.PersistentVolumeLister
	claimLister  corev1listers.PersistentVolumeClaimLister
	classLister  storagelisters.StorageClassLister
	pods         cache.Indexer
	synced       []cache.InformerSynced
	revisions    controllers.Revisions
	clock        clock.WithTicker

	// volumes and claims are the newest copies the controller knows, from
	// the informers and from its own writes (upstream's cache).
	volumes cache.Indexer
	claims  cache.Store

	claimQueue, volumeQueue *controller.Queue
	events                  record.EventRecorder
}

// New returns the controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	core := cfg.Informers.Core().V1()
	classes := cfg.Informers.Storage().V1().StorageClasses()
	c := &Controller{client: cfg.Client, volumeLister: core.PersistentVolumes().Lister(), claimLister: core.PersistentVolumeClaims().Lister(),
		classLister: classes.Lister(), pods: core.Pods().Informer().GetIndexer(), revisions: cfg.Revisions, clock: cfg.Clock,
		volumes: newVolumeIndex(), claims: cache.NewStore(cache.DeletionHandlingMetaNamespaceKeyFunc),
		claimQueue: controller.NewQueue("claims", cfg.QueueMetrics), volumeQueue: controller.NewQueue("volumes", cfg.QueueMetrics)}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	c.Name, c.Observer = string(controllers.PersistentVolumeBinder), controller.NewObserver(cfg.Revisions)
	c.Events = controller.NewEvents(c.client)
	c.events = c.Events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: Component})
	c.Queues = []*controller.Queue{c.claimQueue, c.volumeQueue}
	c.synced = []cache.InformerSynced{classes.Informer().HasSynced, core.Pods().Informer().HasSynced}
	if err := volumes.AddPodClaimsIndex(c.pods); err != nil {
		return nil, err
	}
	if err := c.watch(core.PersistentVolumes().Informer(), core.PersistentVolumeClaims().Informer(), classes.Informer()); err != nil {
		return nil, err
	}
	// Pods are read from their informer (eventForDelayedClaim), observed so
	// that the controller knows when it holds the pods written before a
	// claim.
	if err := c.Observer.Watch(corev1.Resource("pods"), core.Pods().Informer(), cache.ResourceEventHandlerFuncs{}); err != nil {
		return nil, fmt.Errorf("watch pods: %w", err)
	}
	return c, nil
}

func (c *Controller) watch(volumes, claims, classes cache.SharedIndexInformer) error {
	queue := func(q *controller.Queue) cache.ResourceEventHandlerFuncs {
		add := func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				q.Add(key)
			}
		}
		return cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, o any) { add(o) }, DeleteFunc: add}
	}
	if err := c.Observer.Watch(corev1.Resource("persistentvolumes"), volumes, queue(c.volumeQueue)); err != nil {
		return fmt.Errorf("watch volumes: %w", err)
	}
	if err := c.Observer.Watch(corev1.Resource("persistentvolumeclaims"), claims, queue(c.claimQueue)); err != nil {
		return fmt.Errorf("watch claims: %w", err)
	}
	// Upstream has no handler for classes and finds a class created after
	// its claim at the next resync, up to 15 s later; the claims waiting
	// for it are synced at once here.
	classChanged := func(obj any) {
		if class, ok := obj.(*storagev1.StorageClass); ok {
			c.queueClaimsOfClass(class.Name)
		}
	}
	err := c.Observer.Watch(storagev1.Resource("storageclasses"), classes,
		cache.ResourceEventHandlerFuncs{AddFunc: classChanged, UpdateFunc: func(_, o any) { classChanged(o) }})
	if err != nil {
		return fmt.Errorf("watch storage classes: %w", err)
	}
	c.synced = append(c.synced, volumes.HasSynced, claims.HasSynced)
	return nil
}

func (c *Controller) queueClaimsOfClass(name string) {
	all, _ := c.claimLister.List(labels.Everything())
	for _, pvc := range all {
		if pvc.Spec.VolumeName == "" && storagehelpers.GetPersistentVolumeClaimClass(pvc) == name {
			c.claimQueue.Add(pvc.Namespace + "/" + pvc.Name)
		}
	}
}

// Run binds until ctx ends: once the informers have synced, it fills its
// caches from them (upstream's initializeCaches), then runs one claim
// worker, one volume worker and the resync.
func (c *Controller) Run(ctx context.Context) {
	defer c.ShutDown() // also when ctx ends before the informers sync
	defer c.Events.Start()()
	err := controller.Wait(ctx, func() error {
		for _, synced := range c.synced {
			if !synced() {
				return fmt.Errorf("informers not synced")
			}
		}
		return nil
	})
	if err != nil {
		return
	}
	c.initializeCaches(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { c.volumeQueue.Run(ctx, 1, c.syncVolumeByKey) })
	wg.Go(func() { c.claimQueue.Run(ctx, 1, c.syncClaimByKey) })
	wg.Go(func() { c.resync(ctx) })
	wg.Wait()
}

func (c *Controller) initializeCaches(ctx context.Context) {
	volumes, _ := c.volumeLister.List(labels.Everything())
	for _, pv := range volumes {
		_, _ = storeUpdate(ctx, c.volumes, pv.DeepCopy())
	}
	claims, _ := c.claimLister.List(labels.Everything())
	for _, pvc := range claims {
		_, _ = storeUpdate(ctx, c.claims, pvc.DeepCopy())
	}
}

// resync queues every claim and volume every resyncPeriod of the clock.
func (c *Controller) resync(ctx context.Context) {
	tick := c.clock.NewTicker(resyncPeriod)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
		claims, _ := c.claimLister.List(labels.Everything())
		for _, pvc := range claims {
			c.claimQueue.Add(pvc.Namespace + "/" + pvc.Name)
		}
		volumes, _ := c.volumeLister.List(labels.Everything())
		for _, pv := range volumes {
			c.volumeQueue.Add(pv.Name)
		}
	}
}

// syncVolumeByKey syncs the volume the informer has, or forgets one it no
// longer has (and syncs its claim).
func (c *Controller) syncVolumeByKey(ctx context.Context, key string) error {
	pv, err := c.volumeLister.Get(key)
	if err == nil {
		isNew, err := storeUpdate(ctx, c.volumes, pv)
		if err != nil || !isNew {
			return err
		}
		// Upstream binds a claim that was synced before its volume reached
		// the controller's cache at the next resync, up to 15 s later; an
		// unbound volume queues the waiting claims of its class once it is
		// in the cache (not before: the claim worker runs beside this one),
		// so that WaitIdle never returns between the two.
		if pv.Spec.ClaimRef == nil {
			c.queueClaimsOfClass(storagehelpers.GetPersistentVolumeClass(pv))
		}
		return c.syncVolume(ctx, pv)
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get volume %s: %w", key, err)
	}
	obj, found, err := c.volumes.GetByKey(key)
	if err != nil || !found {
		return err
	}
	_ = c.volumes.Delete(obj)
	if pv, ok := obj.(*corev1.PersistentVolume); ok && pv.Spec.ClaimRef != nil {
		c.claimQueue.Add(pv.Spec.ClaimRef.Namespace + "/" + pv.Spec.ClaimRef.Name)
	}
	return nil
}

// syncClaimByKey syncs the claim the informer has, or forgets one it no
// longer has (and syncs its volume).
func (c *Controller) syncClaimByKey(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // not a key this controller made
	}
	pvc, err := c.claimLister.PersistentVolumeClaims(ns).Get(name)
	if err == nil {
		isNew, err := storeUpdate(ctx, c.claims, pvc)
		if err != nil || !isNew {
			return err
		}
		return c.syncClaim(ctx, pvc)
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get claim %s: %w", key, err)
	}
	obj, found, err := c.claims.GetByKey(key)
	if err != nil || !found {
		return err
	}
	_ = c.claims.Delete(obj)
	if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok && pvc.Spec.VolumeName != "" {
		c.volumeQueue.Add(pvc.Spec.VolumeName)
	}
	return nil
}
