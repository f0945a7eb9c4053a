// Package scheduler is a kubeembed server's kube-scheduler: the default
// profile (default-scheduler) for the pods that name it, written here from
// kube-scheduler v1.37.2's behaviour. It filters nodes as its default
// plugins do (NodeUnschedulable, TaintToleration, NodeAffinity, NodePorts,
// NodeResourcesFit, VolumeBinding, PodTopologySpread, InterPodAffinity),
// scores the ones that fit with the default weights, binds through
// pods/binding and records Scheduled; a pod that fits nowhere gets the
// PodScheduled condition Unschedulable and a FailedScheduling event with
// kube-scheduler's message ("0/3 nodes are available: 3 Insufficient
// cpu. preemption: ..."), and is tried again when the cluster changes.
//
// A pod that fits nowhere may preempt pods of lower priority, as the
// DefaultPreemption plugin (preempt.go); pods nominated to a node hold
// its room against pods of no higher priority.
//
// What it does not do: extenders, scheduling gates' own logic (gated pods
// are left alone, as upstream), DRA, CSI volume limits and storage
// capacity. Pending pods are taken in priority order, then by age.
//
// It is a client of the API only (user agent kube-scheduler/v1.37.2, field
// manager kube-scheduler; events through events.k8s.io as
// default-scheduler), so it runs against any API server.
package scheduler

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	policyv1listers "k8s.io/client-go/listers/policy/v1"
	storagev1listers "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	ndf "k8s.io/component-helpers/nodedeclaredfeatures"
	"k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/admission"
	"github.com/kubeembed/apiserver/internal/controller"
	"github.com/kubeembed/apiserver/internal/nodefeatures"
	"github.com/kubeembed/apiserver/internal/version"
)

// Name is the profile's, the pods' spec.schedulerName and the events'
// reporting controller.
const Name = corev1.DefaultSchedulerName

// pending is the one key of the queue: a cycle schedules every pending pod.
const pending = "pending"

// Scheduler is the default scheduler.
type Scheduler struct {
	controller.Parts
	client     kubernetes.Interface
	pods       corev1listers.PodLister
	nodes      corev1listers.NodeLister
	namespaces corev1listers.NamespaceLister
	pvcs       corev1listers.PersistentVolumeClaimLister
	pvs        corev1listers.PersistentVolumeLister
	classes    storagev1listers.StorageClassLister
	pdbs       policyv1listers.PodDisruptionBudgetLister
	queue      *controller.Queue
	recorder   events.EventRecorderLogger

	mu sync.Mutex
	// assumed are pods bound whose binding the informer has not shown yet;
	// waiting the pods whose claims are provisioned for a node.
	assumed  map[types.UID]*corev1.Pod
	waiting  map[types.UID]provisioning
	requests *requestCache
	// unschedulable are the pods found to fit nowhere, with the message
	// why, kept aside until retry says (queue.go).
	unschedulable map[types.UID]string
	// nominations are the nominations the scheduler wrote (or cleared:
	// "") that the informer may not show yet, by pod.
	nominations map[types.UID]string
	// placedAt is the order the scheduler saw pods placed on nodes (its
	// cache's order, which breaks preemption's ties between victims).
	placedAt   map[types.UID]uint64
	placements uint64
	retry      retry
	// stale says the kept snapshot no longer shows the placed pods or
	// the nodes (snapshot.go); kept is only the worker's.
	stale bool
	kept  *snapshot
}

// New returns the scheduler of cfg's server.
func New(cfg controllers.Config) (*Scheduler, error) {
	if cfg.RESTConfig == nil {
		return nil, fmt.Errorf("scheduler: controllers.Config.RESTConfig is required")
	}
	rc := rest.CopyConfig(cfg.RESTConfig)
	rc.UserAgent = "kube-scheduler/v" + version.Kubernetes() + " (linux/amd64) kubernetes/kubeembed/scheduler"
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	inf := cfg.Informers
	s := &Scheduler{client: client, pods: inf.Core().V1().Pods().Lister(), nodes: inf.Core().V1().Nodes().Lister(),
		namespaces: inf.Core().V1().Namespaces().Lister(), pvcs: inf.Core().V1().PersistentVolumeClaims().Lister(),
		pvs: inf.Core().V1().PersistentVolumes().Lister(), classes: inf.Storage().V1().StorageClasses().Lister(),
		pdbs: inf.Policy().V1().PodDisruptionBudgets().Lister(), nominations: map[types.UID]string{}, placedAt: map[types.UID]uint64{},
		queue: controller.NewQueue("scheduler", cfg.QueueMetrics), assumed: map[types.UID]*corev1.Pod{}, waiting: map[types.UID]provisioning{}, unschedulable: map[types.UID]string{},
		requests: newRequestCache(), stale: true}
	s.Name, s.Observer, s.Queues = string(controllers.Scheduler), controller.NewObserver(cfg.Revisions), []*controller.Queue{s.queue}
	// events.k8s.io/v1 events, as kube-scheduler's broadcaster writes them
	// (its reporting instance is <controller>-<hostname>).
	s.Events = controller.NewEvents(client)
	s.recorder = s.Events.NewEventsV1Recorder(eventScheme(), Name)
	return s, s.watch(cfg)
}

