// Package job is kube-controller-manager's job controller ("job", client
// job-controller), as v1.37.2 runs it:
//
//   - a Job owns the pods its selector matches (adopting orphans with a
//     patch that also adds the batch.kubernetes.io/job-tracking finalizer,
//     releasing pods that no longer match); it creates pods from its
//     template (generateName "<job>-", the template's labels, annotations
//     and finalizers plus the tracking finalizer, a controller reference)
//     up to parallelism and the completions left, in slow-start batches of
//     1, 2, 4, ... (at most 500 a sync), and deletes the surplus, the pods
//     in the earliest stages first;
//   - Indexed Jobs give each pod a completion index: the
//     batch.kubernetes.io/job-completion-index annotation and label, the
//     JOB_COMPLETION_INDEX variable, hostname "<job>-<index>", name
//     "<job>-<index>-<random>"; duplicated and out-of-range indexes are
//     deleted; completedIndexes and, with backoffLimitPerIndex,
//     failedIndexes (maxFailedIndexes, per-index back-off and the
//     index-failure-count annotations) are kept;
//   - finished pods are counted through status.uncountedTerminatedPods:
//     their uid is written there, then their tracking finalizer removed,
//     then they are moved to succeeded/failed; finalizer removals are
//     expected by pod uid until the informer shows them;
//   - the Job ends as upstream orders it: an existing SuccessCriteriaMet
//     or FailureTarget, podFailurePolicy (FailJob, Ignore, Count,
//     FailIndex over exit codes and pod conditions), backoffLimit (also
//     restarts of OnFailure pods), activeDeadlineSeconds, failed indexes,
//     successPolicy, then completions; FailureTarget and SuccessCriteriaMet
//     come first, Failed and Complete once no pod is left to count or
//     terminating, with upstream's reasons, messages and events;
//   - failed pods are replaced after an exponential back-off (10 s
//     doubling, at most 10 min: upstream's constants), on the server's
//     clock like the deadline; podReplacementPolicy Failed waits for
//     terminating pods to end; suspend deletes the active pods and sets
//     the Suspended condition (startTime cleared, reset on resume);
//   - Jobs whose managedBy names another controller are left alone;
//     orphaned pods (their Job gone or finished) lose the tracking
//     finalizer through a second queue.
//
// Writes are made with the client job-controller (field manager
// kube-controller-manager), events with that source. Of
// StaleControllerConsistencyJob's read-your-writes, a sync skips a Job
// whose cached copy is older than the controller's last status write to
// it (pod writes are guarded by the expectations). Left out: the one
// second batching of pod events (a sync follows each event at once: the
// same outcome, sooner, except for a pod's transient states), the
// Workload/PodGroup management of the alpha WorkloadWithJob gate (off by
// default), and metrics.
package job

import (
	"context"
	"errors"
	"strconv"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

// Upstream's figures.
const (
	workers    = 5
	clientName = "job-controller"
)

var jobKind = batchv1.SchemeGroupVersion.WithKind("Job")

// Controller is the job controller.
type Controller struct {
	controller.Parts
	client  kubernetes.Interface
	jobs    batchlisters.JobLister
	pods    cache.Indexer
	queue   *controller.Queue
	orphans *controller.Queue
	clock   clock.WithTickerAndDelayedExecution
	expect  *controller.Expectations
	// finalizers are the pods (by uid) whose tracking finalizer a sync
	// removed and the informer has not shown removed yet.
	finalizers *uidExpectations
	backoff    *backoffStore
	// finished are the Jobs (by uid) written finished whose update the
	// informer has not shown yet.
	finished sync.Map
	// written is, per Job key, the resourceVersion of the controller's
	// last status write: a sync skips a Job its informer shows older (the
	// write's event brings the Job back), as upstream's consistency store.
	written sync.Map
}

// New returns the job controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	client, err := controller.NamedClient(cfg, clientName)
	if err != nil {
		return nil, err
	}
	jobs := cfg.Informers.Batch().V1().Jobs()
	pods := cfg.Informers.Core().V1().Pods().Informer()
	c := &Controller{client: client, jobs: jobs.Lister(), pods: pods.GetIndexer(), clock: cfg.Clock,
		queue: controller.NewQueue("job", cfg.QueueMetrics), orphans: controller.NewQueue("job_orphan_pod", cfg.QueueMetrics),
		expect: controller.NewExpectations(), finalizers: newUIDExpectations(), backoff: newBackoffStore()}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	c.Name, c.Observer, c.Queues = string(controllers.Job), controller.NewObserver(cfg.Revisions), []*controller.Queue{c.queue, c.orphans}
	c.Events = controller.NewEvents(client)
	if err := controller.AddOwnerIndex(c.pods); err != nil {
		return nil, err
	}
	return c, errors.Join(
		c.Observer.Watch(batchv1.Resource("jobs"), jobs.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.jobAdded, UpdateFunc: c.jobUpdated, DeleteFunc: c.jobDeleted}),
		c.Observer.Watch(corev1.Resource("pods"), pods, c.podEvents()),
	)
}

