package kubelet

// The pod status a kubelet reports for a runtime: generateAPIPodStatus,
// getPhase and the status package's condition generators, read from
// kubelet v1.37.2 and written here over the simulated runtime.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/internal/podqos"
)

// kubeletConditions are the condition types the kubelet owns; others
// (DisruptionTarget, readiness gates' conditions) are kept, before them.
var kubeletConditions = []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized,
	corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled, "PodResizeInProgress", "PodResizePending", "AllContainersRestarting"}

// podStatus is the status the kubelet reports for pod running as r on a
// node at hostIP, now.
func podStatus(pod *corev1.Pod, r *podRuntime, hostIP string, now time.Time) corev1.PodStatus {
	init, main, ephemeral := containerStatuses(pod, r, now)
	capMessages(pod, init, main, ephemeral)
	allocated := r.allocatedPod(pod)
	s := corev1.PodStatus{
		ObservedGeneration: pod.Generation,
		HostIP:             hostIP, HostIPs: []corev1.HostIP{{IP: hostIP}},
		StartTime:             ptrTime(r.startTime),
		QOSClass:              podqos.Class(pod),
		InitContainerStatuses: init, ContainerStatuses: main, EphemeralContainerStatuses: ephemeral,
		Resources:          podLevelResources(pod, r, allocated),
		AllocatedResources: nonEmpty(resource.PodRequests(allocated, resource.PodResourcesOptions{})),
	}
	if (r.sandbox || pod.Spec.HostNetwork) && r.ip != "" { // a host network pod has the node's from its first status
		s.PodIP, s.PodIPs = r.ip, []corev1.PodIP{{IP: r.ip}}
	}
	s.Phase = phase(pod, r, init, main)
	if r.pastDeadline { // the active deadline handler's eviction
		s.Phase, s.Reason, s.Message = corev1.PodFailed, deadlineReason, deadlineMessage
	}
	if held := pod.Status.Phase; held == corev1.PodSucceeded || held == corev1.PodFailed {
		s.Phase = held // once terminal, a pod's phase never changes
	}
	s.Conditions = conditions(pod, r, s, now)
	return s
}

// capMessages cuts the termination messages to the status manager's share
// of 12 KiB per container (normalizeStatus): their first bytes.
func capMessages(pod *corev1.Pod, lists ...[]corev1.ContainerStatus) {
	share := maxPodTerminationMessages
	if n := len(pod.Spec.Containers) + len(pod.Spec.InitContainers) + len(pod.Spec.EphemeralContainers); n > 0 {
		share /= n
	}
	for _, list := range lists {
		for i := range list {
			for _, t := range []*corev1.ContainerStateTerminated{list[i].State.Terminated, list[i].LastTerminationState.Terminated} {
				if t != nil && len(t.Message) > share {
					t.Message = t.Message[:share]
				}
			}
		}
	}
}

// podLevelResources is a pod's status.resources as the kubelet reports it
// (convertToAPIPodLevelResourcesStatus): for a pod not yet Running, its
// allocated spec.resources with the requests and limits of what it
// allocated (getEffectiveAllocatedResources); once Running, the cpu
// request and limit and the memory limit are read back from the pod's
// cgroup, which applies the actuated pod-level resources, so a pod-level
// resize shows there once actuated (the memory request, which no cgroup
// holds, once allocated).
func podLevelResources(pod *corev1.Pod, r *podRuntime, allocated *corev1.Pod) *corev1.ResourceRequirements {
	out := effectiveResources(allocated)
	defer func() { // as read back from the server: empty lists are absent
		out.Requests, out.Limits = nonEmpty(out.Requests), nonEmpty(out.Limits)
	}()
	if pod.Status.Phase != corev1.PodRunning {
		return out
	}
	actuated := *allocated
	actuated.Spec.Resources = r.podActuated
	cgroup := effectiveResources(&actuated)
	for _, l := range []struct {
		name     corev1.ResourceName
		from, to corev1.ResourceList
	}{{corev1.ResourceCPU, cgroup.Requests, out.Requests}, {corev1.ResourceCPU, cgroup.Limits, out.Limits}, {corev1.ResourceMemory, cgroup.Limits, out.Limits}} {
		if q, ok := l.from[l.name]; ok && l.to != nil {
			l.to[l.name] = q
		}
	}
	return out
}

