package scheduler

// A pod that fits nowhere: kube-scheduler's FitError message, the
// PodScheduled condition it writes, and the FailedScheduling event.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"

	"github.com/kubeembed/apiserver/internal/controller"
)

func eventScheme() *runtime.Scheme { return scheme.Scheme }

// fitMessage is FitError's: how many nodes failed each way, the reasons
// sorted as strings, then what preemption said.
func fitMessage(snap *snapshot, statuses map[string]*status, preemption string) string {
	return fmt.Sprintf("0/%d nodes are available: %s. preemption: %s", len(snap.nodes),
		histogram(statuses, func(s *status) []string { return s.reasons }), preemption)
}

// postFilter is what follows for a pod that fits nowhere: preemption,
// then the pod's condition and event, with the node it is nominated to.
func (s *Scheduler) postFilter(ctx context.Context, c *cycle, statuses map[string]*status) error {
	p := s.preempt(c, statuses)
	nominated := c.snap.nominatedNode(c.pod)
	switch {
	case p.chosen != nil:
		// As the asynchronous preemption: the pod is nominated whatever
		// becomes of the victims' writes; one refused (a webhook's no)
		// is logged, and the pod tried again as the cluster changes.
		if err := s.actuate(ctx, c.pod, p.chosen, c.snap); err != nil {
			klog.FromContext(ctx).Error(err, "Preemption failed", "pod", klog.KObj(c.pod), "node", p.chosen.node)
		}
		nominated = p.chosen.node
	case !p.keep:
		nominated = ""
	}
	return s.failWith(ctx, c.snap, c.pod, corev1.PodReasonUnschedulable, nominated, fitMessage(c.snap, statuses, p.message))
}

// histogram counts each reason over the nodes: "2 Insufficient cpu, 1
// node(s) had untolerated taint(s)", sorted as strings.
func histogram(statuses map[string]*status, reasons func(*status) []string) string {
	counts := map[string]int{}
	for _, st := range statuses {
		for _, r := range reasons(st) {
			counts[r]++
		}
	}
	var list []string
	for r, n := range counts {
		list = append(list, fmt.Sprintf("%d %s", n, r))
	}
	slices.Sort(list)
	return strings.Join(list, ", ")
}

// fail records that the pod is unschedulable, with message.
func (s *Scheduler) fail(ctx context.Context, snap *snapshot, pod *corev1.Pod, message string) error {
	return s.failWith(ctx, snap, pod, corev1.PodReasonUnschedulable, "", message)
}

// failWith records the event and writes the PodScheduled condition with
// reason and the node the pod is nominated to (only when they change). An
// unschedulable pod is kept aside until the cluster changes (queue.go).
func (s *Scheduler) failWith(ctx context.Context, snap *snapshot, pod *corev1.Pod, reason, nominated, message string) error {
	if reason == corev1.PodReasonUnschedulable {
		s.mu.Lock()
		s.unschedulable[pod.UID] = message
		s.mu.Unlock()
	}
	believed := snap.nominatedNode(pod)
	s.nominate(snap, pod, nominated)
	note := message
	if len(note) > 1024 {
		note = note[:1020] + " ..."
	}
	s.recorder.Eventf(pod, nil, corev1.EventTypeWarning, "FailedScheduling", "Scheduling", "%s", note)
	// From the nomination the scheduler believes the pod has, which the
	// informer's copy may not show yet: clearing it must be a patch.
	pod = withNomination(pod, believed)
	status := pod.Status.DeepCopy()
	status.NominatedNodeName = nominated
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: reason, Message: message,
		ObservedGeneration: pod.Generation, LastTransitionTime: metav1.Now()}
	i := slices.IndexFunc(status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodScheduled })
	switch {
	case i < 0:
		status.Conditions = append(status.Conditions, cond)
	case status.Conditions[i].Status == cond.Status && status.Conditions[i].Reason == reason && status.Conditions[i].Message == message:
		if pod.Status.NominatedNodeName == nominated {
			return nil // nothing changed
		}
	default:
		if status.Conditions[i].Status == cond.Status {
			cond.LastTransitionTime = status.Conditions[i].LastTransitionTime
		}
		status.Conditions[i] = cond
	}
	return s.patchStatus(ctx, pod, *status)
}

// withNomination is pod with status.nominatedNodeName node (pod itself if
// it has it already).
func withNomination(pod *corev1.Pod, node string) *corev1.Pod {
	if pod.Status.NominatedNodeName == node {
		return pod
	}
	p := *pod
	p.Status.NominatedNodeName = node
	return &p
}

// patchStatus writes the pod's status as kube-scheduler does: a strategic
// merge patch from the status it read.
func (s *Scheduler) patchStatus(ctx context.Context, pod *corev1.Pod, status corev1.PodStatus) error {
	patch, err := controller.TwoWayPatch(&corev1.Pod{Status: pod.Status}, &corev1.Pod{Status: status})
	if err != nil || string(patch) == "{}" {
		return err
	}
	_, err = s.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
