package daemonset

// RollingUpdate: old pods replaced within maxUnavailable (deleted, the
// manage loop creating the new ones) or maxSurge (the new one created
// beside the old, which goes once the new one is available), as
// upstream's rollingUpdate.

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubeembed/apiserver/internal/controller"
)

func (c *Controller) rollingUpdate(ctx context.Context, ds *appsv1.DaemonSet, nodes []*corev1.Node, hash string) error {
	byNode, err := c.podsByNode(ctx, ds, false)
	if err != nil {
		return fmt.Errorf("couldn't get node to daemon pod mapping for daemon set %q: %v", ds.Name, err)
	}
	maxSurge, maxUnavailable, desired, err := desiredCounts(ds, nodes, byNode)
	if err != nil {
		return fmt.Errorf("couldn't get unavailable numbers: %v", err)
	}
	now := c.backoff.Clock.Now()
	if maxSurge == 0 {
		return c.syncNodes(ctx, ds, replaceWithin(ds, byNode, hash, maxUnavailable, now), nil, hash)
	}
	del, create, err := c.surge(ds, byNode, hash, maxSurge, desired, now)
	if err != nil {
		return err
	}
	return c.syncNodes(ctx, ds, del, create, hash)
}

// replaceWithin picks the old pods to delete without going over
// maxUnavailable: every unavailable old pod, and available ones while the
// unavailable count allows.
func replaceWithin(ds *appsv1.DaemonSet, byNode map[string][]*corev1.Pod, hash string, maxUnavailable int, now time.Time) []string {
	unavailable := 0
	var replace, candidates []string
	for _, pods := range byNode {
		newPod, oldPod, ok := updatedOnNode(ds, pods, hash)
		switch {
		case !ok, oldPod == nil && newPod == nil, oldPod != nil && newPod != nil:
			unavailable++ // the manage loop sees to the node
		case newPod != nil:
			if !controller.PodAvailable(newPod, ds.Spec.MinReadySeconds, now) {
				unavailable++
			}
		case !controller.PodAvailable(oldPod, ds.Spec.MinReadySeconds, now):
			replace = append(replace, oldPod.Name)
			unavailable++
		case unavailable >= maxUnavailable:
		default:
			candidates = append(candidates, oldPod.Name)
		}
	}
	room := min(max(maxUnavailable-unavailable, 0), len(candidates))
	return append(replace, candidates[:room]...)
}

// surge picks the old pods to delete and the nodes to create new pods on
// without going over maxSurge.
func (c *Controller) surge(ds *appsv1.DaemonSet, byNode map[string][]*corev1.Pod, hash string, maxSurge, desired int, now time.Time) (del, create []string, err error) {
	p := placementOf(ds)
	var misplaced, candidates []string
	surging, available := 0, 0
	for node, pods := range byNode {
		newPod, oldPod, ok := updatedOnNode(ds, pods, hash)
		if !ok {
			surging++
			continue
		}
		if oldPod != nil && controller.PodAvailable(oldPod, ds.Spec.MinReadySeconds, now) || oldPod == nil && newPod != nil && controller.PodAvailable(newPod, ds.Spec.MinReadySeconds, now) {
			available++
		}
		switch {
		case oldPod == nil:
		case newPod == nil:
			n, err := c.nodes.Get(node)
			if err != nil {
				return nil, nil, fmt.Errorf("couldn't get node for nodeName %q: %v", node, err)
			}
			shouldRun, _ := p.shouldRun(n)
			switch {
			case !controller.PodAvailable(oldPod, ds.Spec.MinReadySeconds, now) && !shouldRun:
				del = append(del, oldPod.Name)
			case !controller.PodAvailable(oldPod, ds.Spec.MinReadySeconds, now):
				create = append(create, node)
			case !shouldRun:
				misplaced = append(misplaced, oldPod.Name)
			case surging < maxSurge:
				candidates = append(candidates, node)
			}
		case !controller.PodAvailable(newPod, ds.Spec.MinReadySeconds, now):
			surging++
		default:
			del = append(del, oldPod.Name)
		}
	}
	// Pods of nodes no longer selected go only as others become available.
	for _, name := range misplaced[:min(max(available-desired, 0), len(misplaced))] {
		if _, exists, err := c.pods.GetByKey(ds.Namespace + "/" + name); err == nil && exists {
			del = append(del, name)
		}
	}
	room := min(max(maxSurge-surging, 0), len(candidates))
	return del, append(create, candidates[:room]...), nil
}

// updatedOnNode returns the node's new and old pod not being deleted;
// false when it has more than one of either.
func updatedOnNode(ds *appsv1.DaemonSet, pods []*corev1.Pod, hash string) (newPod, oldPod *corev1.Pod, ok bool) {
	generation := templateGeneration(ds)
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if isUpdated(pod, hash, generation) {
			if newPod != nil {
				return nil, nil, false
			}
			newPod = pod
		} else {
			if oldPod != nil {
				return nil, nil, false
			}
			oldPod = pod
		}
	}
	return newPod, oldPod, true
}

// desiredCounts counts the nodes that should run a pod (giving each an
// entry in byNode) and the surge and unavailability they allow; neither
// allowed means an unavailability of 1.
func desiredCounts(ds *appsv1.DaemonSet, nodes []*corev1.Node, byNode map[string][]*corev1.Pod) (maxSurge, maxUnavailable, desired int, err error) {
	p := placementOf(ds)
	for _, n := range nodes {
		if run, _ := p.shouldRun(n); !run {
			continue
		}
		desired++
		if _, ok := byNode[n.Name]; !ok {
			byNode[n.Name] = nil
		}
	}
	if maxUnavailable, err = unavailableCount(ds, desired); err != nil {
		return -1, -1, -1, fmt.Errorf("invalid value for MaxUnavailable: %v", err)
	}
	if maxSurge, err = surgeCount(ds, desired); err != nil {
		return -1, -1, -1, fmt.Errorf("invalid value for MaxSurge: %v", err)
	}
	if desired > 0 && maxUnavailable == 0 && maxSurge == 0 {
		maxUnavailable = 1
	}
	return maxSurge, maxUnavailable, desired, nil
}

func surgeCount(ds *appsv1.DaemonSet, n int) (int, error) {
	r := ds.Spec.UpdateStrategy.RollingUpdate
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || r == nil || r.MaxSurge == nil {
		return 0, nil
	}
	return intstr.GetScaledValueFromIntOrPercent(r.MaxSurge, n, true)
}

func unavailableCount(ds *appsv1.DaemonSet, n int) (int, error) {
	r := ds.Spec.UpdateStrategy.RollingUpdate
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || r == nil {
		return 0, nil
	}
	return intstr.GetScaledValueFromIntOrPercent(r.MaxUnavailable, n, true)
}

// allowsSurge: the DaemonSet may run two pods on a node.
func allowsSurge(ds *appsv1.DaemonSet) bool {
	n, err := surgeCount(ds, 1)
	return err == nil && n > 0
}
