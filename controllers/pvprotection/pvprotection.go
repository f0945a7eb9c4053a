// Package pvprotection is kube-controller-manager's PersistentVolume
// protection controller ("pv-protection"): a volume keeps the finalizer
// kubernetes.io/pv-protection while it is Bound, so that deleting it leaves
// it Terminating until its claim lets it go (the claim is deleted, the PV
// controller marks the volume Released); then the finalizer is removed and
// the volume goes. A volume that lacks the finalizer and is not being
// deleted gets it back. Writes are updates (PUT), as upstream makes them,
// with the controller's client (field manager kube-controller-manager).
package pvprotection

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

// Finalizer is the finalizer the controller keeps on volumes, as
// kube-apiserver's StorageObjectInUseProtection admission plugin adds it.
const Finalizer = "kubernetes.io/pv-protection"

// Controller is the PV protection controller.
type Controller struct {
	controller.Parts
	client  kubernetes.Interface
	volumes corev1listers.PersistentVolumeLister
	queue   *controller.Queue
}

// New returns the controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	informer := cfg.Informers.Core().V1().PersistentVolumes()
	c := &Controller{client: cfg.Client, volumes: informer.Lister(),
		queue: controller.NewQueue("pvprotection", cfg.QueueMetrics)}
	c.Name, c.Observer, c.Queues = string(controllers.PVProtection), controller.NewObserver(cfg.Revisions), []*controller.Queue{c.queue}
	changed := func(obj any) {
		if pv, ok := obj.(*corev1.PersistentVolume); ok && (needsFinalizer(pv) || deletionCandidate(pv)) {
			c.queue.Add(pv.Name)
		}
	}
	err := c.Observer.Watch(corev1.Resource("persistentvolumes"), informer.Informer(),
		cache.ResourceEventHandlerFuncs{AddFunc: changed, UpdateFunc: func(_, o any) { changed(o) }})
	if err != nil {
		return nil, fmt.Errorf("watch persistent volumes: %w", err)
	}
	return c, nil
}

// Run protects volumes until ctx ends, with one worker as
// kube-controller-manager runs it.
func (c *Controller) Run(ctx context.Context) { c.queue.Run(ctx, 1, c.sync) }

func (c *Controller) sync(ctx context.Context, name string) error {
	pv, err := c.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get volume %s: %w", name, err)
	}
	switch {
	case deletionCandidate(pv) && pv.Status.Phase != corev1.VolumeBound:
		pv = pv.DeepCopy()
		pv.Finalizers = slices.DeleteFunc(pv.Finalizers, func(f string) bool { return f == Finalizer })
	case needsFinalizer(pv):
		pv = pv.DeepCopy()
		pv.Finalizers = append(pv.Finalizers, Finalizer)
	default:
		klog.FromContext(ctx).V(4).Info("Keeping PV because it is being used", "PV", name)
		return nil
	}
	_, err = c.client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update finalizers of volume %s: %w", name, err)
	}
	return nil
}

// deletionCandidate and needsFinalizer are upstream's protectionutil tests.
func deletionCandidate(pv *corev1.PersistentVolume) bool {
	return pv.DeletionTimestamp != nil && slices.Contains(pv.Finalizers, Finalizer)
}

func needsFinalizer(pv *corev1.PersistentVolume) bool {
	return pv.DeletionTimestamp == nil && !slices.Contains(pv.Finalizers, Finalizer)
}
