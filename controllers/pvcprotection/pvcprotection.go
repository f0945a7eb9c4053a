// Package pvcprotection is kube-controller-manager's PersistentVolumeClaim
// protection controller ("pvc-protection"):
//
//   - a deleted claim keeps the finalizer kubernetes.io/pvc-protection while
//     a scheduled pod (spec.nodeName set, whatever its phase) has it as a
//     volume, or owns it as a generic ephemeral volume and is not shut down;
//     then the finalizer is removed and the claim goes. Unscheduled pods do
//     not hold it. Pods are looked for in the informer, then listed live
//     from the server, as upstream does, so a pod the informer has not seen
//     yet still counts;
//   - a claim that lacks the finalizer and is not being deleted gets it back;
//   - a Bound claim that is not being deleted carries the condition Unused
//     (PersistentVolumeClaimUnusedSinceTime, beta and on in 1.37): False,
//     reason PodUsingPVC, while a pod that has not terminated (scheduled or
//     not) references it; True, reason NoPodsUsingPVC, otherwise. Its
//     lastTransitionTime is when it flipped (the server's clock).
//
// Writes are updates (PUT, and PUT of /status for the condition) with the
// controller's client, as upstream makes them. Upstream batches the claims
// of a namespace to share one live pod list; this lists per claim, which
// only costs time with thousands of claims.
package pvcprotection

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
	"github.com/kubeembed/apiserver/internal/volumes"
)

// Finalizer is the finalizer the controller keeps on claims, as
// kube-apiserver's StorageObjectInUseProtection admission plugin adds it.
const Finalizer = "kubernetes.io/pvc-protection"

// Controller is the PVC protection controller.
type Controller struct {
	controller.Parts
	client kubernetes.Interface
	claims corev1listers.PersistentVolumeClaimLister
	pods   cache.Indexer
	queue  *controller.Queue
	clock  clock.PassiveClock
}

// New returns the controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	claims, pods := cfg.Informers.Core().V1().PersistentVolumeClaims(), cfg.Informers.Core().V1().Pods()
	c := &Controller{client: cfg.Client, claims: claims.Lister(), pods: pods.Informer().GetIndexer(),
		queue: controller.NewQueue("pvcprotection", cfg.QueueMetrics), clock: clock.RealClock{}}
	if cfg.Clock != nil {
		c.clock = cfg.Clock
	}
	c.Name, c.Observer, c.Queues = string(controllers.PVCProtection), controller.NewObserver(cfg.Revisions), []*controller.Queue{c.queue}
	if err := volumes.AddPodClaimsIndex(c.pods); err != nil {
		return nil, err
	}
	err := c.Observer.Watch(corev1.Resource("persistentvolumeclaims"), claims.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.claimChanged,
		UpdateFunc: func(_, o any) { c.claimChanged(o) },
	})
	if err != nil {
		return nil, fmt.Errorf("watch claims: %w", err)
	}
	err = c.Observer.Watch(corev1.Resource("pods"), pods.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { c.podChanged(nil, o) },
		UpdateFunc: c.podChanged,
		DeleteFunc: func(o any) { c.podChanged(nil, o) },
	})
	if err != nil {
		return nil, fmt.Errorf("watch pods: %w", err)
	}
	return c, nil
}

// Run protects claims until ctx ends, with one worker as
// kube-controller-manager runs it.
func (c *Controller) Run(ctx context.Context) { c.queue.Run(ctx, 1, c.sync) }

// claimChanged queues a claim that lacks its Unused condition, lacks the
// finalizer, or waits on it.
func (c *Controller) claimChanged(obj any) {
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return
	}
	if unusedCondition(pvc) == nil || needsFinalizer(pvc) || deletionCandidate(pvc) {
		c.queue.Add(pvc.Namespace + "/" + pvc.Name)
	}
}

// podChanged queues the claims a pod uses; with the Unused condition on,
// any change of any pod may change them. A pod replaced under the same name
// (another UID) frees the old one's claims too.
func (c *Controller) podChanged(old, obj any) {
	pod := asPod(obj)
	if pod == nil {
		return
	}
	c.queueClaimsOf(pod)
	if before := asPod(old); before != nil && before.UID != pod.UID {
		c.queueClaimsOf(before)
	}
}

func (c *Controller) queueClaimsOf(pod *corev1.Pod) {
	keys, _ := volumes.PodClaims(pod)
	for _, k := range keys {
		c.queue.Add(k)
	}
}

func asPod(obj any) *corev1.Pod {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, _ := obj.(*corev1.Pod)
	return pod
}

// deletionCandidate and needsFinalizer are upstream's protectionutil tests.
func deletionCandidate(pvc *corev1.PersistentVolumeClaim) bool {
	return pvc.DeletionTimestamp != nil && slices.Contains(pvc.Finalizers, Finalizer)
}

func needsFinalizer(pvc *corev1.PersistentVolumeClaim) bool {
	return pvc.DeletionTimestamp == nil && !slices.Contains(pvc.Finalizers, Finalizer)
}
