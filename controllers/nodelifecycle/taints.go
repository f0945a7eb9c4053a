package nodelifecycle

// Taints by condition: the NoSchedule tainting pass and the NoExecute
// taints of not-ready and unreachable nodes, written as
// SwapNodeControllerTaint writes them (a strategic merge patch of
// spec.taints, each new taint with its timeAdded).

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeembed/apiserver/internal/controller"
)

// conditionTaints maps a condition's status to the taint key it gives.
var conditionTaints = map[corev1.NodeConditionType]map[corev1.ConditionStatus]string{
	corev1.NodeReady:              {corev1.ConditionFalse: corev1.TaintNodeNotReady, corev1.ConditionUnknown: corev1.TaintNodeUnreachable},
	corev1.NodeMemoryPressure:     {corev1.ConditionTrue: corev1.TaintNodeMemoryPressure},
	corev1.NodeDiskPressure:       {corev1.ConditionTrue: corev1.TaintNodeDiskPressure},
	corev1.NodeNetworkUnavailable: {corev1.ConditionTrue: corev1.TaintNodeNetworkUnavailable},
	corev1.NodePIDPressure:        {corev1.ConditionTrue: corev1.TaintNodePIDPressure},
}

// managed: the controller owns taints of key with effect: the condition
// taints, and the cordon taint (NoSchedule); not-ready and unreachable
// (NoExecute).
func managed(t corev1.Taint) bool {
	switch t.Effect {
	case corev1.TaintEffectNoSchedule:
		if t.Key == corev1.TaintNodeUnschedulable {
			return true
		}
		for _, m := range conditionTaints {
			for _, key := range m {
				if key == t.Key {
					return true
				}
			}
		}
	case corev1.TaintEffectNoExecute:
		return t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable
	}
	return false
}

// wantedTaints are the taints of effect the node's state calls for.
func wantedTaints(n *corev1.Node, effect corev1.TaintEffect, fullDisruption bool) []corev1.Taint {
	var out []corev1.Taint
	if effect == corev1.TaintEffectNoExecute {
		if fullDisruption {
			return nil // every node is down: evicting would help nothing
		}
		if key := conditionTaints[corev1.NodeReady][readyStatus(n)]; key != "" {
			out = append(out, corev1.Taint{Key: key, Effect: effect})
		}
		return out
	}
	for _, c := range n.Status.Conditions {
		if key := conditionTaints[c.Type][c.Status]; key != "" {
			out = append(out, corev1.Taint{Key: key, Effect: effect})
		}
	}
	if n.Spec.Unschedulable {
		out = append(out, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: effect})
	}
	return out
}

// taint makes the node's managed taints what its state calls for.
func (c *Controller) taint(ctx context.Context, n *corev1.Node) error {
	full, err := c.fullDisruption()
	if err != nil {
		return err
	}
	taints := slices.Clone(n.Spec.Taints)
	changed := false
	now := metav1.NewTime(c.clock.Now())
	for _, effect := range []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute} {
		want := wantedTaints(n, effect, full)
		taints = slices.DeleteFunc(taints, func(t corev1.Taint) bool {
			drop := t.Effect == effect && managed(t) && !slices.ContainsFunc(want, matching(t))
			changed = changed || drop
			return drop
		})
		for _, w := range want {
			if !slices.ContainsFunc(taints, matching(w)) {
				w.TimeAdded = &now
				taints, changed = append(taints, w), true
			}
		}
	}
	if !changed {
		return nil
	}
	return c.patchTaints(ctx, n, taints)
}

// matching is true of the taints of t's key and effect.
func matching(t corev1.Taint) func(corev1.Taint) bool {
	return func(o corev1.Taint) bool { return o.MatchTaint(&t) }
}

// fullDisruption: no node is Ready (and there are some): the controller
// then takes the NoExecute taints off, as upstream's master disruption
// mode.
func (c *Controller) fullDisruption() (bool, error) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return false, err
	}
	for _, n := range nodes {
		if readyStatus(n) == corev1.ConditionTrue {
			return false, nil
		}
	}
	return len(nodes) > 0, nil
}

// patchTaints writes the node's taints as a strategic merge patch.
func (c *Controller) patchTaints(ctx context.Context, n *corev1.Node, taints []corev1.Taint) error {
	patch, err := controller.TwoWayPatch(&corev1.Node{Spec: corev1.NodeSpec{Taints: n.Spec.Taints}}, &corev1.Node{Spec: corev1.NodeSpec{Taints: taints}})
	if err != nil {
		return err
	}
	if _, err := c.client.CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("taint node %s: %w", n.Name, err)
	}
	return nil
}
