// Package ttlafterfinished is kube-controller-manager's TTL-after-finished
// controller ("ttl-after-finished") as v1.37.2 runs it: a Job with
// spec.ttlSecondsAfterFinished is deleted that many seconds after the
// lastTransitionTime of its Complete or Failed condition. It is looked at
// when it is added or updated, again when its time comes, and read from
// the API server once more before it is deleted (its TTL may have been
// changed); the delete is in the foreground (the garbage collector
// deletes the pods first) with the uid as precondition.
//
// Time is the server's clock (controllers.Config.Clock): a test's fake
// clock, stepped past a Job's expiry, has it deleted. The condition's
// lastTransitionTime is whatever the Job controller (or whoever finished
// the Job) wrote.
//
// Deletes are made with a client named ttl-after-finished-controller
// (field manager kube-controller-manager). Left out: the deletion latency
// metric, and the event broadcaster upstream starts and never records
// with.
package ttlafterfinished

import (
	"context"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

// Upstream's figure.
const workers = 5

// Controller is the TTL-after-finished controller.
type Controller struct {
	controller.Parts
	client kubernetes.Interface
	jobs   batchlisters.JobLister
	queue  *controller.Queue
	clock  clock.WithTickerAndDelayedExecution
}

// New returns the TTL-after-finished controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	client, err := controller.NamedClient(cfg, "ttl-after-finished-controller")
	if err != nil {
		return nil, err
	}
	jobs := cfg.Informers.Batch().V1().Jobs()
	c := &Controller{client: client, jobs: jobs.Lister(), queue: controller.NewQueue("ttl_jobs_to_delete", cfg.QueueMetrics), clock: cfg.Clock}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	c.Name, c.Observer, c.Queues = "ttl-after-finished", controller.NewObserver(cfg.Revisions), []*controller.Queue{c.queue}
	return c, c.Observer.Watch(batchv1.Resource("jobs"), jobs.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.jobChanged,
		UpdateFunc: func(_, obj any) { c.jobChanged(obj) },
	})
}

// Run syncs until ctx ends, with upstream's 5 workers.
func (c *Controller) Run(ctx context.Context) { c.queue.Run(ctx, workers, c.sync) }

func (c *Controller) jobChanged(obj any) {
	if job, ok := obj.(*batchv1.Job); ok && job.DeletionTimestamp == nil && needsCleanup(job) {
		c.queue.Add(job.Namespace + "/" + job.Name)
	}
}

// sync deletes a Job whose TTL has passed, on the cache's word and then
// the API server's, or comes back to it when it will have.
func (c *Controller) sync(ctx context.Context, k string) error {
	ns, name, _ := strings.Cut(k, "/")
	job, err := c.jobs.Jobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if expired, err := c.expired(ctx, k, job); err != nil || !expired {
		return err
	}
	fresh, err := c.client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get job: %w", err)
	}
	if expired, err := c.expired(ctx, k, fresh); err != nil || !expired {
		return err
	}
	err = c.client.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationForeground),
		Preconditions:     &metav1.Preconditions{UID: &fresh.UID}})
	if err != nil {
		return fmt.Errorf("delete job: %w", err)
	}
	return nil
}

// expired reports whether job's TTL has passed; if it is yet to, the job
// is queued again for then.
func (c *Controller) expired(ctx context.Context, k string, job *batchv1.Job) (bool, error) {
	if job.DeletionTimestamp != nil || !needsCleanup(job) {
		return false, nil
	}
	finished, err := finishTime(job)
	if err != nil {
		// A condition written without its time: upstream retries it with
		// back-off forever; here it waits for the Job's next update, so
		// that WaitIdle is not held by a Job that cannot expire.
		klog.FromContext(ctx).Info("Job cannot expire", "job", klog.KObj(job), "err", err)
		return false, nil
	}
	now := c.clock.Now()
	if finished.After(now) {
		klog.FromContext(ctx).Info("Warning: Found Job finished in the future. This is likely due to time skew in the cluster. Job cleanup will be deferred.", "job", klog.KObj(job))
	}
	left := finished.Add(time.Duration(*job.Spec.TTLSecondsAfterFinished) * time.Second).Sub(now)
	if left <= 0 {
		return true, nil
	}
	c.queue.AddAfterOn(c.clock, k, left)
	return false, nil
}

func needsCleanup(j *batchv1.Job) bool {
	if j.Spec.TTLSecondsAfterFinished == nil {
		return false
	}
	_, ok := finishedCondition(j)
	return ok
}

func finishedCondition(j *batchv1.Job) (*batchv1.JobCondition, bool) {
	for i, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return &j.Status.Conditions[i], true
		}
	}
	return nil, false
}

// finishTime is the lastTransitionTime of the Job's finished condition.
func finishTime(j *batchv1.Job) (time.Time, error) {
	c, ok := finishedCondition(j)
	if !ok {
		return time.Time{}, fmt.Errorf("unable to find the status of the finished Job %s/%s", j.Namespace, j.Name)
	}
	if c.LastTransitionTime.IsZero() {
		return time.Time{}, fmt.Errorf("unable to find the time when the Job %s/%s finished", j.Namespace, j.Name)
	}
	return c.LastTransitionTime.Time, nil
}