// watch runs a cycle whenever something a pending pod may wait for
// changes (see queue.go): a pod, a node, a claim, a volume, a class.
func (s *Scheduler) watch(cfg controllers.Config) error {
	all := func(any) { s.requeue(retryAll) }
	anyUpdate := cache.ResourceEventHandlerFuncs{AddFunc: all, UpdateFunc: func(_, o any) { all(o) }, DeleteFunc: all}
	inf := cfg.Informers
	for gr, informer := range map[string]cache.SharedIndexInformer{
		"persistentvolumeclaims": inf.Core().V1().PersistentVolumeClaims().Informer(),
		"persistentvolumes":      inf.Core().V1().PersistentVolumes().Informer(),
	} {
		if err := s.Observer.Watch(corev1.Resource(gr), informer, anyUpdate); err != nil {
			return err
		}
	}
	if err := s.Observer.Watch(storagev1.Resource("storageclasses"), inf.Storage().V1().StorageClasses().Informer(), anyUpdate); err != nil {
		return err
	}
	if err := s.Observer.Watch(corev1.Resource("nodes"), inf.Core().V1().Nodes().Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: func(n any) { s.invalidate(); all(n) },
		UpdateFunc: func(o, n any) {
			s.invalidate()
			if nodeChanged(o.(*corev1.Node), n.(*corev1.Node)) {
				all(n)
			}
		},
		DeleteFunc: func(any) { s.invalidate() },
	}); err != nil {
		return err
	}
	if err := s.Observer.Watch(corev1.Resource("namespaces"), inf.Core().V1().Namespaces().Informer(), cache.ResourceEventHandlerFuncs{}); err != nil {
		return err
	}
	// Budgets are read by preemption only, when it chooses victims.
	if err := s.Observer.Watch(policyv1.Resource("poddisruptionbudgets"), inf.Policy().V1().PodDisruptionBudgets().Informer(), cache.ResourceEventHandlerFuncs{}); err != nil {
		return err
	}
	return s.Observer.Watch(corev1.Resource("pods"), inf.Core().V1().Pods().Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    s.podAdded,
		UpdateFunc: func(o, n any) { s.podChanged(o.(*corev1.Pod), n.(*corev1.Pod)) },
		DeleteFunc: s.podDeleted,
	})
}

// podDeleted forgets the pod; a placed pod's room is free.
func (s *Scheduler) podDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	s.mu.Lock()
	if p.Spec.NodeName != "" || s.assumed[p.UID] != nil {
		s.stale = true
	}
	// A nominated pod held room on its node against others.
	nominated := p.Spec.NodeName == "" && (p.Status.NominatedNodeName != "" || s.nominations[p.UID] != "")
	delete(s.assumed, p.UID)
	delete(s.waiting, p.UID)
	delete(s.unschedulable, p.UID)
	delete(s.nominations, p.UID)
	delete(s.placedAt, p.UID)
	s.mu.Unlock()
	s.requests.forget(p.UID)
	if p.Spec.NodeName != "" || nominated {
		s.requeue(retryAll)
	}
}

// Run schedules until ctx ends.
func (s *Scheduler) Run(ctx context.Context) {
	defer s.ShutDown()
	defer s.Events.Start()()
	s.queue.Add(pending)
	s.queue.Run(ctx, 1, s.schedulePending)
}

// schedulePending is one scheduling cycle: every pending pod, the highest
// priority and oldest first, against one snapshot updated as pods are
// placed.
func (s *Scheduler) schedulePending(ctx context.Context, _ string) error {
	// Taken before the list: a change the list misses marks the
	// snapshot stale again once its handler runs.
	s.mu.Lock()
	stale := s.stale
	s.stale = false
	s.mu.Unlock()
	all, err := s.pods.List(labels.Everything())
	if err != nil {
		s.kept = nil
		return err
	}
	s.mu.Lock()
	r := s.retry
	s.retry = retryNone
	queue, placed, gone := s.partition(all, r)
	nominated := s.nominees(all)
	s.mu.Unlock()
	snap, err := s.snapshot(placed, stale || gone)
	if err != nil {
		s.kept = nil
		return err
	}
	snap.nominated = nominated
	slices.SortStableFunc(queue, byPriority)
	var errs []error
	for _, p := range queue {
		if err := s.scheduleOne(ctx, p, snap); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("schedule: %v", errs)
	}
	return nil
}