// effectiveResources are pod's spec.resources with the requests and limits
// of the whole pod.
func effectiveResources(pod *corev1.Pod) *corev1.ResourceRequirements {
	out := pod.Spec.Resources.DeepCopy()
	if out == nil {
		out = &corev1.ResourceRequirements{}
	}
	out.Requests = resource.PodRequests(pod, resource.PodResourcesOptions{})
	out.Limits = resource.PodLimits(pod, resource.PodResourcesOptions{})
	return out
}

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t.Truncate(time.Second))
	return &mt
}

func nonEmpty(l corev1.ResourceList) corev1.ResourceList {
	if len(l) == 0 {
		return nil
	}
	return l
}

// containerStatuses are the init containers' statuses in spec order and
// the others' (regular, ephemeral) sorted by name, as the kubelet lists
// them.
func containerStatuses(pod *corev1.Pod, r *podRuntime, now time.Time) (init, main, ephemeral []corev1.ContainerStatus) {
	waiting := "ContainerCreating"
	if len(pod.Spec.InitContainers) > 0 {
		waiting = "PodInitializing"
	}
	for _, c := range r.init {
		init = append(init, containerStatus(pod, c, waiting, now))
	}
	for _, c := range r.main {
		main = append(main, containerStatus(pod, c, waiting, now))
	}
	for _, c := range r.ephemeral {
		ephemeral = append(ephemeral, containerStatus(pod, c, waiting, now))
	}
	byName := func(a, b corev1.ContainerStatus) int { return strings.Compare(a.Name, b.Name) }
	slices.SortFunc(main, byName)
	slices.SortFunc(ephemeral, byName)
	return init, main, ephemeral
}

// containerStatus is one container's status: waiting (with why), running
// or terminated, its previous instance, readiness and identity. The
// prober reports whether regular and init containers started (not
// ephemeral ones); the resources are the spec's once the runtime has the
// container (convertContainerStatusResources).
func containerStatus(pod *corev1.Pod, c *container, waiting string, now time.Time) corev1.ContainerStatus {
	if c.shownRemoved != nil { // removed to restart the pod in place (restartall.go)
		return *c.shownRemoved.DeepCopy()
	}
	s := corev1.ContainerStatus{Name: c.spec.Name, Image: c.spec.Image, RestartCount: c.restarts,
		Started: new(bool), VolumeMounts: mounts(c.spec)}
	if c.ephemeral {
		s.Started = nil
	}
	if c.last != nil {
		s.LastTerminationState.Terminated = terminated(*c.last)
	}
	if c.instance.started.IsZero() {
		s.State.Waiting = &corev1.ContainerStateWaiting{Reason: waiting}
		if c.waiting != nil {
			s.State.Waiting = c.waiting.DeepCopy()
		}
		return s
	}
	// A running container's resources are what its runtime applies; any
	// other's what is allocated (convertContainerStatusResources).
	s.Resources, s.AllocatedResources = c.allocated.DeepCopy(), nonEmpty(c.allocated.Requests)
	if c.instance.running() {
		s.Resources = c.actuated.DeepCopy()
	}
	switch i := c.instance; {
	case i.running():
		s.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(i.started.Truncate(time.Second))}
		if !c.ephemeral {
			*s.Started = c.started(now)
			s.Ready = c.isReady(now) && (!c.init || c.sidecar) // a regular init container is ready once it completed
		}
	case c.endedInBackOff || !c.restartAt.IsZero() && now.Before(c.restartAt) || c.postStart != nil && c.waitedBackOff:
		s.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
			Message: fmt.Sprintf("back-off %v restarting failed container=%s pod=%s", c.wait, c.spec.Name, podDesc(pod))}
		s.LastTerminationState.Terminated = terminated(i)
	case c.hookError != "" && restartable(pod, c, i.exitCode): // killed for its postStart hook: the start's error
		s.State.Waiting = &corev1.ContainerStateWaiting{Reason: "PostStartHookError", Message: c.hookError}
		s.LastTerminationState.Terminated = terminated(i)
	default:
		s.State.Terminated = terminated(i)
		s.Ready = c.init && !c.sidecar && i.exitCode == 0
	}
	s.Image, s.ImageID = normalizeImage(c.spec.Image)
	s.ContainerID = runtimeName + "://" + c.instance.id
	s.User = &corev1.ContainerUser{Linux: &corev1.LinuxContainerUser{SupplementalGroups: []int64{0}}}
	return s
}

