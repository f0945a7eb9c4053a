// Package provisioner is the cluster's simulated storage provisioner, in
// the place of the local-path-provisioner a kind cluster runs:
//
//   - once the server is ready it creates the default StorageClass as kind
//     has one: "standard", annotated storageclass.kubernetes.io/is-default-
//     class "true", WaitForFirstConsumer, reclaim policy Delete; but its
//     provisioner is kubeembed.io/simulated (Name), not rancher.io/local-path:
//     no disk is ever touched. It is created once (as kind applies its
//     manifest once): a class already there is left as it is, one deleted
//     later is not put back;
//   - it provisions the claims whose storage-provisioner annotation (set by
//     the PV controller) names it, as sig-storage-lib-external-provisioner
//     does: for a WaitForFirstConsumer class only once the scheduler has set
//     volume.kubernetes.io/selected-node; the volume is pvc-<claim UID>,
//     pre-bound to the claim (claimRef), annotated
//     pv.kubernetes.io/provisioned-by, of the claim's class, with the events
//     Provisioning and ProvisioningSucceeded on the claim. What the volume
//     holds is what local-path-provisioner writes: the claim's access modes
//     and request as capacity, volume mode Filesystem, the class's reclaim
//     policy, a hostPath (DirectoryOrCreate) under
//     /var/local-path-provisioner, and node affinity to the selected node's
//     kubernetes.io/hostname. A selected node that does not exist is given
//     back to the scheduler (the annotation removed), as the library does;
//   - it deletes its Released volumes whose reclaim policy is Delete.
//
// Its events' source is "<Name>_<hostname>_<uuid>", as the library names
// its component. Its writes are made as "local-path-provisioner" (Client's
// user agent): the field manager of the provisioner kind runs, whose
// client-go user agent is its binary's name.
//
// Departures: local-path-provisioner refuses claims with no selected node
// (Immediate classes), access modes other than ReadWriteOnce(Pod) and
// selectors; this one provisions them (an Immediate claim's volume has no
// node affinity). The library retries saving a volume five times, 10 s
// apart, in the worker; this returns the error to its queue.
package provisioner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corev1listers "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
	"github.com/kubeembed/apiserver/internal/version"
	"github.com/kubeembed/apiserver/internal/volumes"
)

// Name is the provisioner's name, the default class's provisioner.
const Name = "kubeembed.io/simulated"

// DefaultClass is the name of the default StorageClass, kind's.
const DefaultClass = "standard"

// IsDefaultClassAnnotation marks a StorageClass as the default.
const IsDefaultClassAnnotation = volumes.IsDefaultClassAnnotation

// BasePath is where local-path-provisioner puts volumes on kind's nodes.
const BasePath = "/var/local-path-provisioner"

// classFieldManager is the field manager of the default class: kind
// applies its storage manifest with kubectl apply.
const classFieldManager = "kubectl-client-side-apply"

// failedThreshold is how many times in a row a claim's provisioning or a
// volume's deletion is tried before giving up until its next change, the
// library's default.
const failedThreshold = 15

// Controller is the simulated provisioner.
type Controller struct {
	controller.Parts
	client  kubernetes.Interface
	claims  corev1listers.PersistentVolumeClaimLister
	volumes corev1listers.PersistentVolumeLister
	classes storagelisters.StorageClassLister
	synced  []cache.InformerSynced
	ready   <-chan struct{}
	// classQueued is set once the default class's creation is queued, so
	// that Idle does not miss it between Ready and the queue.
	classQueued atomic.Bool
	component   string

	claimQueue, volumeQueue, classQueue *controller.Queue
	// events is set by Run before its workers start.
	events record.EventRecorder
}