// partition splits the informer's pods into those to schedule and those
// that hold room on a node, with s.mu held. An assumed pod that the
// informer shows bound, or no longer has, is forgotten here rather than in
// the event handlers only: the binding can reach the informer before bind
// records the assumption, and a pod counted twice on its node refuses
// pods that fit. gone says an assumed pod is no longer there at all: its
// delete's handler, which may run after this, cannot tell that the kept
// snapshot still counts it, so the snapshot is rebuilt.
func (s *Scheduler) partition(all []*corev1.Pod, r retry) (queue, placed []*corev1.Pod, gone bool) {
	// What the list says of the assumed pods only: a map of every pod,
	// made at every cycle, was ~30 MB of allocation for 1,000 pods.
	listed := make(map[types.UID]bool, len(s.assumed))
	for _, p := range all {
		switch {
		case p.Spec.NodeName != "":
			if s.assumed[p.UID] != nil {
				listed[p.UID] = true
			}
			if !podEnded(p) {
				placed = append(placed, p)
			}
		case s.assumed[p.UID] != nil:
			listed[p.UID] = false // still unbound: the assumption holds
		case p.Spec.SchedulerName == Name && p.DeletionTimestamp == nil && len(p.Spec.SchedulingGates) == 0 && s.tryAgain(p, r):
			queue = append(queue, p)
		}
	}
	for uid, p := range s.assumed {
		bound, ok := listed[uid]
		if !ok || bound {
			gone = gone || !ok
			delete(s.assumed, uid)
			continue
		}
		placed = append(placed, p)
	}
	return queue, placed, gone
}

// podEnded: a pod that Succeeded or Failed holds no room on its node.
func podEnded(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func byPriority(a, b *corev1.Pod) int {
	if pa, pb := corev1helpers.PodPriority(a), corev1helpers.PodPriority(b); pa != pb {
		return int(pb) - int(pa)
	}
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
}

// snapshot is the nodes with the pods placed on them: the last cycle's,
// with the pods it placed, unless stale.
func (s *Scheduler) snapshot(placed []*corev1.Pod, stale bool) (*snapshot, error) {
	namespaces := map[string]map[string]string{}
	nsList, _ := s.namespaces.List(labels.Everything())
	for _, ns := range nsList {
		namespaces[ns.Name] = ns.Labels
	}
	if !stale && s.kept != nil {
		s.kept.namespaces = namespaces
		return s.kept, nil
	}
	nodes, err := s.nodes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	s.kept = newSnapshot(nodes, placed, namespaces, s.requests)
	return s.kept, nil
}

// invalidate marks the kept snapshot stale.
func (s *Scheduler) invalidate() {
	s.mu.Lock()
	s.stale = true
	s.mu.Unlock()
}

// cycle is one pod's scheduling attempt.
type cycle struct {
	s    *Scheduler
	pod  *corev1.Pod
	snap *snapshot
	// requests are the pod's; nonZero with the scoring's defaults.
	requests, nonZero corev1.ResourceList
	claims            claims
	spread            []spreadConstraint
	// affinity and antiAffinity are the pod's required terms; refused
	// the domains placed pods' anti-affinity refuses it.
	affinity, antiAffinity []affinityTerm
	refused                map[string]map[string]bool
	// features are what the pod needs its node to declare.
	features ndf.FeatureSet
}

func (s *Scheduler) newCycle(pod *corev1.Pod, snap *snapshot) *cycle {
	c := &cycle{s: s, pod: pod, snap: snap, requests: resource.PodRequests(pod, resource.PodResourcesOptions{}),
		nonZero: resource.PodRequests(pod, resource.PodResourcesOptions{NonMissingContainerRequests: nonZero}),
		spread:  spreadConstraints(pod, snap), refused: refusedDomains(pod, snap)}
	// The spec alone, as the NodeDeclaredFeatures plugin infers them.
	c.features, _ = ndf.DefaultFramework.InferForPodScheduling(&ndf.PodInfo{Spec: &pod.Spec}, nodefeatures.Version())
	if a := pod.Spec.Affinity; a != nil && a.PodAffinity != nil {
		c.affinity = terms(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, pod.Namespace, snap.namespaces)
	}
	if a := pod.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		c.antiAffinity = terms(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, pod.Namespace, snap.namespaces)
	}
	return c
}

