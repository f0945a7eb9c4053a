package daemonset

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeembed/apiserver/internal/controller"
)

// counts are the figures of a DaemonSet's status.
type counts struct {
	desired, current, misscheduled, ready, updated, available int32
}

// updateStatus computes ds's status from its pods and nodes and writes it
// (observedGeneration too when observed), as upstream's
// updateDaemonSetStatus; it syncs ds again after minReadySeconds while
// ready pods are not yet available.
func (c *Controller) updateStatus(ctx context.Context, ds *appsv1.DaemonSet, nodes []*corev1.Node, hash string, observed bool) error {
	byNode, err := c.podsByNode(ctx, ds, false)
	if err != nil {
		return fmt.Errorf("couldn't get node to daemon pod mapping for daemon set %q: %v", ds.Name, err)
	}
	n := c.count(ds, nodes, byNode, hash)
	if err := c.writeStatus(ctx, ds, n, observed); err != nil {
		return fmt.Errorf("error storing status for daemon set %q: %w", ds.Name, err)
	}
	if ds.Spec.MinReadySeconds > 0 && n.ready != n.available {
		c.enqueueAfter(ds, seconds(ds.Spec.MinReadySeconds))
	}
	return nil
}

func (c *Controller) count(ds *appsv1.DaemonSet, nodes []*corev1.Node, byNode map[string][]*corev1.Pod, hash string) counts {
	var n counts
	now := c.backoff.Clock.Now()
	p := placementOf(ds)
	generation := templateGeneration(ds)
	for _, node := range nodes {
		shouldRun, _ := p.shouldRun(node)
		pods := byNode[node.Name]
		switch {
		case !shouldRun:
			if len(pods) > 0 {
				n.misscheduled++
			}
			continue
		case len(pods) == 0:
			n.desired++
			continue
		}
		n.desired++
		n.current++
		byAge(pods)
		pod := pods[0]
		if controller.PodReady(pod) {
			n.ready++
			if controller.PodAvailable(pod, ds.Spec.MinReadySeconds, now) {
				n.available++
			}
		}
		if isUpdated(pod, hash, generation) {
			n.updated++
		}
	}
	return n
}

// writeStatus PUTs the status unless nothing changed, retrying once on a
// fresh read.
func (c *Controller) writeStatus(ctx context.Context, ds *appsv1.DaemonSet, n counts, observed bool) error {
	s := ds.Status
	if s.DesiredNumberScheduled == n.desired && s.CurrentNumberScheduled == n.current && s.NumberMisscheduled == n.misscheduled &&
		s.NumberReady == n.ready && s.UpdatedNumberScheduled == n.updated && s.NumberAvailable == n.available &&
		s.NumberUnavailable == n.desired-n.available && s.ObservedGeneration >= ds.Generation {
		return nil
	}
	next := ds.DeepCopy()
	for i := 0; ; i++ {
		if observed {
			next.Status.ObservedGeneration = ds.Generation
		}
		next.Status.DesiredNumberScheduled, next.Status.CurrentNumberScheduled = n.desired, n.current
		next.Status.NumberMisscheduled, next.Status.NumberReady = n.misscheduled, n.ready
		next.Status.UpdatedNumberScheduled, next.Status.NumberAvailable = n.updated, n.available
		next.Status.NumberUnavailable = n.desired - n.available
		_, err := c.client.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{})
		if err == nil || i >= statusRetries {
			return err
		}
		if next, err = c.client.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{}); err != nil {
			return err
		}
	}
}