// New returns the provisioner of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	client, err := provisionerClient(cfg)
	if err != nil {
		return nil, err
	}
	core, classes := cfg.Informers.Core().V1(), cfg.Informers.Storage().V1().StorageClasses()
	c := &Controller{client: client, claims: core.PersistentVolumeClaims().Lister(), volumes: core.PersistentVolumes().Lister(),
		classes: classes.Lister(), ready: cfg.Ready, component: component(),
		// Upstream's queues are "claims" and "volumes", as the PV
		// controller's: in one process their metrics must differ.
		claimQueue:  controller.NewQueue("provisioner_claims", cfg.QueueMetrics),
		volumeQueue: controller.NewQueue("provisioner_volumes", cfg.QueueMetrics),
		classQueue:  controller.NewQueue("provisioner_default_class", cfg.QueueMetrics)}
	c.Name, c.Observer = string(controllers.VolumeProvisioner), controller.NewObserver(cfg.Revisions)
	c.Events = controller.NewEvents(c.client)
	c.Queues, c.Busy = []*controller.Queue{c.claimQueue, c.volumeQueue, c.classQueue}, c.busy
	c.synced = []cache.InformerSynced{classes.Informer().HasSynced}
	queue := func(q *controller.Queue) cache.ResourceEventHandlerFuncs {
		add := func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				q.Add(key)
			}
		}
		return cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, o any) { add(o) }}
	}
	for _, w := range []struct {
		resource string
		informer cache.SharedIndexInformer
		queue    *controller.Queue
	}{{"persistentvolumeclaims", core.PersistentVolumeClaims().Informer(), c.claimQueue}, {"persistentvolumes", core.PersistentVolumes().Informer(), c.volumeQueue}} {
		if err := c.Observer.Watch(corev1.Resource(w.resource), w.informer, queue(w.queue)); err != nil {
			return nil, fmt.Errorf("watch %s: %w", w.resource, err)
		}
		c.synced = append(c.synced, w.informer.HasSynced)
	}
	return c, nil
}

// provisionerClient is a client of its own, named as kind's provisioner.
func provisionerClient(cfg controllers.Config) (kubernetes.Interface, error) {
	if cfg.RESTConfig == nil {
		return cfg.Client, nil
	}
	rc := rest.CopyConfig(cfg.RESTConfig)
	rc.UserAgent = "local-path-provisioner/v" + version.Kubernetes()
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("provisioner client: %w", err)
	}
	return client, nil
}

// component is the library's event source: the provisioner's name, its
// host's name and a UUID (which tells two provisioners on a host apart).
func component() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return Name + "_" + host + "_" + string(uuid.NewUUID())
}

// busy: the server is ready and the default class is not queued yet.
func (c *Controller) busy() error {
	select {
	case <-c.ready:
		if !c.classQueued.Load() {
			return errors.New("default StorageClass not created yet")
		}
	default:
	}
	return nil
}

// Run provisions and deletes volumes until ctx ends, with the library's
// four workers for each, once its informers have synced; it creates the
// default class once the server is ready.
func (c *Controller) Run(ctx context.Context) {
	defer c.ShutDown() // also when ctx ends before the informers sync
	defer c.Events.Start()()
	c.events = c.Events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: c.component})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-ctx.Done():
		case <-c.ready:
			c.classQueue.Add(DefaultClass)
		}
		c.classQueued.Store(true)
	})
	wg.Go(func() { c.classQueue.Run(ctx, 1, c.createDefaultClass) })
	err := controller.Wait(ctx, func() error {
		for _, synced := range c.synced {
			if !synced() {
				return errors.New("informers not synced")
			}
		}
		return nil
	})
	if err == nil {
		wg.Go(func() { c.claimQueue.Run(ctx, 4, c.syncClaim) })
		wg.Go(func() { c.volumeQueue.Run(ctx, 4, c.syncVolume) })
	}
	wg.Wait()
}

// createDefaultClass creates kind's default class, unless a class of that
// name exists.
func (c *Controller) createDefaultClass(ctx context.Context, name string) error {
	if _, err := c.client.StorageV1().StorageClasses().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return err
	}
	class := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name, Annotations: map[string]string{IsDefaultClassAnnotation: "true"}},
		Provisioner:       Name,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	_, err := c.client.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{FieldManager: classFieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the default StorageClass %s: %w", name, err)
	}
	return nil
}
