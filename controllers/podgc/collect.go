package podgc

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/kubeembed/apiserver/internal/controller"
)

// gcTerminated deletes the terminated pods past the threshold.
func (c *Controller) gcTerminated(ctx context.Context, pods []*corev1.Pod) {
	doomed := terminatedToDelete(pods, c.threshold)
	if len(doomed) == 0 {
		return
	}
	klog.FromContext(ctx).Info("Garbage collecting pods", "numPods", len(doomed))
	c.deleteAll(ctx, doomed, "Failed to delete terminated pod")
}

// terminatedToDelete are the terminated pods (phase neither Pending,
// Running nor Unknown: an empty phase counts) past threshold, evicted ones
// first, then the oldest, then by name.
func terminatedToDelete(pods []*corev1.Pod, threshold int) []*corev1.Pod {
	var terminated []*corev1.Pod
	for _, pod := range pods {
		if p := pod.Status.Phase; p != corev1.PodPending && p != corev1.PodRunning && p != corev1.PodUnknown {
			terminated = append(terminated, pod)
		}
	}
	n := len(terminated) - threshold
	if n <= 0 {
		return nil
	}
	sortForDeletion(terminated)
	return terminated[:n]
}

// sortForDeletion orders pods as upstream's byEvictionAndCreationTimestamp:
// evicted first (controllers' own terminated pods are kept longer), then
// by creation, then by name.
func sortForDeletion(pods []*corev1.Pod) {
	evicted := func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed && p.Status.Reason == "Evicted" }
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		switch ea, eb := evicted(a), evicted(b); {
		case ea && !eb:
			return -1
		case eb && !ea:
			return 1
		case !a.CreationTimestamp.Equal(&b.CreationTimestamp):
			return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// gcTerminating force-deletes terminating pods of nodes that are not Ready
// and tainted out-of-service (their kubelet will not finish them).
func (c *Controller) gcTerminating(ctx context.Context, pods []*corev1.Pod) {
	var doomed []*corev1.Pod
	for _, pod := range pods {
		if pod.DeletionTimestamp == nil {
			continue
		}
		node, err := c.nodes.Get(pod.Spec.NodeName)
		if err != nil {
			// Unscheduled or orphaned: the other collections' business.
			klog.FromContext(ctx).V(4).Info("Failed to get node", "node", klog.KRef("", pod.Spec.NodeName), "err", err)
			continue
		}
		if !nodeReady(node) && slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeOutOfService }) {
			doomed = append(doomed, pod)
		}
	}
	if len(doomed) == 0 {
		return
	}
	sortForDeletion(doomed)
	c.deleteAll(ctx, doomed, "Failed to delete terminating pod on out-of-service node")
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// deleteAll marks pods Failed and deletes them, in parallel as upstream.
func (c *Controller) deleteAll(ctx context.Context, pods []*corev1.Pod, failure string) {
	var wg sync.WaitGroup
	for _, pod := range pods {
		wg.Go(func() {
			if err := c.markFailedAndDelete(ctx, pod, nil); err != nil {
				klog.FromContext(ctx).Error(err, failure, "pod", klog.KObj(pod))
			}
		})
	}
	wg.Wait()
}

// gcOrphaned deletes the pods of nodes that are gone: missing from the
// informer for quarantineTime, then not found by a live read.
func (c *Controller) gcOrphaned(ctx context.Context, pods []*corev1.Pod, nodes []*corev1.Node) {
	logger := klog.FromContext(ctx)
	existing := sets.New[string]()
	for _, n := range nodes {
		existing.Insert(n.Name)
	}
	now := c.clock.Now()
	for _, pod := range pods {
		if name := pod.Spec.NodeName; name != "" && !existing.Has(name) {
			if _, ok := c.quarantine[name]; !ok {
				c.quarantine[name] = now.Add(quarantineTime)
			}
		}
	}
	gone := c.goneNodes(ctx, existing, now)
	for _, pod := range pods {
		if !gone.Has(pod.Spec.NodeName) {
			continue
		}
		logger.V(2).Info("Found orphaned Pod assigned to the Node, deleting", "pod", klog.KObj(pod), "node", klog.KRef("", pod.Spec.NodeName))
		condition := &corev1.PodCondition{Type: corev1.DisruptionTarget, ObservedGeneration: pod.Generation,
			Status: corev1.ConditionTrue, Reason: "DeletionByPodGC", Message: "PodGC: node no longer exists"}
		if err := c.markFailedAndDelete(ctx, pod, condition); err != nil {
			logger.Error(err, "Failed to delete orphaned pod", "pod", klog.KObj(pod))
		} else {
			logger.Info("Forced deletion of orphaned Pod succeeded", "pod", klog.KObj(pod))
		}
	}
}

// goneNodes takes the nodes out of quarantine whose time is up and returns
// those still missing that a live read does not find. A node found, or
// whose read fails, is quarantined again if its pods are still there.
func (c *Controller) goneNodes(ctx context.Context, existing sets.Set[string], now time.Time) sets.Set[string] {
	gone := sets.New[string]()
	for name, until := range c.quarantine {
		if now.Before(until) {
			continue
		}
		delete(c.quarantine, name)
		if existing.Has(name) {
			continue
		}
		_, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			gone.Insert(name)
		case err != nil:
			klog.FromContext(ctx).Error(err, "Error while getting node", "node", klog.KRef("", name))
		}
	}
	return gone
}

// gcUnscheduledTerminating deletes terminating pods bound to no node (no
// kubelet will finish them).
func (c *Controller) gcUnscheduledTerminating(ctx context.Context, pods []*corev1.Pod) {
	logger := klog.FromContext(ctx)
	for _, pod := range pods {
		if pod.DeletionTimestamp == nil || pod.Spec.NodeName != "" {
			continue
		}
		logger.V(2).Info("Found unscheduled terminating Pod not assigned to any Node, deleting", "pod", klog.KObj(pod))
		if err := c.markFailedAndDelete(ctx, pod, nil); err != nil {
			logger.Error(err, "Failed to delete unscheduled terminating pod", "pod", klog.KObj(pod))
		} else {
			logger.Info("Forced deletion of unscheduled terminating Pod succeeded", "pod", klog.KObj(pod))
		}
	}
}

// markFailedAndDelete moves a pod not yet finished to phase Failed (an
// orphan would stay Running forever, with no kubelet to end it), with
// condition if given, then deletes it with no grace period.
func (c *Controller) markFailedAndDelete(ctx context.Context, pod *corev1.Pod, condition *corev1.PodCondition) error {
	klog.FromContext(ctx).Info("PodGC is force deleting Pod", "pod", klog.KObj(pod))
	if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
		status := pod.Status.DeepCopy()
		status.Phase = corev1.PodFailed
		// PodObservedGenerationTracking is GA and locked on in v1.37.
		status.ObservedGeneration = pod.Generation
		if condition != nil {
			controller.UpdatePodCondition(status, *condition, metav1.NewTime(c.clock.Now()))
		}
		if _, err := controller.PatchPodStatus(ctx, c.client, pod, *status); err != nil {
			return err
		}
	}
	return c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, *metav1.NewDeleteOptions(0))
}
