// Package cronjob is kube-controller-manager's CronJob controller
// ("cronjob", upstream's CronJobControllerV2) as v1.37.2 runs it:
//
//   - a schedule is parsed as kube-apiserver validates it, with
//     robfig/cron's standard parser (five fields or a descriptor), in
//     spec.timeZone when set (an unknown zone: an UnknownTimeZone warning
//     and no Jobs);
//   - at each sync the most recent schedule time missed since the last
//     one (or the CronJob's creation, and within startingDeadlineSeconds)
//     gets a Job, unless it is already processed, too late (MissSchedule)
//     or, for concurrencyPolicy Forbid, a Job is still active
//     (JobAlreadyActive); Replace deletes the active Jobs first; more than
//     100 missed times are reported (TooManyMissedTimes); a suspended
//     CronJob starts none;
//   - a Job is named "<cronjob>-<scheduled time in unix minutes>", carries
//     the template's labels and annotations, the
//     batch.kubernetes.io/cronjob-scheduled-timestamp annotation and a
//     controller reference;
//   - the status lists the active Jobs (removing finished ones,
//     SawCompletedJob, and missing ones, MissingJob), the last schedule
//     time and the last successful completion time, written with a PUT of
//     /status; finished Jobs over successfulJobsHistoryLimit and
//     failedJobsHistoryLimit are deleted, oldest first (SuccessfulDelete);
//   - the CronJob is synced again just after its next schedule time.
//
// Time is the server's clock (controllers.Config.Clock): a test's fake
// clock, stepped past a schedule time, makes the CronJob fire. The clock
// does not move what the API server stamps itself: a CronJob's
// creationTimestamp, where its schedule starts, is the real time of its
// creation, and so are its Jobs' creationTimestamps.
//
// Writes are made with a client named cronjob-controller (field manager
// kube-controller-manager), events with that name as their source. Left
// out: the job creation skew metric.
package cronjob

import (
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"

	cronschedule "github.com/kubeembed/apiserver/internal/schedule"
)

// Upstream's figures and names.
const (
	workers    = 5
	clientName = "cronjob-controller"
	// uidIndex indexes Jobs by their controller's uid.
	uidIndex = "cronjob/controllerUID"
)

var cronJobKind = batchv1.SchemeGroupVersion.WithKind("CronJob")

// Controller is the CronJob controller.
type Controller struct {
	controller.Parts
	client   kubernetes.Interface
	cronJobs batchlisters.CronJobLister
	jobs     cache.Indexer
	queue    *controller.Queue
	// revisions are the server's last writes per resource.
	revisions controllers.Revisions
	clock     clock.WithTickerAndDelayedExecution
}

// New returns the CronJob controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	client, err := controller.NamedClient(cfg, clientName)
	if err != nil {
		return nil, err
	}
	cronJobs := cfg.Informers.Batch().V1().CronJobs()
	jobs := cfg.Informers.Batch().V1().Jobs().Informer()
	c := &Controller{client: client, cronJobs: cronJobs.Lister(), jobs: jobs.GetIndexer(),
		queue: controller.NewQueue("cronjob", cfg.QueueMetrics), clock: cfg.Clock, revisions: cfg.Revisions}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	c.Name, c.Observer, c.Queues = "cronjob", controller.NewObserver(cfg.Revisions), []*controller.Queue{c.queue}
	c.Events = controller.NewEvents(c.client)
	if _, ok := c.jobs.GetIndexers()[uidIndex]; !ok {
		if err := c.jobs.AddIndexers(cache.Indexers{uidIndex: controllerUID}); err != nil {
			return nil, fmt.Errorf("index jobs by controller: %w", err)
		}
	}
	return c, errors.Join(
		c.Observer.Watch(batchv1.Resource("cronjobs"), cronJobs.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.enqueue, UpdateFunc: c.cronJobUpdated, DeleteFunc: c.enqueue}),
		c.Observer.Watch(batchv1.Resource("jobs"), jobs, cache.ResourceEventHandlerFuncs{
			AddFunc: c.jobAdded, UpdateFunc: c.jobUpdated, DeleteFunc: c.jobDeleted}),
	)
}

func controllerUID(obj any) ([]string, error) {
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return nil, nil
	}
	if ref := metav1.GetControllerOf(job); ref != nil {
		return []string{string(ref.UID)}, nil
	}
	return nil, nil
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

func (c *Controller) enqueue(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if cj, ok := obj.(*batchv1.CronJob); ok {
		c.queue.Add(key(cj))
	}
}

// cronJobUpdated syncs a CronJob now, or, when its schedule or time zone
// changed, at its next schedule time (a bad schedule: an event).
func (c *Controller) cronJobUpdated(oldObj, obj any) {
	old, ok1 := oldObj.(*batchv1.CronJob)
	cj, ok2 := obj.(*batchv1.CronJob)
	if !ok1 || !ok2 {
		return
	}
	if old.Spec.Schedule == cj.Spec.Schedule && ptr.Equal(old.Spec.TimeZone, cj.Spec.TimeZone) {
		c.queue.Add(key(cj))
		return
	}
	sched, err := cronschedule.Parse(formatSchedule(cj, nil))
	if err != nil {
		c.recorder().Eventf(cj, corev1.EventTypeWarning, "UnParseableCronJobSchedule", "unparseable schedule for cronjob: %s", cj.Spec.Schedule)
		return
	}
	c.queue.AddAfterOn(c.clock, key(cj), nextSyncIn(cj, c.clock.Now(), sched))
}

// owner is the CronJob a Job's controller reference resolves to, if any.
func (c *Controller) owner(job *batchv1.Job, ref *metav1.OwnerReference) *batchv1.CronJob {
	if ref == nil || ref.Kind != cronJobKind.Kind {
		return nil
	}
	cj, err := c.cronJobs.CronJobs(job.Namespace).Get(ref.Name)
	if err != nil || cj.UID != ref.UID {
		return nil
	}
	return cj
}

func (c *Controller) jobAdded(obj any) {
	job, ok := obj.(*batchv1.Job)
	if !ok {
		return
	}
	if cj := c.owner(job, metav1.GetControllerOf(job)); cj != nil {
		c.queue.Add(key(cj))
	}
}

func (c *Controller) jobUpdated(oldObj, obj any) {
	old, ok1 := oldObj.(*batchv1.Job)
	job, ok2 := obj.(*batchv1.Job)
	if !ok1 || !ok2 || old.ResourceVersion == job.ResourceVersion {
		return
	}
	oldRef, ref := metav1.GetControllerOf(old), metav1.GetControllerOf(job)
	if oldRef != nil && !apiequality.Semantic.DeepEqual(oldRef, ref) {
		if cj := c.owner(old, oldRef); cj != nil {
			c.queue.Add(key(cj))
		}
	}
	if cj := c.owner(job, ref); cj != nil {
		c.queue.Add(key(cj))
	}
}

func (c *Controller) jobDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if job, ok := obj.(*batchv1.Job); ok {
		c.jobAdded(job)
	}
}