// terminated is the instance's terminated state; one with no ID is a
// container removed to restart its pod in place, which has no times.
func terminated(i run) *corev1.ContainerStateTerminated {
	t := &corev1.ContainerStateTerminated{ExitCode: i.exitCode, Reason: i.reason, Message: i.message}
	if i.id != "" {
		t.StartedAt, t.FinishedAt = metav1.NewTime(i.started.Truncate(time.Second)), metav1.NewTime(i.finished.Truncate(time.Second))
		t.ContainerID = runtimeName + "://" + i.id
	}
	return t
}

// mounts are the container's volume mounts as the kubelet reports them.
func mounts(spec *corev1.Container) []corev1.VolumeMountStatus {
	var out []corev1.VolumeMountStatus
	for _, m := range spec.VolumeMounts {
		s := corev1.VolumeMountStatus{Name: m.Name, MountPath: m.MountPath, ReadOnly: m.ReadOnly}
		if m.ReadOnly {
			s.RecursiveReadOnly = ptr.To(corev1.RecursiveReadOnlyDisabled)
			// resolveRecursiveReadOnly, on a runtime that supports it
			// (runtimeHandlers): asked for, it is enabled.
			asked := m.RecursiveReadOnly != nil && (*m.RecursiveReadOnly == corev1.RecursiveReadOnlyEnabled || *m.RecursiveReadOnly == corev1.RecursiveReadOnlyIfPossible)
			if asked && (m.MountPropagation == nil || *m.MountPropagation == corev1.MountPropagationNone) {
				s.RecursiveReadOnly = ptr.To(corev1.RecursiveReadOnlyEnabled)
			}
		}
		out = append(out, s)
	}
	return out
}

// normalizeImage is the image as containerd names it once pulled
// (docker.io/library/nginx:latest for nginx) and its image ID, a repo
// digest: the image's own digest when it names one, else a digest derived
// from its name (the simulated node has every image).
func normalizeImage(image string) (name, id string) {
	repo, digest, _ := strings.Cut(image, "@")
	first, _, hasSlash := strings.Cut(repo, "/")
	if !hasSlash || (!strings.ContainsAny(first, ".:") && first != "localhost") {
		if !hasSlash {
			repo = "library/" + repo
		}
		repo = "docker.io/" + repo
	}
	if i := strings.LastIndex(repo, ":"); i < 0 || strings.Contains(repo[i:], "/") {
		if digest == "" {
			repo += ":latest"
		}
	}
	name = repo
	if digest != "" {
		name = repo + "@" + digest
	}
	if digest == "" {
		sum := sha256.Sum256([]byte(repo))
		digest = "sha256:" + hex.EncodeToString(sum[:])
	}
	base := repo
	if i := strings.LastIndex(repo, ":"); i > 0 && !strings.Contains(repo[i:], "/") {
		base = repo[:i]
	}
	return name, base + "@" + digest
}

