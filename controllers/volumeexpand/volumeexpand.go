// Package volumeexpand is kube-controller-manager's volume expand
// controller ("persistentvolume-expander") as v1.37.2 runs it. When a
// Bound claim's storage request grows past its status capacity (kube-
// apiserver's PersistentVolumeClaimResize admission has let it: its class
// allows volume expansion), the controller looks for an in-tree plugin
// that expands the claim's volume; kube-controller-manager v1.37 has none
// (hostPath, NFS, FC, iSCSI and CSI volumes are all expanded by someone
// else), so it records the Normal event ExternalExpanding "waiting for an
// external controller to expand this PVC" on the claim and leaves it.
//
// What would expand it is a CSI driver's external-resizer, and a kubelet
// for the file system. The simulated provisioner stands for
// local-path-provisioner, which has no resizer, so a claim of its classes
// stays at its size, as on a kind cluster: nothing else is simulated. A
// volume of the in-tree types migrated to CSI (awsElasticBlockStore,
// gcePersistentDisk, ...) gets the same event here, not the migration's,
// and so does a FlexVolume (upstream expands it with a no-op plugin and
// marks the claim for the kubelet).
//
// A claim whose volume cannot be read or is bound to another claim is
// retried on the controller rate limiter's back-off, outside what WaitIdle
// waits for. Events come from the component volume_expand.
package volumeexpand

import (
	"context"
	"fmt"
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

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

// ExternalExpanding is the reason of the event a growing claim gets.
const ExternalExpanding = "ExternalExpanding"

// annPreResizeCapacity is the annotation an in-tree expansion leaves on a
// volume until its file system is resized.
const annPreResizeCapacity = "volume.alpha.kubernetes.io/pre-resize-capacity"

// Controller is the volume expand controller.
type Controller struct {
	controller.Parts
	client   kubernetes.Interface
	claims   corev1listers.PersistentVolumeClaimLister
	queue    *controller.Queue
	recorder record.EventRecorder
	backoff  workqueue.TypedRateLimiter[string]
}

// New returns the volume expand controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	client, err := controller.NamedClient(cfg, "expand-controller")
	if err != nil {
		return nil, err
	}
	claims := cfg.Informers.Core().V1().PersistentVolumeClaims()
	c := &Controller{client: client, claims: claims.Lister(), queue: controller.NewQueue("volume_expand", cfg.QueueMetrics),
		backoff: workqueue.DefaultTypedControllerRateLimiter[string]()}
	c.Name, c.Observer, c.Queues = string(controllers.VolumeExpand), controller.NewObserver(cfg.Revisions), []*controller.Queue{c.queue}
	c.Events = controller.NewEvents(client)
	c.recorder = c.Events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "volume_expand"})
	err = c.Observer.Watch(corev1.Resource("persistentvolumeclaims"), claims.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: c.claimUpdated,
	})
	if err != nil {
		return nil, fmt.Errorf("watch claims: %w", err)
	}
	return c, nil
}

// Run syncs until ctx ends, with upstream's one worker.
func (c *Controller) Run(ctx context.Context) {
	defer c.Events.Start()()
	c.queue.Run(ctx, 1, c.sync)
}

func (c *Controller) enqueue(obj any) {
	if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok && pvc.Status.Phase == corev1.ClaimBound {
		c.queue.Add(pvc.Namespace + "/" + pvc.Name)
	}
}

// claimUpdated queues a claim whose request or capacity grew.
func (c *Controller) claimUpdated(old, cur any) {
	o, ok1 := old.(*corev1.PersistentVolumeClaim)
	n, ok2 := cur.(*corev1.PersistentVolumeClaim)
	if !ok1 || !ok2 {
		return
	}
	oldReq, newReq := o.Spec.Resources.Requests[corev1.ResourceStorage], n.Spec.Resources.Requests[corev1.ResourceStorage]
	oldCap, newCap := o.Status.Capacity[corev1.ResourceStorage], n.Status.Capacity[corev1.ResourceStorage]
	if newReq.Cmp(oldReq) > 0 || newCap.Cmp(oldCap) > 0 {
		c.enqueue(cur)
	}
}

// sync says that a claim whose request is past its capacity waits for an
// external controller.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	pvc, err := c.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.backoff.Forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	pv, err := c.client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return &controller.Later{After: c.backoff.When(key), Reason: fmt.Sprintf("failed to get PV %q: %v", pvc.Spec.VolumeName, err)}
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.Namespace != pvc.Namespace || ref.UID != pvc.UID {
		return &controller.Later{After: c.backoff.When(key), Reason: "persistent Volume is not bound to PVC being updated : " + key}
	}
	c.backoff.Forget(key)
	request, capacity := pvc.Spec.Resources.Requests[corev1.ResourceStorage], pvc.Status.Capacity[corev1.ResourceStorage]
	if request.Cmp(capacity) <= 0 && !metav1.HasAnnotation(pv.ObjectMeta, annPreResizeCapacity) {
		return nil
	}
	c.recorder.Event(pvc, corev1.EventTypeNormal, ExternalExpanding, "waiting for an external controller to expand this PVC")
	return nil
}
