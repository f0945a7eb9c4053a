package nodelifecycle

// Node health: a node whose kubelet neither renewed its Lease nor posted a
// new Ready heartbeat for the grace period (on the controller's clock,
// from when it observed the last one) is marked Unknown, and its pods not
// Ready. A node its kubelet reports not Ready keeps its pods' conditions
// (the kubelet's to write), as upstream; only a pod bound to it afterwards
// is marked.

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// monitorHealth marks the node Unknown when its grace period is over,
// and then its pods not Ready (only a Ready node the controller itself
// turns Unknown: one its kubelet reports NotReady keeps its pods'
// conditions, the kubelet's to write); it returns the node as written.
func (c *Controller) monitorHealth(ctx context.Context, n *corev1.Node) (*corev1.Node, error) {
	now := c.clock.Now()
	deadline, wasReady := c.observe(n, now)
	observed := readyStatus(n)
	if now.Before(deadline) {
		c.checkAt(n.Name, deadline)
	} else if observed != corev1.ConditionUnknown {
		updated, err := c.markUnknown(ctx, n, now)
		if err != nil {
			return nil, err
		}
		n = updated
	}
	if wasReady != (readyStatus(n) == corev1.ConditionTrue) {
		c.requeueAll() // the disruption of the whole cluster may have changed
	}
	if observed == corev1.ConditionTrue && readyStatus(n) != corev1.ConditionTrue {
		c.recorder().Eventf(&corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID},
			corev1.EventTypeNormal, "NodeNotReady", "Node %s status is now: NodeNotReady", n.Name)
		return n, c.markPodsNotReady(ctx, n, nil)
	}
	return n, nil
}

// observe notes a new heartbeat or Lease renewal of the node, and returns
// when its grace period ends and whether it was Ready when last seen.
func (c *Controller) observe(n *corev1.Node, now time.Time) (deadline time.Time, wasReady bool) {
	var heartbeat time.Time
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			heartbeat = cond.LastHeartbeatTime.Time
		}
	}
	var renewed time.Time
	if l, err := c.leases.Leases(corev1.NamespaceNodeLease).Get(n.Name); err == nil && l.Spec.RenewTime != nil {
		renewed = l.Spec.RenewTime.Time
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.health[n.Name]
	if !heartbeat.Equal(h.heartbeat) || renewed.After(h.renewed) {
		h.heartbeat, h.renewed, h.probed = heartbeat, renewed, now
	}
	grace := gracePeriod
	if heartbeat.IsZero() {
		grace = startupGracePeriod
	}
	wasReady, h.ready = h.ready, readyStatus(n) == corev1.ConditionTrue
	return h.probed.Add(grace), wasReady
}

// markUnknown sets the kubelet's conditions Unknown, as upstream
// (conditions it never posted are added).
func (c *Controller) markUnknown(ctx context.Context, n *corev1.Node, now time.Time) (*corev1.Node, error) {
	n = n.DeepCopy()
	t := metav1.NewTime(now)
	for _, typ := range []corev1.NodeConditionType{corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		found := false
		for i := range n.Status.Conditions {
			cond := &n.Status.Conditions[i]
			if cond.Type != typ {
				continue
			}
			found = true
			if cond.Status != corev1.ConditionUnknown {
				cond.Status, cond.Reason, cond.Message, cond.LastTransitionTime = corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status.", t
			}
		}
		if !found {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: typ, Status: corev1.ConditionUnknown,
				Reason: "NodeStatusNeverUpdated", Message: "Kubelet never posted node status.", LastHeartbeatTime: n.CreationTimestamp, LastTransitionTime: t})
		}
	}
	updated, err := c.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("mark node %s unknown: %w", n.Name, err)
	}
	return updated, nil
}

// markPodsNotReady sets the Ready condition of the node's pods (all, or
// only pods) False, keeping its reason and message, as MarkPodsNotReady
// does.
func (c *Controller) markPodsNotReady(ctx context.Context, n *corev1.Node, pods []*corev1.Pod) error {
	if pods == nil {
		var err error
		if pods, err = c.pods.List(labels.Everything()); err != nil {
			return err
		}
	}
	for _, p := range pods {
		if p.Spec.NodeName != n.Name {
			continue
		}
		for i, cond := range p.Status.Conditions {
			if cond.Type != corev1.PodReady || cond.Status == corev1.ConditionFalse {
				continue
			}
			p = p.DeepCopy()
			p.Status.Conditions[i].Status, p.Status.Conditions[i].LastTransitionTime = corev1.ConditionFalse, metav1.NewTime(c.clock.Now())
			if _, err := c.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
				break
			} else if err != nil {
				return fmt.Errorf("mark pod %s/%s not ready: %w", p.Namespace, p.Name, err)
			}
			c.recorder().Event(p, corev1.EventTypeWarning, "NodeNotReady", "Node is not ready")
			break
		}
	}
	return nil
}

// checkAt syncs the node again when its grace period ends.
func (c *Controller) checkAt(name string, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.timers[name]; old != nil {
		old.Stop()
	}
	c.timers[name] = c.clock.AfterFunc(t.Sub(c.clock.Now()), func() { c.queue.Add(name) })
}

// requeueAll syncs every node again.
func (c *Controller) requeueAll() {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	for _, n := range nodes {
		c.queue.Add(n.Name)
	}
}

// podKey is the queue's key of a pod bound to a node (node names have no
// "/").
func podKey(p *corev1.Pod) string { return "pod/" + p.Namespace + "/" + p.Name }

// syncPod marks a pod newly bound to a node that is not Ready not Ready,
// as upstream's processPod.
func (c *Controller) syncPod(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(strings.TrimPrefix(key, "pod/"), "/")
	p, err := c.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	n, err := c.nodes.Get(p.Spec.NodeName)
	if err != nil || readyStatus(n) == corev1.ConditionTrue || len(n.Status.Conditions) == 0 {
		return nil // gone, ready, or not reported yet: the node's own sync decides
	}
	return c.markPodsNotReady(ctx, n, []*corev1.Pod{p})
}
