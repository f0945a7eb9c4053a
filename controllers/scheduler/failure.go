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

	"github.com/kubeembed/apiserver/internal/controller"
)

func eventScheme() *runtime.Scheme { return scheme.Scheme }

// fitMessage is FitError's: how many nodes failed each way, the reasons
// sorted as strings, then what preemption would have found (no lower
// priority victim on the nodes where one could help).
func fitMessage(pod *corev1.Pod, snap *snapshot, statuses map[string]*status) string {
	msg := fmt.Sprintf("0/%d nodes are available: %s.", len(snap.nodes), histogram(statuses, func(s *status) []string { return s.reasons }))
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == corev1.PreemptNever {
		return msg + " preemption: not eligible due to preemptionPolicy=Never."
	}
	preemption := map[string]*status{}
	for name, st := range statuses {
		switch {
		case st.code == unresolvable:
			preemption[name] = reject(unresolvable, "Preemption is not helpful for scheduling")
		default:
			preemption[name] = reject(unresolvable, "No preemption victims found for incoming pod")
		}
	}
	return msg + fmt.Sprintf(" preemption: 0/%d nodes are available: %s.", len(snap.nodes), histogram(preemption, func(s *status) []string { return s.reasons }))
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
func (s *Scheduler) fail(ctx context.Context, pod *corev1.Pod, message string) error {
	s.mu.Lock()
	s.unschedulable[pod.UID] = message
	s.mu.Unlock()
	return s.failWith(ctx, pod, corev1.PodReasonUnschedulable, message)
}

// failWith records the event and writes the PodScheduled condition (only
// when it changes) with reason, clearing a nominated node.
func (s *Scheduler) failWith(ctx context.Context, pod *corev1.Pod, reason, message string) error {
	note := message
	if len(note) > 1024 {
		note = note[:1020] + " ..."
	}
	s.recorder.Eventf(pod, nil, corev1.EventTypeWarning, "FailedScheduling", "Scheduling", "%s", note)
	status := pod.Status.DeepCopy()
	status.NominatedNodeName = ""
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: reason, Message: message,
		ObservedGeneration: pod.Generation, LastTransitionTime: metav1.Now()}
	i := slices.IndexFunc(status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodScheduled })
	switch {
	case i < 0:
		status.Conditions = append(status.Conditions, cond)
	case status.Conditions[i].Status == cond.Status && status.Conditions[i].Reason == reason && status.Conditions[i].Message == message:
		if pod.Status.NominatedNodeName == "" {
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