// phase is getPhase over the statuses: Pending while a regular init
// container runs or waits for its first start, while a sidecar waits for
// its first start or, before any regular container has run, for its
// startup probe, or while a regular container waits for its first start;
// then Running while one (a sidecar too) runs or a stopped one will
// restart; then Succeeded or Failed by the regular containers' exit codes
// (a deleted pod's too, whatever its restart policy). A container removed
// by a restart in place will restart (restartall.go).
func phase(pod *corev1.Pod, r *podRuntime, init, main []corev1.ContainerStatus) corev1.PodPhase {
	if r.initFailed {
		return corev1.PodFailed
	}
	pending := false
	running, stopped, succeeded, restarting := 0, 0, 0, 0
	for _, s := range init {
		c, never := r.byName(s.Name), s.State.Waiting != nil && s.LastTerminationState.Terminated == nil
		switch {
		case c.sidecar && s.State.Running != nil:
			running++
			pending = pending || !*s.Started && !r.mainStarted()
		case c.sidecar:
			pending = pending || never
		case s.State.Running != nil || never:
			pending = true
		}
	}
	for _, s := range main {
		switch term := s.State.Terminated; {
		case s.State.Running != nil:
			running++
		case term != nil || s.LastTerminationState.Terminated != nil:
			if term == nil {
				term = s.LastTerminationState.Terminated
			}
			stopped++
			if term.ExitCode == 0 {
				succeeded++
			}
			if r.stopping.IsZero() && (restartable(pod, r.byName(s.Name), term.ExitCode) || term.Reason == restartingAll) {
				restarting++
			}
		default:
			pending = true // waiting for its first start
		}
	}
	switch {
	case pending:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	case stopped == 0:
		return corev1.PodPending
	case restarting > 0:
		return corev1.PodRunning
	case stopped == succeeded:
		return corev1.PodSucceeded
	}
	return corev1.PodFailed
}

func (r *podRuntime) byName(name string) *container {
	for _, c := range r.all() {
		if c.spec.Name == name {
			return c
		}
	}
	return &container{spec: &corev1.Container{Name: name}}
}

