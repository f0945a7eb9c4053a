// Package statefulset is kube-controller-manager's StatefulSet controller
// ("statefulset"), as v1.37.2 runs it (the default feature gates:
// MaxUnavailableStatefulSet and StatefulSetSemanticRevisionComparison on,
// StatefulSetRecreateStrategy off):
//
//   - a StatefulSet owns the pods named <set>-<ordinal> its selector
//     matches: it adopts orphans (the uid-guarded ownerReferences patch,
//     after reading itself uncached) and releases pods that no longer match
//     or are no longer named as its members; orphan ControllerRevisions its
//     selector matches are adopted too;
//   - its template is recorded in ControllerRevisions named
//     <set>-<hash> (internal/controller's history: upstream's hash, so
//     names and the pods' controller-revision-hash labels are a
//     cluster's); a template equal to an older revision rolls back to it
//     by renumbering it; a name taken by other data bumps
//     status.collisionCount; non-live revisions over revisionHistoryLimit
//     are deleted, oldest first;
//   - pods are created for the ordinals spec.ordinals.start ..
//     start+replicas-1, with the labels upstream sets
//     (controller-revision-hash, statefulset.kubernetes.io/pod-name,
//     apps.kubernetes.io/pod-index), hostname and subdomain, generateName
//     "<set>-", and a volume per volumeClaimTemplate bound to the claim
//     <template>-<set>-<ordinal>, created first (SuccessfulCreate "create
//     Claim ... success" events); OrderedReady creates one at a time, each
//     after its predecessors are Running, Ready and available
//     (minReadySeconds), and deletes from the highest ordinal, one at a
//     time; Parallel creates and deletes in slow-start batches;
//   - failed or succeeded pods are deleted and recreated;
//   - persistentVolumeClaimRetentionPolicy: claims get the set (WhenDeleted
//     Delete) or the scaled-down pod (WhenScaled Delete) as controller
//     owner so that the garbage collector deletes them; a conflicting
//     controller is reported (ConflictingController) and left alone;
//   - RollingUpdate deletes the pods above the partition whose revision is
//     not the update revision, highest first, within maxUnavailable
//     (Parallel: unavailable old pods first); OnDelete only creates pods of
//     the update revision where pods were deleted; pods below the partition
//     are recreated at the current revision;
//   - status: replicas, ready, available (ready for minReadySeconds, with a
//     requeue for when the next one becomes so), current and updated
//     replicas and revisions (the update completes when every pod is
//     updated and ready), collisionCount, observedGeneration; written with
//     PUT /status, retried on conflict.
//
// Events carry upstream's reasons and messages ("create Pod web-0 in
// StatefulSet web successful", "delete Pod ...", "create Claim ... Pod ...
// in StatefulSet ... success"). Writes are made with a client named
// statefulset-controller (field manager kube-controller-manager).
//
// The read-your-writes wait of StaleControllerConsistencyStatefulSet is
// kept (a sync waits, with the rate-limited requeue, until the informers
// show the controller's own last writes). Left out: the Recreate strategy
// (an alpha gate, off; the server refuses it), the LRU cache of the
// semantic revision comparison (the comparison is made each time; it is
// reached only when a revision's bytes differ from what this encoder
// writes), the API defaulting in that comparison (the set is from the
// server, already defaulted), metrics, and informer resyncs.
package statefulset

import (
	"context"
	"errors"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

// Upstream's figures: kube-controller-manager's --concurrent-statefulset-syncs.
const workers = 5

const clientName = "statefulset-controller"

var (
	setKind = appsv1.SchemeGroupVersion.WithKind("StatefulSet")
	podKind = corev1.SchemeGroupVersion.WithKind("Pod")
)

// Controller is the StatefulSet controller.
type Controller struct {
	controller.Parts
	client  kubernetes.Interface
	sets    appslisters.StatefulSetLister
	pods    cache.Indexer
	podList corelisters.PodLister
	claims  corelisters.PersistentVolumeClaimLister
	history controller.History
	queue   *controller.Queue
	clock   clock.WithTickerAndDelayedExecution
	written *consistency
}

// New returns the StatefulSet controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	client, err := controller.NamedClient(cfg, clientName)
	if err != nil {
		return nil, err
	}
	setInf := cfg.Informers.Apps().V1().StatefulSets()
	podInf := cfg.Informers.Core().V1().Pods()
	pvcInf := cfg.Informers.Core().V1().PersistentVolumeClaims()
	revInf := cfg.Informers.Apps().V1().ControllerRevisions()
	c := &Controller{client: client, sets: setInf.Lister(), pods: podInf.Informer().GetIndexer(), podList: podInf.Lister(),
		claims: pvcInf.Lister(), history: controller.History{Client: client, Lister: revInf.Lister()},
		queue: controller.NewQueue("statefulset", cfg.QueueMetrics), clock: cfg.Clock}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	c.written = newConsistency(map[string]cache.SharedIndexInformer{
		"pods": podInf.Informer(), "persistentvolumeclaims": pvcInf.Informer(), "statefulsets": setInf.Informer()})
	c.Name, c.Observer, c.Queues = "statefulset", controller.NewObserver(cfg.Revisions), []*controller.Queue{c.queue}
	c.Events = controller.NewEvents(client)
	if err := controller.AddOwnerIndex(c.pods); err != nil {
		return nil, err
	}
	return c, errors.Join(
		c.Observer.Watch(appsv1.Resource("statefulsets"), setInf.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.setChanged, UpdateFunc: func(_, obj any) { c.setChanged(obj) }, DeleteFunc: c.setChanged}),
		c.Observer.Watch(corev1.Resource("pods"), podInf.Informer(), c.podEvents()),
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

func key(m metav1.Object) string { return m.GetNamespace() + "/" + m.GetName() }

func (c *Controller) setChanged(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if s, ok := obj.(*appsv1.StatefulSet); ok {
		c.queue.Add(key(s))
	}
}

// podEvents routes pod events to the StatefulSets. Unlike the ReplicaSet
// controller's, an update that marks a pod deleted is as any other: the
// set replaces its pods in order, once they are gone.
func (c *Controller) podEvents() *controller.Dependents[*corev1.Pod, *appsv1.StatefulSet] {
	return &controller.Dependents[*corev1.Pod, *appsv1.StatefulSet]{
		Queue: c.queue, Kind: setKind.Kind,
		Get: func(ns, name string) (*appsv1.StatefulSet, error) { return c.sets.StatefulSets(ns).Get(name) },
		List: func(ns string) ([]*appsv1.StatefulSet, error) {
			return c.sets.StatefulSets(ns).List(labels.Everything())
		},
		Selector: func(s *appsv1.StatefulSet) *metav1.LabelSelector { return s.Spec.Selector },
		Updated:  c.podReadied,
	}
}

// podReadied queues s again after minReadySeconds when its pod just
// became ready, to count it available then.
func (c *Controller) podReadied(s *appsv1.StatefulSet, old, pod *corev1.Pod) {
	if !controller.PodReady(old) && controller.PodReady(pod) && s.Spec.MinReadySeconds > 0 {
		c.queue.AddAfterOn(c.clock, key(s), seconds(s.Spec.MinReadySeconds))
	}
}

func seconds(s int32) time.Duration { return time.Duration(s) * time.Second }
