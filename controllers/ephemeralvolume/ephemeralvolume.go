// Package ephemeralvolume is kube-controller-manager's ephemeral volume
// controller ("ephemeral-volume") as v1.37.2 runs it: for each generic
// ephemeral volume of a pod (spec.volumes[].ephemeral) it creates the
// PersistentVolumeClaim <pod>-<volume> from the volume's claim template,
// with the template's labels and annotations and the pod as its
// controlling owner (blockOwnerDeletion), so that the garbage collector
// deletes the claim with the pod. The scheduler waits for the claim as for
// any other (and says "waiting for ephemeral volume controller to create
// the persistentvolumeclaim ..." until it exists); the PV controller and
// the provisioner bind it.
//
// A claim of that name that the pod does not control is left alone: the
// pod cannot use it, and the controller records a FailedBinding event on
// the pod ("ephemeral volume scratch: PVC ns/db-scratch was not created
// for pod ns/db (pod is not owner)"), as upstream, retrying with the
// controller rate limiter's back-off. So does a create the server refuses
// (a quota exceeded, say). Those waits are not work WaitIdle waits for:
// they end when someone else acts. A claim deleted while its pod lives is
// created again. Pods being deleted are left alone, and pod updates are
// not looked at (a pod's volumes cannot change).
//
// Claims are created with a client named ephemeral-volume-controller
// (field manager kube-controller-manager); events come from the
// component ephemeral_volume. Left out: the controller's metrics.
package ephemeralvolume

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-helpers/storage/ephemeral"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
	"github.com/kubeembed/apiserver/internal/volumes"
)

const (
	// workers is upstream's ConcurrentEphemeralVolumeSyncs default.
	workers = 5
	// FailedBinding is the reason of the event a pod gets when one of its
	// ephemeral volumes' claims cannot be made.
	FailedBinding = "FailedBinding"
)

// Controller is the ephemeral volume controller.
type Controller struct {
	controller.Parts
	client   kubernetes.Interface
	pods     corev1listers.PodLister
	podIndex cache.Indexer
	claims   corev1listers.PersistentVolumeClaimLister
	queue    *controller.Queue
	recorder record.EventRecorder
	// backoff spaces the retries of pods that wait on someone else (a
	// claim they do not own, a refused create), as upstream's queue.
	backoff workqueue.TypedRateLimiter[string]
}

// New returns the ephemeral volume controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	client, err := controller.NamedClient(cfg, "ephemeral-volume-controller")
	if err != nil {
		return nil, err
	}
	pods, claims := cfg.Informers.Core().V1().Pods(), cfg.Informers.Core().V1().PersistentVolumeClaims()
	c := &Controller{client: client, pods: pods.Lister(), podIndex: pods.Informer().GetIndexer(), claims: claims.Lister(),
		queue: controller.NewQueue("ephemeral_volume", cfg.QueueMetrics), backoff: workqueue.DefaultTypedControllerRateLimiter[string]()}
	c.Name, c.Observer, c.Queues = string(controllers.EphemeralVolume), controller.NewObserver(cfg.Revisions), []*controller.Queue{c.queue}
	c.Events = controller.NewEvents(client)
	c.recorder = c.Events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "ephemeral_volume"})
	if err := volumes.AddPodClaimsIndex(c.podIndex); err != nil {
		return nil, err
	}
	// Pod updates are not looked at: a pod's volumes cannot change.
	// Deleted pods' claims go with them (the garbage collector).
	if err := c.Observer.Watch(corev1.Resource("pods"), pods.Informer(), cache.ResourceEventHandlerFuncs{AddFunc: c.podAdded}); err != nil {
		return nil, fmt.Errorf("watch pods: %w", err)
	}
	err = c.Observer.Watch(corev1.Resource("persistentvolumeclaims"), claims.Informer(), cache.ResourceEventHandlerFuncs{DeleteFunc: c.claimDeleted})
	if err != nil {
		return nil, fmt.Errorf("watch claims: %w", err)
	}
	return c, nil
}

// Run creates claims until ctx ends, with upstream's 5 workers.
func (c *Controller) Run(ctx context.Context) {
	defer c.Events.Start()()
	c.queue.Run(ctx, workers, c.sync)
}

func (c *Controller) podAdded(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.DeletionTimestamp != nil {
		return
	}
	if slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Ephemeral != nil }) {
		c.queue.Add(pod.Namespace + "/" + pod.Name)
	}
}

// claimDeleted queues the pods that use the claim (upstream's shared
// index): those whose ephemeral volume it was (or would be) have it made
// again.
func (c *Controller) claimDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return
	}
	pods, _ := c.podIndex.ByIndex(volumes.PodClaimsIndex, pvc.Namespace+"/"+pvc.Name)
	for _, p := range pods {
		c.podAdded(p)
	}
}

// sync makes the claims of the pod's ephemeral volumes that are missing.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	pod, err := c.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && pod.DeletionTimestamp != nil) {
		c.backoff.Forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if err := c.claimFor(ctx, pod, v); err != nil {
			c.recorder.Event(pod, corev1.EventTypeWarning, FailedBinding, fmt.Sprintf("ephemeral volume %s: %v", v.Name, err))
			return c.retry(key, fmt.Errorf("pod %s, ephemeral volume %s: %w", key, v.Name, err))
		}
	}
	c.backoff.Forget(key)
	return nil
}

// retry is the error that brings key back: a wait on the back-off for what
// someone else must mend (a claim the pod does not own, a create the
// server refused), a failure retried as any other otherwise.
func (c *Controller) retry(key string, err error) error {
	var notOwned notOwnedError
	if errors.As(err, &notOwned) || apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
		return &controller.Later{After: c.backoff.When(key), Reason: err.Error()}
	}
	return err
}

// notOwnedError is a claim of the ephemeral volume's name that the pod
// does not control.
type notOwnedError struct{ error }

// claimFor creates the claim of the pod's volume v if it is an ephemeral
// volume whose claim is missing.
func (c *Controller) claimFor(ctx context.Context, pod *corev1.Pod, v *corev1.Volume) error {
	if v.Ephemeral == nil {
		return nil
	}
	name := ephemeral.VolumeClaimName(pod, v)
	existing, err := c.claims.PersistentVolumeClaims(pod.Namespace).Get(name)
	if err == nil {
		if err := ephemeral.VolumeIsForPod(pod, existing); err != nil {
			return notOwnedError{err}
		}
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	template := v.Ephemeral.VolumeClaimTemplate
	if template == nil {
		return nil // refused by validation; nothing to make it from
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			Annotations: template.Annotations,
			Labels:      template.Labels,
		},
		Spec: template.Spec,
	}
	_, err = c.client.CoreV1().PersistentVolumeClaims(pod.Namespace).Create(ctx, pvc, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return c.existing(ctx, pod, name, err)
	}
	if err != nil {
		return fmt.Errorf("create PVC %s: %w", name, err)
	}
	return nil
}

// existing says whether the claim name the server has, which the cache
// had not seen yet, is the pod's. A claim created just before its pod is
// a test's usual order; in process the cache lags behind it far more
// often than kube-controller-manager's does on a cluster, and "already
// exists" would be an event a cluster seldom shows.
func (c *Controller) existing(ctx context.Context, pod *corev1.Pod, name string, createErr error) error {
	pvc, err := c.client.CoreV1().PersistentVolumeClaims(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("create PVC %s: %w", name, createErr)
	}
	if err := ephemeral.VolumeIsForPod(pod, pvc); err != nil {
		return notOwnedError{err}
	}
	return nil
}