// scheduleOne places one pod, or records why it cannot be placed.
func (s *Scheduler) scheduleOne(ctx context.Context, pod *corev1.Pod, snap *snapshot) error {
	s.mu.Lock()
	p, waiting := s.waiting[pod.UID]
	s.mu.Unlock()
	if waiting {
		return s.bindWhenVolumesBound(ctx, pod, p, snap)
	}
	if len(snap.nodes) == 0 {
		return s.fail(ctx, snap, pod, "no nodes available to schedule pods")
	}
	c := s.newCycle(pod, snap)
	var msg string
	if c.claims, msg = s.prefilterVolumes(pod); msg != "" {
		// As v1.37.2: the dynamic resources plugin's PostFilter finds no
		// state of its PreFilter, which did not run, and says so.
		// Its error leaves the pod's nomination as it is.
		return s.failWith(ctx, snap, pod, corev1.PodReasonUnschedulable, snap.nominatedNode(pod),
			fmt.Sprintf("0/%d nodes are available: %s. not found", len(snap.nodes), msg))
	}
	chosen, statuses := c.place()
	if chosen == nil {
		return s.postFilter(ctx, c, statuses)
	}
	if len(c.claims.delayed) > 0 {
		return s.provisionFor(ctx, pod, c.claims.delayed, chosen.node.Name)
	}
	return s.bind(ctx, pod, chosen, snap)
}

// place is the node the pod goes to, nil if none fits (with why each
// does not): the node it is nominated to if it fits there, as upstream
// tries it first, else the best of those that fit.
func (c *cycle) place() (*nodeInfo, map[string]*status) {
	if ni := c.snap.byName[c.snap.nominatedNode(c.pod)]; ni != nil && c.filter(ni) == nil && c.filterNominated(ni.node.Name, nil) == nil {
		return ni, nil
	}
	var feasible []*nodeInfo
	statuses := map[string]*status{}
	for _, ni := range c.snap.nodes {
		// With the nominated pods first, as upstream, whose reasons
		// are the node's when both refuse it.
		st := c.filterNominated(ni.node.Name, nil)
		if st == nil {
			st = c.filter(ni)
		}
		if st != nil {
			statuses[ni.node.Name] = st
		} else {
			feasible = append(feasible, ni)
		}
	}
	if len(feasible) == 0 {
		return nil, statuses
	}
	return c.best(feasible), nil
}

// provisionFor names node on the pod's delayed claims and waits for them.
func (s *Scheduler) provisionFor(ctx context.Context, pod *corev1.Pod, delayed []*corev1.PersistentVolumeClaim, node string) error {
	selected, err := s.selectNode(ctx, pod, delayed, node)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.waiting[pod.UID] = provisioning{node, selected}
	s.mu.Unlock()
	return nil
}

// bindWhenVolumesBound binds a pod waiting for its claims once they are
// bound, or gives the node up when their provisioning failed.
func (s *Scheduler) bindWhenVolumesBound(ctx context.Context, pod *corev1.Pod, p provisioning, snap *snapshot) error {
	bound, err := s.volumesBound(pod, p)
	if err != nil {
		s.mu.Lock()
		delete(s.waiting, pod.UID)
		s.mu.Unlock()
		return s.failWith(ctx, snap, pod, "SchedulerError", "", fmt.Sprintf("running PreBind plugin \"VolumeBinding\": binding volumes: %v", err))
	}
	ni := snap.byName[p.node]
	if !bound || ni == nil {
		return nil // the claims' changes start another cycle
	}
	s.mu.Lock()
	delete(s.waiting, pod.UID)
	s.mu.Unlock()
	return s.bind(ctx, pod, ni, snap)
}

// bind binds the pod as the default binder does, and counts it on the
// node for the rest of the cycle.
func (s *Scheduler) bind(ctx context.Context, pod *corev1.Pod, ni *nodeInfo, snap *snapshot) error {
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target: corev1.ObjectReference{Kind: "Node", Name: ni.node.Name}}
	err := s.client.CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // deleted, recreated or bound meanwhile: the next cycle sees it
	}
	if err != nil {
		return s.failWith(ctx, snap, pod, "SchedulerError", "", fmt.Sprintf("running Bind plugin \"DefaultBinder\": %v", err))
	}
	s.nominate(snap, pod, "") // the binding clears it
	s.placed(pod)
	assumed := pod.DeepCopy()
	assumed.Spec.NodeName = ni.node.Name
	// The binding's admission (PodTopologyLabels) gives the pod its
	// node's zone and region: the snapshot counts it as the informer
	// will show it.
	if l := admission.NodeTopologyLabels(ni.node); len(l) > 0 {
		if assumed.Labels == nil {
			assumed.Labels = map[string]string{}
		}
		maps.Copy(assumed.Labels, l)
	}
	s.mu.Lock()
	s.assumed[pod.UID] = assumed
	s.mu.Unlock()
	snap.add(ni, assumed)
	s.recorder.Eventf(pod, nil, corev1.EventTypeNormal, "Scheduled", "Binding", "Successfully assigned %s/%s to %s", pod.Namespace, pod.Name, ni.node.Name)
	return nil
}
