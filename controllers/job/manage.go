package job

// Creating and deleting a Job's pods, as upstream's manageJob.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/internal/controller"
)

// maxPerSync is upstream's MaxPodCreateDeletePerSync.
const maxPerSync = 500

// manage creates or deletes pods so that the Job runs what it should:
// none while suspended, else parallelism capped by the completions left,
// after the failure back-off. It returns the active pods then.
func (c *Controller) manage(ctx context.Context, jc *syncCtx) (int32, error) {
	job := jc.job
	active := int32(len(jc.active))
	if suspended(job) {
		return c.deleteSome(ctx, jc, forRemoval(job, jc.active, int(active)))
	}
	parallelism := ptr.Deref(job.Spec.Parallelism, 1)
	want := parallelism
	switch {
	case job.Spec.Completions != nil:
		want = max(0, min(*job.Spec.Completions-jc.succeeded, parallelism))
	case jc.succeeded > 0:
		want = active
	}
	if doomed := forRemoval(job, jc.active, int(max(0, active-want))); len(doomed) > 0 {
		// Deleting takes precedence over creating (an Indexed Job
		// may need both).
		return c.deleteSome(ctx, jc, doomed[:min(len(doomed), maxPerSync)])
	}
	var terminating int32
	if onlyReplaceFailed(job) {
		terminating = jc.terminating
	}
	diff := want - terminating - active
	if diff <= 0 {
		return active, nil
	}
	if !perIndex(job) {
		if wait := remaining(c.clock, jc.backoff.failures, jc.backoff.lastFailureTime); wait > 0 {
			c.later(jc.key, wait)
			return active, nil
		}
	}
	diff = min(diff, maxPerSync)
	var indexes []int
	if indexed(job) {
		indexes = firstPendingIndexes(jc, int(diff), completions(job))
		if perIndex(job) {
			var wait time.Duration
			if indexes, wait = c.creatableIndexes(indexes, jc.delayed); wait > 0 {
				c.later(jc.key, wait)
				return active, nil
			}
		}
		diff = int32(len(indexes))
	}
	made, err := c.createPods(ctx, jc, int(diff), indexes)
	return active + int32(made), err
}

// later syncs the Job again after d, at least the batch period.
func (c *Controller) later(k string, d time.Duration) {
	c.queue.AddAfterOn(c.clock, k, max(d, batchPeriod))
}

// creatableIndexes are the indexes whose back-off is over; if none, the
// least wait.
func (c *Controller) creatableIndexes(indexes []int, delayed map[int]*corev1.Pod) ([]int, time.Duration) {
	var now []int
	var least *time.Duration
	for _, ix := range indexes {
		switch wait := remainingForIndex(c.clock, delayed[ix]); {
		case wait == 0:
			now = append(now, ix)
		case least == nil || wait < *least:
			least = &wait
		}
	}
	if len(now) > 0 {
		return now, 0
	}
	return nil, ptr.Deref(least, 0)
}

// forRemoval picks at least n active pods to delete: (Indexed) those with
// a repeated, missing or out-of-range index, then the earliest in their
// lifecycle.
func forRemoval(job *batchv1.Job, pods []*corev1.Pod, n int) []*corev1.Pod {
	var rm []*corev1.Pod
	left := pods
	if indexed(job) {
		rm, left = duplicatesForRemoval(pods, completions(job))
	}
	if len(rm) < n {
		left = slices.Clone(left)
		sort.Sort(activePods(left))
		rm = append(rm, left[:n-len(rm)]...)
	}
	return rm
}

// deleteSome deletes doomed, expecting to see them go.
func (c *Controller) deleteSome(ctx context.Context, jc *syncCtx, doomed []*corev1.Pod) (int32, error) {
	keys := make([]string, len(doomed))
	for i, p := range doomed {
		keys[i] = key(p)
	}
	c.expect.ExpectDeletions(jc.key, keys)
	deletedReady, deleted, err := c.deletePods(ctx, jc, doomed)
	jc.terminating += deleted
	jc.ready -= deletedReady
	return int32(len(jc.active)) - deleted, err
}

