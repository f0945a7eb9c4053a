package replicaset

// Creating and deleting pods to match a ReplicaSet's replicas.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// manage creates or deletes pods so that rs has its replicas.
func (c *Controller) manage(ctx context.Context, k string, rs *appsv1.ReplicaSet, active []*corev1.Pod) error {
	diff := len(active) - int(*rs.Spec.Replicas)
	switch {
	case diff < 0:
		n := min(-diff, burstReplicas)
		c.expect.ExpectCreations(k, n)
		made, err := slowStart(n, func() error { return c.createPod(ctx, rs) })
		for range n - made {
			c.expect.Created(k) // never made: not to be waited for
		}
		return err
	case diff > 0:
		doomed := c.toDelete(rs, active, min(diff, burstReplicas))
		keys := make([]string, len(doomed))
		for i, p := range doomed {
			keys[i] = key(p)
		}
		c.expect.ExpectDeletions(k, keys)
		return c.deletePods(ctx, k, rs, doomed)
	}
	return nil
}

// slowStart calls fn n times in batches of 1, 2, 4, ... run concurrently,
// stopping after a batch with an error; it returns how many succeeded and
// the first error.
func slowStart(n int, fn func() error) (int, error) {
	done := 0
	for batch := min(n, 1); done < n; batch = min(2*batch, n-done) {
		errs := make(chan error, batch)
		var wg sync.WaitGroup
		for range batch {
			wg.Go(func() {
				if err := fn(); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		done += batch - len(errs)
		if err, failed := <-errs; failed {
			return done, err
		}
	}
	return done, nil
}

// createPod creates one pod of rs's template, as upstream's pod control.
func (c *Controller) createPod(ctx context.Context, rs *appsv1.ReplicaSet) error {
	t := rs.Spec.Template
	if len(t.Labels) == 0 {
		return errors.New("unable to create pods, no labels")
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: rs.Name + "-", Labels: t.Labels, Annotations: t.Annotations,
		Finalizers: t.Finalizers, OwnerReferences: []metav1.OwnerReference{{APIVersion: c.kind.gvk.GroupVersion().String(),
			Kind: c.kind.gvk.Kind, Name: rs.Name, UID: rs.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: *t.Spec.DeepCopy()}
	created, err := c.client.CoreV1().Pods(rs.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return nil // the namespace goes, and rs with it
	}
	if err != nil {
		c.recorder().Eventf(c.kind.object(rs), corev1.EventTypeWarning, "FailedCreate", "Error creating: %v", err)
		return err
	}
	c.recorder().Eventf(c.kind.object(rs), corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: %v", created.Name)
	return nil
}

// deletePods deletes pods at once, as upstream: a pod already gone is no
// error.
func (c *Controller) deletePods(ctx context.Context, k string, rs *appsv1.ReplicaSet, pods []*corev1.Pod) error {
	errs := make(chan error, len(pods))
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Go(func() {
			err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
			switch {
			case err == nil:
				c.recorder().Eventf(c.kind.object(rs), corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: %v", p.Name)
			case apierrors.IsNotFound(err):
				c.expect.Deleted(k, key(p))
			default:
				c.expect.Deleted(k, key(p))
				c.recorder().Eventf(c.kind.object(rs), corev1.EventTypeWarning, "FailedDelete", "Error deleting: %v", err)
				errs <- fmt.Errorf("unable to delete pods: %w", err)
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs // nil when none failed
}

// toDelete picks the n pods to delete, cheapest first.
func (c *Controller) toDelete(rs *appsv1.ReplicaSet, active []*corev1.Pod, n int) []*corev1.Pod {
	if n >= len(active) {
		return active[:n]
	}
	onNode := c.relatedOnNode(rs)
	r := ranked{pods: append([]*corev1.Pod(nil), active...), ranks: make([]int, len(active)), now: c.clock.Now()}
	for i, p := range r.pods {
		r.ranks[i] = onNode[p.Spec.NodeName]
	}
	sort.Sort(r)
	return r.pods[:n]
}

// relatedOnNode counts, per node, the active pods of the ReplicaSets that
// share rs's owner (a Deployment's); none when rs has no owner.
func (c *Controller) relatedOnNode(rs *appsv1.ReplicaSet) map[string]int {
	counts := map[string]int{}
	owner := metav1.GetControllerOf(rs)
	if owner == nil {
		return counts
	}
	siblings, _ := c.kind.list(rs.Namespace)
	seen := map[types.UID]bool{}
	for _, s := range siblings {
		if ref := metav1.GetControllerOf(s); ref == nil || ref.UID != owner.UID {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(s.Spec.Selector)
		if err != nil {
			continue
		}
		objs, _ := c.pods.ByIndex(cache.NamespaceIndex, s.Namespace)
		for _, o := range objs {
			p := o.(*corev1.Pod)
			if seen[p.UID] || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			seen[p.UID] = true
			if !terminal(p) && p.DeletionTimestamp == nil {
				counts[p.Spec.NodeName]++
			}
		}
	}
	return counts
}
