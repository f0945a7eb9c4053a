package daemonset

// What a node needs of a DaemonSet (upstream's podsShouldBeOnNode) and the
// creates and deletes that give it (syncNodes).

import (
	"context"
	"errors"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubeembed/apiserver/internal/controller"
)

// onNode returns the node's name if it needs a daemon pod, and the pods
// on it to delete.
func (c *Controller) onNode(p placement, node *corev1.Node, byNode map[string][]*corev1.Pod, hash string) (create, del []string) {
	ds := p.ds
	shouldRun, shouldContinue := p.shouldRun(node)
	pods, exists := byNode[node.Name]
	switch {
	case shouldRun && !exists:
		return []string{node.Name}, nil
	case shouldContinue:
		running, doomed := c.running(ds, node, pods)
		del = doomed
		if !allowsSurge(ds) {
			if len(running) > 1 {
				byAge(running)
				for _, pod := range running[1:] {
					del = append(del, pod.Name)
				}
			}
			return nil, del
		}
		if len(running) == 0 && shouldRun {
			return []string{node.Name}, del
		}
		return nil, append(del, c.surplus(ds, running, hash)...)
	case exists:
		for _, pod := range pods {
			if pod.DeletionTimestamp == nil {
				del = append(del, pod.Name)
			}
		}
	}
	return nil, del
}

// running sorts the node's pods not being deleted into those running and
// the terminal ones to delete: succeeded at once, failed within a backoff
// per node (recorded as FailedDaemonPod).
func (c *Controller) running(ds *appsv1.DaemonSet, node *corev1.Node, pods []*corev1.Pod) (running []*corev1.Pod, del []string) {
	for _, pod := range pods {
		switch {
		case pod.DeletionTimestamp != nil:
		case pod.Status.Phase == corev1.PodFailed:
			bk := fmt.Sprintf("%s/%d/%s", ds.UID, ds.Status.ObservedGeneration, node.Name)
			now := c.backoff.Clock.Now()
			if c.backoff.IsInBackOffSinceUpdate(bk, now) {
				c.enqueueAfter(ds, c.backoff.Get(bk))
				continue
			}
			c.backoff.Next(bk, now)
			c.recorder().Eventf(ds, corev1.EventTypeWarning, "FailedDaemonPod", "%s",
				fmt.Sprintf("Found failed daemon pod %s/%s on node %s, will try to kill it", pod.Namespace, pod.Name, node.Name))
			del = append(del, pod.Name)
		case pod.Status.Phase == corev1.PodSucceeded:
			c.recorder().Eventf(ds, corev1.EventTypeNormal, "SucceededDaemonPod", "%s",
				fmt.Sprintf("Found succeeded daemon pod %s/%s on node %s, will try to delete it", pod.Namespace, pod.Name, node.Name))
			del = append(del, pod.Name)
		default:
			running = append(running, pod)
		}
	}
	return running, del
}

// surplus are the pods to delete of a surging node's running ones: all
// but the oldest new and the oldest old pod, and of those two the old one
// when it is not ready or the new one is available.
func (c *Controller) surplus(ds *appsv1.DaemonSet, running []*corev1.Pod, hash string) []string {
	if len(running) <= 1 {
		return nil
	}
	byAge(running)
	var del []string
	var oldestNew, oldestOld *corev1.Pod
	for _, pod := range running {
		switch {
		case pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == hash && oldestNew == nil:
			oldestNew = pod
		case pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] != hash && oldestOld == nil:
			oldestOld = pod
		default:
			del = append(del, pod.Name)
		}
	}
	if oldestNew != nil && oldestOld != nil &&
		(!controller.PodReady(oldestOld) || controller.PodAvailable(oldestNew, ds.Spec.MinReadySeconds, c.backoff.Clock.Now())) {
		del = append(del, oldestOld.Name)
	}
	return del
}

