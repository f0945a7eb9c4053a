// Package daemonset is kube-controller-manager's DaemonSet controller
// ("daemonset"), as v1.37.2 runs it:
//
//   - a DaemonSet runs one pod on every node its pods fit: the template's
//     nodeName, nodeSelector and required node affinity match the node,
//     and the node's NoSchedule and NoExecute taints are tolerated by the
//     template's tolerations plus those every daemon pod gets (not-ready
//     and unreachable NoExecute; disk-, memory- and pid-pressure and
//     unschedulable NoSchedule; network-unavailable for host network
//     pods), so a cordoned node still runs them; a pod already on a node
//     stays while the node's NoExecute taints are tolerated;
//   - it owns the pods its selector matches (adopting orphans, releasing
//     pods relabelled out) and creates the missing ones from its template
//     with the daemon tolerations, a required node affinity on
//     metadata.name that the scheduler binds to the node (not nodeName),
//     and the controller-revision-hash and pod-template-generation labels,
//     in slow-start batches of at most 250 a sync; it deletes the pods of
//     nodes it should no longer run on, the younger of two pods on a node,
//     succeeded pods, and failed pods with a backoff per node (1 s
//     doubling to 15 min) and a FailedDaemonPod event;
//   - its template's revisions are ControllerRevisions named
//     "<name>-<hash>" (the hash of the template and the collision count),
//     adopted, deduplicated, renumbered, and pruned to
//     revisionHistoryLimit (keeping those live pods still run);
//   - RollingUpdate replaces old pods within maxUnavailable (deleting
//     them, the manage loop creating the new ones) or within maxSurge
//     (creating the new pod beside the old one, deleting the old one once
//     the new one is available); OnDelete replaces only pods deleted;
//   - expectations keep a sync from creating or deleting again before the
//     informer has seen its last creates and deletes;
//   - its status counts the desired, current, misscheduled, ready,
//     updated, available and unavailable pods, with observedGeneration,
//     written with a PUT of /status retried once on a fresh read;
//   - nodes added, relabelled or retainted go through a queue of their own
//     that wakes the DaemonSets whose placement on them changes.
//
// Writes are made with a client named daemon-set-controller (field
// manager kube-controller-manager), events with daemonset-controller as
// their source (SuccessfulCreate, FailedCreate, SuccessfulDelete,
// FailedDelete, FailedDaemonPod, SucceededDaemonPod, SelectingAll), as
// upstream. Left out: the read-your-writes wait of
// StaleControllerConsistencyDaemonSet (an in-process server's informers
// catch up within the sync; expectations and resource versions guard the
// writes), the alpha taint comparison operators, the controller's
// metrics, and the 12 h informer resync.
package daemonset