// createPods creates n pods (Indexed: of the given indexes) in slow-start
// batches of 1, 2, 4, ..., stopping after a batch with a failure; it
// returns how many were made.
func (c *Controller) createPods(ctx context.Context, jc *syncCtx, n int, indexes []int) (int, error) {
	c.expect.ExpectCreations(jc.key, n)
	template := jc.job.Spec.Template.DeepCopy()
	if indexed(jc.job) {
		withIndexEnv(template)
	}
	if !slices.Contains(template.Finalizers, batchv1.JobTrackingFinalizer) {
		template.Finalizers = append(template.Finalizers, batchv1.JobTrackingFinalizer)
	}
	made, next := 0, 0
	for batch := min(n, 1); next < n; batch = min(2*batch, n-next) {
		errs := make(chan error, batch)
		var wg sync.WaitGroup
		for i := range batch {
			ix := unknownIndex
			if indexes != nil {
				ix = indexes[next+i]
			}
			wg.Go(func() {
				if err := c.createPod(ctx, jc, template, ix); err != nil {
					c.expect.Created(jc.key) // never to be seen
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		next += batch
		made += batch - len(errs)
		if err, failed := <-errs; failed {
			for range n - next {
				c.expect.Created(jc.key) // skipped
			}
			return made, err
		}
	}
	return made, nil
}

// createPod creates one pod of the template, as upstream's pod control:
// with index ix its annotation, label, hostname and name.
func (c *Controller) createPod(ctx context.Context, jc *syncCtx, template *corev1.PodTemplateSpec, ix int) error {
	job := jc.job
	generateName := job.Name + "-"
	if ix != unknownIndex {
		template = template.DeepCopy()
		if template.Annotations == nil {
			template.Annotations = map[string]string{}
		}
		if template.Labels == nil {
			template.Labels = map[string]string{}
		}
		template.Annotations[batchv1.JobCompletionIndexAnnotation] = strconv.Itoa(ix)
		template.Labels[batchv1.JobCompletionIndexAnnotation] = strconv.Itoa(ix)
		template.Spec.Hostname = fmt.Sprintf("%s-%d", job.Name, ix)
		generateName = indexedGenerateName(job.Name, ix)
		if perIndex(job) {
			failed, ignored := newIndexFailureCounts(job, jc.delayed[ix])
			template.Annotations[batchv1.JobIndexFailureCountAnnotation] = strconv.Itoa(int(failed))
			if ignored > 0 {
				template.Annotations[batchv1.JobIndexIgnoredFailureCountAnnotation] = strconv.Itoa(int(ignored))
			}
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: generateName, Labels: maps.Clone(template.Labels),
		Annotations: maps.Clone(template.Annotations), Finalizers: slices.Clone(template.Finalizers),
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, jobKind)}}, Spec: *template.Spec.DeepCopy()}
	if len(pod.Labels) == 0 {
		return errors.New("unable to create pods, no labels")
	}
	created, err := c.client.CoreV1().Pods(job.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return nil // the namespace goes, and the Job with it
	}
	if err != nil {
		c.recorder().Eventf(job, corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
		return err
	}
	c.recorder().Eventf(job, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %v", created.Name)
	return nil
}

// deletePod deletes one pod, recording it as upstream's pod control.
func (c *Controller) deletePod(ctx context.Context, job *batchv1.Job, name string) error {
	err := c.client.CoreV1().Pods(job.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	switch {
	case err == nil:
		c.recorder().Eventf(job, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %v", name)
	case !apierrors.IsNotFound(err):
		c.recorder().Eventf(job, corev1.EventTypeWarning, "FailedDelete", "Error deleting: %v", err)
		return fmt.Errorf("unable to delete pods: %w", err)
	}
	return err
}

// deletePods removes the tracking finalizer of pods and deletes them, at
// once; it returns how many ready pods and pods it deleted.
func (c *Controller) deletePods(ctx context.Context, jc *syncCtx, pods []*corev1.Pod) (int32, int32, error) {
	var ready, deleted atomic.Int32
	deleted.Store(int32(len(pods)))
	errs := make(chan error, len(pods))
	fail := func(p *corev1.Pod, err error) {
		c.expect.Deleted(jc.key, key(p)) // not to be seen
		if !apierrors.IsNotFound(err) {
			deleted.Add(-1)
			errs <- err
		}
	}
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Go(func() {
			if patch := removeFinalizerPatch(p); patch != nil {
				if err := c.patchPod(ctx, p.Namespace, p.Name, patch); err != nil {
					fail(p, fmt.Errorf("removing completion finalizer: %w", err))
					return
				}
			}
			if err := c.deletePod(ctx, jc.job, p.Name); err != nil {
				fail(p, err)
			}
			if controller.PodReady(p) {
				ready.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	return ready.Load(), deleted.Load(), <-errs
}

// deleteActive deletes the active pods of a Job that ends, keeping their
// finalizers (the status counts them first); it returns how many ready
// pods and pods it deleted.
func (c *Controller) deleteActive(ctx context.Context, job *batchv1.Job, pods []*corev1.Pod) (int32, int32, error) {
	var ready, deleted atomic.Int32
	deleted.Store(int32(len(pods)))
	errs := make(chan error, len(pods))
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Go(func() {
			if err := c.deletePod(ctx, job, p.Name); err != nil && !apierrors.IsNotFound(err) {
				deleted.Add(-1)
				errs <- err
			}
			if controller.PodReady(p) {
				ready.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	return ready.Load(), deleted.Load(), <-errs
}