// syncNodes creates a pod on each node of create and deletes the pods of
// del (at most burstReplicas each), expecting to see them first.
func (c *Controller) syncNodes(ctx context.Context, ds *appsv1.DaemonSet, del, create []string, hash string) error {
	k := key(ds)
	create, del = create[:min(len(create), burstReplicas)], del[:min(len(del), burstReplicas)]
	c.expect.ExpectCreations(addsKey(k), len(create))
	podKeys := make([]string, len(del))
	for i, name := range del {
		podKeys[i] = ds.Namespace + "/" + name
	}
	c.expect.ExpectDeletions(delsKey(k), podKeys)
	createErr := c.createPods(ctx, ds, create, hash)
	errs := make(chan error, len(del))
	var wg sync.WaitGroup
	for i, name := range del {
		wg.Go(func() {
			if err := c.deletePod(ctx, ds, name); err != nil {
				c.expect.Deleted(delsKey(k), podKeys[i])
				if !apierrors.IsNotFound(err) {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	all := []error{createErr}
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// createPods creates the pods of nodes in slow-start batches of 1, 2, 4,
// ...; a batch with a failure ends it (the rest are not expected).
func (c *Controller) createPods(ctx context.Context, ds *appsv1.DaemonSet, nodes []string, hash string) error {
	k := addsKey(key(ds))
	var all []error
	for pos, batch := 0, min(len(nodes), 1); pos < len(nodes); pos, batch = pos+batch, min(2*batch, len(nodes)-pos-batch) {
		errs := make(chan error, batch)
		var wg sync.WaitGroup
		for _, node := range nodes[pos : pos+batch] {
			wg.Go(func() {
				if err := c.createPod(ctx, ds, node, hash); err != nil {
					c.expect.Created(k)
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		failed := len(all)
		for err := range errs {
			all = append(all, err)
		}
		if skipped := len(nodes) - pos - batch; len(all) > failed && skipped > 0 {
			for range skipped {
				c.expect.Created(k)
			}
			break
		}
	}
	return errors.Join(all...)
}

func (c *Controller) createPod(ctx context.Context, ds *appsv1.DaemonSet, node, hash string) error {
	pod, err := newPod(ds, hash, node)
	if err != nil {
		return err
	}
	created, err := c.client.CoreV1().Pods(ds.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	switch {
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		c.expect.Created(addsKey(key(ds)))
		return nil // the namespace goes, and ds with it
	case err != nil:
		c.recorder().Eventf(ds, corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
		return err
	}
	c.recorder().Eventf(ds, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %v", created.Name)
	return nil
}

func (c *Controller) deletePod(ctx context.Context, ds *appsv1.DaemonSet, name string) error {
	err := c.client.CoreV1().Pods(ds.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return err
	case err != nil:
		c.recorder().Eventf(ds, corev1.EventTypeWarning, "FailedDelete", "Error deleting: %v", err)
		return fmt.Errorf("unable to delete pods: %v", err)
	}
	c.recorder().Eventf(ds, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %v", name)
	return nil
}

// syncNode queues the DaemonSets whose placement on a node added or
// changed calls for a sync (upstream's syncNodeUpdate): one that should
// run there and has no pod, one that should not and has, and one with a
// pod there while it counts misscheduled pods.
func (c *Controller) syncNode(_ context.Context, name string) error {
	node, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("error getting node %s: %w", name, err)
	}
	dss, err := c.dsets.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("error listing daemon sets: %w", err)
	}
	onNode, err := c.pods.ByIndex(nodeIndex, name)
	if err != nil {
		return fmt.Errorf("error getting pods by node name: %w", err)
	}
	scheduled := map[string]bool{}
	for _, o := range onNode {
		pod := o.(*corev1.Pod)
		scheduled[pod.Namespace+"/"+metav1.GetControllerOfNoCopy(pod).Name] = true
	}
	for _, ds := range dss {
		shouldRun, shouldContinue := placementOf(ds).shouldRun(node)
		has := scheduled[key(ds)]
		if shouldRun && !has || !shouldContinue && has || has && ds.Status.NumberMisscheduled > 0 {
			c.enqueue(ds)
		}
	}
	return nil
}
