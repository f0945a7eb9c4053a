package core

// kubectl get pods' columns, as kube-apiserver v1.37's printPod computes
// them: READY counts sidecars, STATUS walks the init containers then the
// others (the first container's reason wins), RESTARTS says when the last
// restart was.

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeembed/apiserver/providers/internal/printers"
	"github.com/kubeembed/apiserver/providers/registry"
)

// podRow is what a pod's row says of its containers.
type podRow struct {
	ready, total int
	reason       string
	restarts     int
	lastRestart  metav1.Time
}

// printedPod computes the READY, STATUS and RESTARTS cells of p.
func printedPod(p *corev1.Pod) podRow {
	r := podRow{total: len(p.Spec.Containers), reason: string(p.Status.Phase)}
	if p.Status.Reason != "" {
		r.reason = p.Status.Reason
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			r.reason = corev1.PodReasonSchedulingGated
		}
	}
	for _, c := range p.Spec.InitContainers {
		if isSidecar(c) {
			r.total++
		}
	}
	initializing, sidecarRestarts, sidecarLast := r.initContainers(p)
	if !initializing || conditionTrue(p.Status.Conditions, corev1.PodInitialized) {
		r.restarts, r.lastRestart = sidecarRestarts, sidecarLast
		r.containers(p)
	}
	terminal := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	switch {
	case p.DeletionTimestamp != nil && p.Status.Reason == "NodeLost":
		r.reason = "Unknown"
	case p.DeletionTimestamp != nil && !terminal:
		r.reason = "Terminating"
	}
	return r
}

// initContainers walks the init containers' statuses up to the first not
// done: the reason while the pod initializes, the restarts of all and of
// the sidecars, and the last of their restarts.
func (r *podRow) initContainers(p *corev1.Pod) (initializing bool, sidecarRestarts int, sidecarLast metav1.Time) {
	specs := map[string]corev1.Container{}
	for _, c := range p.Spec.InitContainers {
		specs[c.Name] = c
	}
	for i, s := range p.Status.InitContainerStatuses {
		sidecar := isSidecar(specs[s.Name])
		r.restarts += int(s.RestartCount)
		r.lastRestart = later(r.lastRestart, s.LastTerminationState.Terminated)
		if sidecar {
			sidecarRestarts += int(s.RestartCount)
			sidecarLast = later(sidecarLast, s.LastTerminationState.Terminated)
		}
		term := s.State.Terminated
		switch {
		case term != nil && term.ExitCode == 0:
			continue
		case sidecar && s.Started != nil && *s.Started:
			if s.Ready {
				r.ready++
			}
			continue
		case term != nil && term.Reason != "":
			r.reason = "Init:" + term.Reason
		case term != nil && term.Signal != 0:
			r.reason = fmt.Sprintf("Init:Signal:%d", term.Signal)
		case term != nil:
			r.reason = fmt.Sprintf("Init:ExitCode:%d", term.ExitCode)
		case s.State.Waiting != nil && s.State.Waiting.Reason != "" && s.State.Waiting.Reason != "PodInitializing":
			r.reason = "Init:" + s.State.Waiting.Reason
		default:
			r.reason = fmt.Sprintf("Init:%d/%d", i, len(p.Spec.InitContainers))
		}
		return true, sidecarRestarts, sidecarLast
	}
	return false, sidecarRestarts, sidecarLast
}

// containers walks the regular containers' statuses from the last, so
// that the first one's reason is the one left; a pod whose reason is
// Completed while a container still runs is Running (Ready), NotReady, or
// the reason of a container that failed.
func (r *podRow) containers(p *corev1.Pod) {
	running, failed := false, ""
	for i := len(p.Status.ContainerStatuses) - 1; i >= 0; i-- {
		s := p.Status.ContainerStatuses[i]
		r.restarts += int(s.RestartCount)
		r.lastRestart = later(r.lastRestart, s.LastTerminationState.Terminated)
		switch term := s.State.Terminated; {
		case s.State.Waiting != nil && s.State.Waiting.Reason != "":
			r.reason = s.State.Waiting.Reason
		case term != nil:
			r.reason = terminatedReason(term)
			if term.ExitCode != 0 {
				failed = r.reason
			}
		case s.Ready && s.State.Running != nil:
			running = true
			r.ready++
		}
	}
	if r.reason != "Completed" {
		return
	}
	switch {
	case running && conditionTrue(p.Status.Conditions, corev1.PodReady):
		r.reason = "Running"
	case failed != "":
		r.reason = failed
	case running:
		r.reason = "NotReady"
	}
}