// conditions are the pod's: others' first, then the kubelet's in its order
// (PodReadyToStartContainers, Initialized, Ready, ContainersReady,
// PodScheduled, then AllContainersRestarting for a pod that may restart in
// place); a condition keeps its lastTransitionTime while its status
// stays (against the kubelet's last status, as the status manager keeps
// it).
func conditions(pod *corev1.Pod, r *podRuntime, s corev1.PodStatus, now time.Time) []corev1.PodCondition {
	var out []corev1.PodCondition
	for _, c := range pod.Status.Conditions {
		if !slices.Contains(kubeletConditions, c.Type) {
			out = append(out, c)
		}
	}
	if !phaseOver(s.Phase) { // a finished pod's resize conditions are cleared
		for _, c := range []*corev1.PodCondition{r.pending, r.inProgress} {
			if c != nil {
				out = append(out, *c)
			}
		}
	}
	containersReady := containersReadyCondition(pod, r, s)
	mine := []corev1.PodCondition{
		sandboxCondition(r, s.Phase), initializedCondition(pod, r, s),
		readyCondition(pod, s, containersReady, out), containersReady,
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
	}
	if c, ok := restartingCondition(pod, r, s.Phase); ok {
		mine = append(mine, c)
	}
	t := metav1.NewTime(now.Truncate(time.Second))
	last := r.lastStatus(pod).Status.Conditions // the informer may not show the kubelet's last status yet
	for i := range mine {
		mine[i].LastTransitionTime = t
		if mine[i].Type != corev1.AllContainersRestarting { // its generator sets none
			mine[i].ObservedGeneration = pod.Generation
		}
		for _, old := range last {
			if old.Type == mine[i].Type && old.Status == mine[i].Status {
				mine[i].LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	return append(out, mine...)
}

// keepOthers adds to status the conditions the kubelet does not own that
// base has and status lacks, before the kubelet's, as the status manager
// keeps those of the pod it read (mergePodStatus). status was computed
// from the informer's pod; base, the pod the patch is diffed against, can
// be newer (the server's answer to the kubelet's last patch), and a
// condition another writer added in between (the taint manager's
// DisruptionTarget) would otherwise be patched away: CI saw a pod deleted
// by the taint manager without it.
func keepOthers(base *corev1.Pod, status corev1.PodStatus) corev1.PodStatus {
	var missing []corev1.PodCondition
	for _, c := range base.Status.Conditions {
		if !slices.Contains(kubeletConditions, c.Type) &&
			!slices.ContainsFunc(status.Conditions, func(have corev1.PodCondition) bool { return have.Type == c.Type }) {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return status
	}
	status.Conditions = append(missing, status.Conditions...)
	return status
}

// holdPhase keeps base's phase, reason and message in status when the
// status would turn base Succeeded or Failed while something may still run
// in the pod, as the status manager's mergePodStatus does: a pod is not
// reported over before what ran in it has stopped. Its conditions say it
// already (Ready False, PodFailed).
func holdPhase(base *corev1.Pod, status *corev1.PodStatus) {
	if phaseOver(status.Phase) && !terminal(base) {
		status.Phase, status.Reason, status.Message = base.Status.Phase, base.Status.Reason, base.Status.Message
	}
}

func sandboxCondition(r *podRuntime, phase corev1.PodPhase) corev1.PodCondition {
	switch {
	case !r.sandbox:
		return corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse, Reason: "PodSandboxNotReady", Message: "no pod sandbox exists"}
	case r.ip == "":
		return corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse, Reason: "PodSandboxNotReady", Message: "pod sandbox has no IP address"}
	case (phaseOver(phase) || !r.stopping.IsZero()) && r.stopped(): // killPod stops the sandbox after the containers
		return corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse, Reason: "PodSandboxNotReady", Message: "pod sandbox is not ready"}
	}
	return corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue}
}

func initializedCondition(pod *corev1.Pod, r *podRuntime, s corev1.PodStatus) corev1.PodCondition {
	if s.Phase == corev1.PodSucceeded {
		return corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, Reason: "PodCompleted"}
	}
	for _, c := range s.ContainerStatuses {
		if c.State.Running != nil || c.State.Terminated != nil || c.LastTerminationState.Terminated != nil {
			return corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}
		}
	}
	var incomplete []string
	for _, c := range s.InitContainerStatuses {
		if r.byName(c.Name).sidecar && (c.Started == nil || !*c.Started) || !r.byName(c.Name).sidecar && !c.Ready {
			incomplete = append(incomplete, c.Name)
		}
	}
	// A pod once initialized stays so (RestartAllContainersOnContainerExits,
	// beta and on in v1.37): a sidecar's restart, before any regular
	// container could start, does not undo it. The kubelet reads its own
	// last status (the status manager's), which r.initialized remembers.
	if len(incomplete) > 0 && !r.initialized {
		return corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionFalse, Reason: "ContainersNotInitialized",
			Message: fmt.Sprintf("containers with incomplete status: %s", incomplete)}
	}
	r.initialized = true
	return corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}
}

func containersReadyCondition(pod *corev1.Pod, r *podRuntime, s corev1.PodStatus) corev1.PodCondition {
	switch s.Phase {
	case corev1.PodSucceeded:
		return corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "PodCompleted"}
	case corev1.PodFailed:
		return corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "PodFailed"}
	}
	var unready []string
	for _, c := range s.InitContainerStatuses {
		if r.byName(c.Name).sidecar && !c.Ready {
			unready = append(unready, c.Name)
		}
	}
	for _, spec := range pod.Spec.Containers { // spec order, as upstream lists them
		if i := slices.IndexFunc(s.ContainerStatuses, func(c corev1.ContainerStatus) bool { return c.Name == spec.Name }); i < 0 || !s.ContainerStatuses[i].Ready {
			unready = append(unready, spec.Name)
		}
	}
	if len(unready) > 0 {
		return corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady",
			Message: fmt.Sprintf("containers with unready status: %s", unready)}
	}
	return corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}
}