// Run syncs until ctx ends, with upstream's 5 workers for each queue.
func (c *Controller) Run(ctx context.Context) {
	defer c.Events.Start()()
	var wg sync.WaitGroup
	wg.Go(func() { c.orphans.Run(ctx, workers, c.syncOrphan) })
	c.queue.Run(ctx, workers, c.sync)
	wg.Wait()
}

func (c *Controller) recorder() record.EventRecorder {
	return c.Events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: clientName})
}

func key(m metav1.Object) string { return m.GetNamespace() + "/" + m.GetName() }

func (c *Controller) jobAdded(obj any) {
	if j, ok := obj.(*batchv1.Job); ok {
		c.queue.Add(key(j))
	}
}

func (c *Controller) jobUpdated(oldObj, obj any) {
	old, ok1 := oldObj.(*batchv1.Job)
	cur, ok2 := obj.(*batchv1.Job)
	if !ok1 || !ok2 {
		return
	}
	if old.UID != cur.UID {
		c.jobDeleted(old)
	}
	if finished(cur) {
		// The finalizers are removed before a Job finishes: this is
		// a backup.
		c.orphansOf(cur)
		return
	}
	c.queue.Add(key(cur))
	if cur.Status.StartTime == nil || cur.Spec.ActiveDeadlineSeconds == nil {
		return
	}
	if ads := old.Spec.ActiveDeadlineSeconds; ads == nil || *ads != *cur.Spec.ActiveDeadlineSeconds {
		left := seconds(*cur.Spec.ActiveDeadlineSeconds) - c.clock.Since(cur.Status.StartTime.Time)
		c.queue.AddAfterOn(c.clock, key(cur), max(left, 0))
	}
}

func (c *Controller) jobDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	j, ok := obj.(*batchv1.Job)
	if !ok {
		return
	}
	c.queue.Add(key(j))
	c.finished.Delete(j.UID)
	c.orphansOf(j)
	c.expect.Forget(key(j))
	c.backoff.remove(key(j))
	c.written.Delete(key(j))
}

// stale: the informer has not shown the controller's last status write to
// j yet.
func (c *Controller) stale(j *batchv1.Job) bool {
	w, ok := c.written.Load(key(j))
	if !ok {
		return false
	}
	last := w.(written)
	rv, err := strconv.ParseUint(j.ResourceVersion, 10, 64)
	return err == nil && last.uid == j.UID && rv < last.rv
}

type written struct {
	uid types.UID
	rv  uint64
}

// wrote notes a status write of the controller.
func (c *Controller) wrote(j *batchv1.Job) {
	if rv, err := strconv.ParseUint(j.ResourceVersion, 10, 64); err == nil {
		c.written.Store(key(j), written{uid: j.UID, rv: rv})
	}
}

// resolve is the Job ref names, if it is that Job.
func (c *Controller) resolve(ns string, ref *metav1.OwnerReference) *batchv1.Job {
	j, _ := controller.Resolve(ns, ref, jobKind.Kind, c.getJob)
	return j
}

func (c *Controller) getJob(ns, name string) (*batchv1.Job, error) { return c.jobs.Jobs(ns).Get(name) }

// podEvents routes pod events to the Jobs. Besides expectations, pods'
// tracking finalizers are followed: a removal seen settles the removal a
// sync of the pod's Job expects, and a pod with the finalizer that no Job
// will count (an orphan; being deleted, one whose Job is gone or finished)
// goes to the orphan queue to have it removed.
func (c *Controller) podEvents() *controller.Dependents[*corev1.Pod, *batchv1.Job] {
	removed := func(j *batchv1.Job, _, pod *corev1.Pod) {
		if !hasFinalizer(pod) {
			c.finalizers.observed(key(j), pod.UID)
		}
	}
	return &controller.Dependents[*corev1.Pod, *batchv1.Job]{
		Queue: c.queue, Kind: jobKind.Kind, Get: c.getJob,
		List:        func(ns string) ([]*batchv1.Job, error) { return c.jobs.Jobs(ns).List(labels.Everything()) },
		Selector:    func(j *batchv1.Job) *metav1.LabelSelector { return j.Spec.Selector },
		Terminating: controller.TerminatingDeletes,
		Created:     func(j *batchv1.Job, _ *corev1.Pod) { c.expect.Created(key(j)) },
		Updated:     removed,
		Previous:    removed,
		Orphan: func(pod *corev1.Pod) {
			if hasFinalizer(pod) {
				c.orphanPod(pod)
			}
		},
		Gone: c.podGone,
	}
}

// podGone handles a pod gone (final) or being deleted.
func (c *Controller) podGone(pod *corev1.Pod, final bool) {
	j := c.resolve(pod.Namespace, metav1.GetControllerOf(pod))
	if j == nil || finished(j) {
		if hasFinalizer(pod) {
			c.orphanPod(pod)
		}
		return
	}
	k := key(j)
	c.expect.Deleted(k, key(pod))
	if final || !hasFinalizer(pod) {
		c.finalizers.observed(k, pod.UID)
	}
	c.queue.Add(k)
}