func terminatedReason(t *corev1.ContainerStateTerminated) string {
	switch {
	case t.Reason != "":
		return t.Reason
	case t.Signal != 0:
		return fmt.Sprintf("Signal:%d", t.Signal)
	}
	return fmt.Sprintf("ExitCode:%d", t.ExitCode)
}

// later is the later of last and when t finished.
func later(last metav1.Time, t *corev1.ContainerStateTerminated) metav1.Time {
	if t != nil && last.Before(&t.FinishedAt) {
		return t.FinishedAt
	}
	return last
}

func isSidecar(c corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

func conditionTrue(conditions []corev1.PodCondition, t corev1.PodConditionType) bool {
	for _, c := range conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// restartsCell is "N", or "N (5m ago)" when the last restart's time is
// known.
func (r podRow) restartsCell() string {
	if r.restarts != 0 && !r.lastRestart.IsZero() {
		return fmt.Sprintf("%d (%s ago)", r.restarts, printers.Since(r.lastRestart))
	}
	return strconv.Itoa(r.restarts)
}

// podRowConditions mark the row of a pod whose phase is over Completed.
func podRowConditions(p *corev1.Pod) []metav1.TableRowCondition {
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		return []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodSucceeded), Message: "The pod has completed successfully."}}
	case corev1.PodFailed:
		return []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodFailed), Message: "The pod failed."}}
	}
	return nil
}

// podColumns are kubectl get pods' columns after NAME.
func podColumns() []registry.Column {
	c := registry.ColumnOf[*corev1.Pod]
	return []registry.Column{
		c("Ready", "string", "The aggregate readiness state of this pod for accepting traffic.", 0, func(p *corev1.Pod) any {
			r := printedPod(p)
			return fmt.Sprintf("%d/%d", r.ready, r.total)
		}),
		c("Status", "string", "The aggregate status of the containers in this pod.", 0, func(p *corev1.Pod) any { return printedPod(p).reason }),
		c("Restarts", "string", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.", 0,
			func(p *corev1.Pod) any { return printedPod(p).restartsCell() }),
		registry.AgeColumn(),
		c("IP", "string", corev1.PodStatus{}.SwaggerDoc()["podIP"], 1, func(p *corev1.Pod) any {
			if len(p.Status.PodIPs) == 0 || p.Status.PodIPs[0].IP == "" {
				return "<none>"
			}
			return p.Status.PodIPs[0].IP
		}),
		c("Node", "string", corev1.PodSpec{}.SwaggerDoc()["nodeName"], 1, func(p *corev1.Pod) any { return podCellOrNone(p.Spec.NodeName) }),
		c("Nominated Node", "string", corev1.PodStatus{}.SwaggerDoc()["nominatedNodeName"], 1, func(p *corev1.Pod) any { return podCellOrNone(p.Status.NominatedNodeName) }),
		c("Readiness Gates", "string", corev1.PodSpec{}.SwaggerDoc()["readinessGates"], 1, readinessGatesCell),
	}
}

func podCellOrNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// readinessGatesCell counts the gates whose condition (the first of its
// type) is True.
func readinessGatesCell(p *corev1.Pod) any {
	if len(p.Spec.ReadinessGates) == 0 {
		return "<none>"
	}
	ready := 0
	for _, g := range p.Spec.ReadinessGates {
		for _, cond := range p.Status.Conditions {
			if cond.Type == g.ConditionType {
				if cond.Status == corev1.ConditionTrue {
					ready++
				}
				break
			}
		}
	}
	return fmt.Sprintf("%d/%d", ready, len(p.Spec.ReadinessGates))
}