import (
	"context"
	"errors"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

// Upstream's figures.
const (
	burstReplicas = 250
	// workers is kube-controller-manager's ConcurrentDaemonSetSyncs
	// default, for each of the two queues.
	workers           = 2
	statusRetries     = 1
	backoffInitial    = time.Second
	backoffMax        = 15 * time.Minute
	backoffGCInterval = time.Minute
	clientName        = "daemon-set-controller"
	eventComponent    = "daemonset-controller"
)

var controllerKind = appsv1.SchemeGroupVersion.WithKind("DaemonSet")

// Controller is the DaemonSet controller.
type Controller struct {
	controller.Parts
	client    kubernetes.Interface
	dsets     appslisters.DaemonSetLister
	revisions appslisters.ControllerRevisionLister
	nodes     corelisters.NodeLister
	pods      cache.Indexer
	queue     *controller.Queue
	nodeQueue *controller.Queue
	clock     clock.WithTickerAndDelayedExecution
	expect    *controller.Expectations
	backoff   *flowcontrol.Backoff
}

// New returns the DaemonSet controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	client, err := controller.NamedClient(cfg, clientName)
	if err != nil {
		return nil, err
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	dsInformer := cfg.Informers.Apps().V1().DaemonSets()
	crInformer := cfg.Informers.Apps().V1().ControllerRevisions()
	podInformer := cfg.Informers.Core().V1().Pods().Informer()
	nodeInformer := cfg.Informers.Core().V1().Nodes()
	c := &Controller{client: client, dsets: dsInformer.Lister(), revisions: crInformer.Lister(), nodes: nodeInformer.Lister(),
		pods: podInformer.GetIndexer(), queue: controller.NewQueue("daemonset", cfg.QueueMetrics),
		nodeQueue: controller.NewQueue("daemonset-node-updates", cfg.QueueMetrics), clock: clk,
		expect: controller.NewExpectations(), backoff: flowcontrol.NewFakeBackOff(backoffInitial, backoffMax, clk)}
	c.Name, c.Observer, c.Queues = string(controllers.DaemonSet), controller.NewObserver(cfg.Revisions), []*controller.Queue{c.queue, c.nodeQueue}
	c.Events = controller.NewEvents(client)
	if err := addIndexers(c.pods); err != nil {
		return nil, err
	}
	return c, errors.Join(
		c.Observer.Watch(appsv1.Resource("daemonsets"), dsInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.dsAdded, UpdateFunc: c.dsUpdated, DeleteFunc: c.dsDeleted}),
		c.Observer.Watch(appsv1.Resource("controllerrevisions"), crInformer.Informer(), c.revisionEvents()),
		c.Observer.Watch(corev1.Resource("pods"), podInformer, c.podEvents()),
		c.Observer.Watch(corev1.Resource("nodes"), nodeInformer.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.nodeAdded, UpdateFunc: c.nodeUpdated}),
	)
}

// Run syncs until ctx ends, with upstream's 2 workers per queue; the
// failed pods' backoff is garbage collected every minute.
func (c *Controller) Run(ctx context.Context) {
	defer c.Events.Start()()
	var wg sync.WaitGroup
	wg.Go(func() { c.nodeQueue.Run(ctx, workers, c.syncNode) })
	wg.Go(func() {
		t := c.clock.NewTicker(backoffGCInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
				c.backoff.GC()
			}
		}
	})
	c.queue.Run(ctx, workers, c.sync)
	wg.Wait()
}

func (c *Controller) recorder() record.EventRecorder {
	return c.Events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: eventComponent})
}

func key(m metav1.Object) string { return m.GetNamespace() + "/" + m.GetName() }

// The expectations of a DaemonSet are kept under two keys, its creates
// and its deletes, so that one sync can expect both (upstream's
// SetExpectations) with internal/controller.Expectations.
func addsKey(k string) string { return k + "#add" }
func delsKey(k string) string { return k + "#del" }

func (c *Controller) satisfied(k string) bool {
	return c.expect.Satisfied(addsKey(k)) && c.expect.Satisfied(delsKey(k))
}

func (c *Controller) forget(k string) {
	c.expect.Forget(addsKey(k))
	c.expect.Forget(delsKey(k))
}

func (c *Controller) enqueue(ds *appsv1.DaemonSet) { c.queue.Add(key(ds)) }

func (c *Controller) enqueueAfter(ds *appsv1.DaemonSet, d time.Duration) {
	c.queue.AddAfterOn(c.clock, key(ds), d)
}

func (c *Controller) dsAdded(obj any) {
	if ds, ok := obj.(*appsv1.DaemonSet); ok {
		c.enqueue(ds)
	}
}

// dsUpdated handles a DaemonSet replaced under its name (another uid) as
// the old one deleted first.
func (c *Controller) dsUpdated(oldObj, obj any) {
	old, ok1 := oldObj.(*appsv1.DaemonSet)
	cur, ok2 := obj.(*appsv1.DaemonSet)
	if !ok1 || !ok2 {
		return
	}
	if old.UID != cur.UID {
		c.dsDeleted(old)
	}
	c.enqueue(cur)
}

func (c *Controller) dsDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if ds, ok := obj.(*appsv1.DaemonSet); ok {
		c.forget(key(ds))
		c.enqueue(ds)
	}
}

func seconds(n int32) time.Duration { return time.Duration(n) * time.Second }