// isSidecar: an init container with restartPolicy Always.
func isSidecar(c corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// readyCondition follows ContainersReady, then the readiness gates'
// conditions (others, of the pod's own conditions).
func readyCondition(pod *corev1.Pod, s corev1.PodStatus, containersReady corev1.PodCondition, others []corev1.PodCondition) corev1.PodCondition {
	if containersReady.Status != corev1.ConditionTrue {
		return corev1.PodCondition{Type: corev1.PodReady, Status: containersReady.Status, Reason: containersReady.Reason, Message: containersReady.Message}
	}
	var msgs []string
	for _, g := range pod.Spec.ReadinessGates {
		i := slices.IndexFunc(others, func(c corev1.PodCondition) bool { return c.Type == g.ConditionType })
		switch {
		case i < 0:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(g.ConditionType)))
		case others[i].Status != corev1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(g.ConditionType), others[i].Status))
		}
	}
	if len(msgs) > 0 {
		return corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ReadinessGatesNotReady", Message: strings.Join(msgs, ", ")}
	}
	return corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
}

// terminate gives the status of a pod the kubelet is done with (deleted
// and stopped, or over) its last touches, as the status manager's
// TerminatePod: a container that never ended (it never started: its image
// could not be pulled, its volumes mounted) is reported terminated with
// ContainerStatusUnknown and 137, once the pod had initialized (and each
// init container up to the last that tried to start), and a pod not
// Succeeded or Failed ends Failed: a watcher, or the Job controller, sees
// every pod end before it is gone.
func terminate(pod *corev1.Pod, status *corev1.PodStatus) {
	unknown := func(s *corev1.ContainerStatus) {
		if s.State.Terminated == nil {
			s.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: sigkillExitCode,
				Reason: "ContainerStatusUnknown", Message: "The container could not be located when the pod was terminated"}}
		}
	}
	if hasInitialized(pod) {
		for i := range status.ContainerStatuses {
			unknown(&status.ContainerStatuses[i])
		}
	}
	for i := range tried(status.InitContainerStatuses) {
		unknown(&status.InitContainerStatuses[i])
	}
	if !phaseOver(status.Phase) {
		status.Phase = corev1.PodFailed
	}
}

// hasInitialized: the pod, as the server has it, has no init containers,
// or a container that left waiting once, or its last init container
// completed (or, a sidecar, started). The status manager's
// hasPodInitialized.
func hasInitialized(pod *corev1.Pod) bool {
	if len(pod.Spec.InitContainers) == 0 {
		return true
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.LastTerminationState.Terminated != nil || s.State.Waiting == nil {
			return true
		}
	}
	n := len(pod.Status.InitContainerStatuses)
	if n == 0 {
		return false
	}
	last := pod.Status.InitContainerStatuses[n-1]
	i := slices.IndexFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == last.Name })
	if i < 0 {
		return false
	}
	if isSidecar(pod.Spec.InitContainers[i]) {
		return last.State.Running != nil && last.Started != nil && *last.Started
	}
	completed := func(t *corev1.ContainerStateTerminated) bool { return t != nil && t.ExitCode == 0 }
	return completed(last.LastTerminationState.Terminated) || completed(last.State.Terminated)
}

// tried is statuses but for the trailing ones still waiting with no
// earlier run (never tried to start); at least the first.
func tried(statuses []corev1.ContainerStatus) []corev1.ContainerStatus {
	for i := len(statuses) - 1; i >= 0; i-- {
		if statuses[i].State.Waiting == nil || statuses[i].LastTerminationState.Terminated != nil {
			return statuses[:i+1]
		}
	}
	return statuses[:min(1, len(statuses))]
}
