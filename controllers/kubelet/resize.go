package kubelet

// In-place resize, as the v1.37 kubelet's allocation manager and pod sync
// do it: a resize of running containers' resources (pods/resize) is
// allocated when the node has room (PodResizeInProgress, event
// ResizeStarted), then actuated at the next sync (the runtime reports the
// new resources; containers whose resizePolicy says RestartContainer are
// restarted; ResizeCompleted); one the node cannot take yet is deferred
// (PodResizePending, reason Deferred, event ResizeDeferred) and tried
// again at every sync of the pod, and when a pod of the node goes.
//
// A resize of the pod-level resources (spec.resources) is allocated and
// actuated with the containers' (InPlacePodLevelResourcesVerticalScaling):
// it is in progress while the pod's cgroup applies other cpu or memory
// than allocated, and a pod-level limit stands for the limit of a
// container that sets none, which may restart it. The events' JSON names
// the containers' resources only, as the kubelet's does.

import (
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/resource"
)

// deferredRetry is how soon a deferred resize is tried again without
// another cause (the allocation manager's first retry).
const deferredRetry = 30 * time.Second

// resize advances pod's resize: allocates or defers what the spec asks
// now, or actuates what was allocated. It returns the kubelet's events
// about the pod. Called with k.mu held, once the sandbox runs and while
// the pod is neither deleted nor over.
func (k *Kubelet) resize(pod *corev1.Pod, r *podRuntime, n *node, now time.Time, plans planner) []event {
	desired := r.desired(pod)
	if desired == nil && !r.podLevelResized(pod) {
		r.pending = nil // reverted, or nothing asked
		if r.inProgress == nil {
			return nil
		}
		return k.actuate(pod, r, now, plans) // allocated at the last sync
	}
	if reason, msg := k.fits(pod, r, n, desired); reason != "" {
		var events []event
		if r.pending == nil || r.pending.ObservedGeneration != pod.Generation {
			events = []event{{corev1.EventTypeWarning, "ResizeDeferred", resizeMessage("Pod resize "+reason, pod, pod.Generation, msg)}}
		}
		r.pending = resizeCondition(corev1.PodResizePending, corev1.PodReasonDeferred, msg, pod.Generation, now, r.pending)
		return events
	}
	// Allocated: a resize in progress is superseded (its condition set
	// again with this generation, no completion of its own).
	r.allocate(pod, desired)
	inPlace := r.resizeInProgress()
	r.pending = nil
	r.inProgress = resizeCondition(corev1.PodResizeInProgress, "", "", pod.Generation, now, nil)
	events := []event{{corev1.EventTypeNormal, "ResizeStarted", resizeMessage("Pod resize started", pod, pod.Generation, "")}}
	if !inPlace {
		// Nothing running to apply it to: done in this sync, no condition
		// written (IsPodResizeInProgress skips such containers).
		events = append(events, k.actuate(pod, r, now, plans)...)
	}
	return events
}

// allocate makes the spec's resources of pod the allocation: desired's
// containers' and the pod-level ones (SetAllocatedResources checkpoints
// the whole pod). A container is restarted at actuation when a resource
// whose policy is RestartContainer changes as its runtime applies it,
// which a pod-level limit does for a container that sets none.
func (r *podRuntime) allocate(pod *corev1.Pod, desired map[string]corev1.Container) {
	oldPod, newPod := r.podResources, pod.Spec.Resources.DeepCopy()
	for _, c := range r.all() {
		if c.ephemeral {
			continue // not resizable: nothing allocated to it changes
		}
		want, policy := c.allocated, c.spec.ResizePolicy
		if d, ok := desired[c.spec.Name]; ok {
			want, policy = *d.Resources.DeepCopy(), d.ResizePolicy
		}
		c.restartOnResize = c.restartOnResize || needsRestart(applied(oldPod, c.allocated), applied(newPod, want), policy)
		c.allocated = want
	}
	r.podResources = newPod
}

// resizeInProgress: the runtime does not apply yet what is allocated to a
// running container resized in place (a sidecar, not a regular init
// container) or to the pod's cgroup (IsPodResizeInProgress; a pod whose
// cgroup was given no pod-level resources has none in progress).
func (r *podRuntime) resizeInProgress() bool {
	for _, c := range r.all() {
		if !c.ephemeral && (!c.init || c.sidecar) && c.instance.running() && !r.allocatedApplied(c) {
			return true
		}
	}
	return r.podActuated != nil && r.podResources != nil && !sameCPUMemory(*r.podActuated, *r.podResources)
}

// allocatedApplied: what is allocated to the container is what its runtime
// applies, pod-level limits standing for those it sets none of.
func (r *podRuntime) allocatedApplied(c *container) bool {
	return apiequality.Semantic.DeepEqual(c.allocated, c.actuated) &&
		sameCPUMemory(applied(r.podResources, c.allocated), applied(r.podActuated, c.actuated))
}

// applied are a container's resources as its runtime applies them under
// the pod-level resources pod: its cpu or memory limit is the pod's where
// it sets none (GetLimits).
func applied(pod *corev1.ResourceRequirements, c corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := *c.DeepCopy()
	if pod == nil {
		return out
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		own := out.Limits[name]
		if q, ok := pod.Limits[name]; ok && !q.IsZero() && own.IsZero() {
			if out.Limits == nil {
				out.Limits = corev1.ResourceList{}
			}
			out.Limits[name] = q.DeepCopy()
		}
	}
	return out
}

// sameCPUMemory: a and b request and limit the same cpu and memory.
func sameCPUMemory(a, b corev1.ResourceRequirements) bool {
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if !a.Requests[name].Equal(b.Requests[name]) || !a.Limits[name].Equal(b.Limits[name]) {
			return false
		}
	}
	return true
}

// actuatedPodLevel are the pod-level resources a pod's cgroup is given
// from res: none when res requests and limits nothing
// (UpdateActuatedPodLevelResources).
func actuatedPodLevel(res *corev1.ResourceRequirements) *corev1.ResourceRequirements {
	if res == nil || res.Requests == nil && res.Limits == nil {
		return nil
	}
	return res.DeepCopy()
}

// podLevelResized: pod's spec asks pod-level resources other than those
// allocated.
func (r *podRuntime) podLevelResized(pod *corev1.Pod) bool {
	return !apiequality.Semantic.DeepEqual(pod.Spec.Resources, r.podResources)
}

// actuate applies what is allocated, as the runtime does: a running
// container whose resize policy asks for it is killed (with the code a
// stop gives, by the test's rules) and started again. It returns the
// ResizeCompleted event and clears the condition.
func (k *Kubelet) actuate(pod *corev1.Pod, r *podRuntime, now time.Time, plans planner) []event {
	_, code := k.outcomes.stopPlan(pod)
	for _, c := range r.all() {
		if c.restartOnResize && c.instance.running() {
			c.record(event{corev1.EventTypeNormal, "Killing", fmt.Sprintf("Container %s resize requires restart", c.spec.Name)})
			c.exit(now, Exit{Code: code})
			c.start(now, plans, pod) // the instance killed becomes its last
		}
		c.restartOnResize = false
		c.actuated = *c.allocated.DeepCopy()
	}
	r.podActuated = actuatedPodLevel(r.podResources) // the pod's cgroup
	generation := r.inProgress.ObservedGeneration
	r.inProgress = nil
	return []event{{corev1.EventTypeNormal, "ResizeCompleted", resizeMessage("Pod resize completed", r.allocatedPod(pod), generation, "")}}
}

// desired are the init and regular containers of pod whose resources
// differ from their allocation, by name; nil if none does.
func (r *podRuntime) desired(pod *corev1.Pod) map[string]corev1.Container {
	var out map[string]corev1.Container
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if rc := r.byName(c.Name); !rc.ephemeral && !apiequality.Semantic.DeepEqual(rc.allocated, c.Resources) {
				if out == nil {
					out = map[string]corev1.Container{}
				}
				out[c.Name] = c
			}
		}
	}
	return out
}

// needsRestart: a resource that changes from old to want has the resize
// policy RestartContainer.
func needsRestart(old, want corev1.ResourceRequirements, policy []corev1.ContainerResizePolicy) bool {
	for _, p := range policy {
		if p.RestartPolicy != corev1.RestartContainer {
			continue
		}
		if !old.Requests[p.ResourceName].Equal(want.Requests[p.ResourceName]) || !old.Limits[p.ResourceName].Equal(want.Limits[p.ResourceName]) {
			return true
		}
	}
	return false
}

// fits is the kubelet's admission of a resize: the pod's requests with
// desired and the spec's pod-level resources (which stand for the
// containers' cpu and memory requests they set) against the node's
// allocatable less what its other pods allocated, CPU then memory. It
// returns the admission's reason (OutOfcpu) and message, or "" when the
// resize fits.
func (k *Kubelet) fits(pod *corev1.Pod, r *podRuntime, n *node, desired map[string]corev1.Container) (reason, msg string) {
	want := r.allocatedPod(pod)
	want.Spec.Resources = pod.Spec.Resources
	for _, list := range [][]corev1.Container{want.Spec.InitContainers, want.Spec.Containers} {
		for i := range list {
			if c, ok := desired[list[i].Name]; ok {
				list[i].Resources = c.Resources
			}
		}
	}
	used := requested(k.admitted(n, r))
	asked, capacity := resource.PodRequests(want, resource.PodResourcesOptions{}), allocatable(capacityOf(n.spec))
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, u, c := amount(asked, name), amount(used, name), amount(capacity, name)
		if req > 0 && req > c-u {
			return "OutOf" + string(name), fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d", name, req, u, c)
		}
	}
	return "", ""
}

// amount is the quantity in the scheduler's units: millicores of CPU,
// bytes of the others.
func amount(l corev1.ResourceList, name corev1.ResourceName) int64 {
	q := l[name]
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// allocatedPod is pod with its containers' resources as allocated (a
// pod's spec carries what is asked, not what the node gave).
func (r *podRuntime) allocatedPod(pod *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{ObjectMeta: pod.ObjectMeta, Spec: corev1.PodSpec{Overhead: r.overhead, Resources: r.podResources}}
	for _, c := range r.init {
		spec := *c.spec
		spec.Resources = c.allocated
		out.Spec.InitContainers = append(out.Spec.InitContainers, spec)
	}
	for _, c := range r.main {
		spec := *c.spec
		spec.Resources = c.allocated
		out.Spec.Containers = append(out.Spec.Containers, spec)
	}
	return out
}

// resizeCondition is a resize condition evaluated now: set now, or since
// old's transition when old is one.
func resizeCondition(t corev1.PodConditionType, reason, msg string, generation int64, now time.Time, old *corev1.PodCondition) *corev1.PodCondition {
	at := metav1.NewTime(now.Truncate(time.Second))
	c := &corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: msg, ObservedGeneration: generation,
		LastProbeTime: at, LastTransitionTime: at}
	if old != nil {
		c.LastTransitionTime = old.LastTransitionTime
	}
	return c
}

// resizeMessage is the message of the kubelet's resize events: prefix,
// then the containers' resources of pod, the resize's generation and the
// error, as JSON.
func resizeMessage(prefix string, pod *corev1.Pod, generation int64, errMsg string) string {
	type allocation struct {
		Name      string                      `json:"name"`
		Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	}
	summary := struct {
		InitContainers []allocation `json:"initContainers,omitempty"`
		Containers     []allocation `json:"containers,omitempty"`
		Generation     int64        `json:"generation"`
		Error          string       `json:"error,omitempty"`
	}{Generation: generation, Error: errMsg}
	for _, c := range pod.Spec.InitContainers {
		summary.InitContainers = append(summary.InitContainers, allocation{c.Name, c.Resources})
	}
	for _, c := range pod.Spec.Containers {
		summary.Containers = append(summary.Containers, allocation{c.Name, c.Resources})
	}
	b, err := json.Marshal(summary)
	if err != nil {
		return prefix
	}
	return prefix + ": " + string(b)
}

// retryDeferredLocked syncs again the pods of node whose resize is
// deferred: a pod of the node went, which may have made room. Called with
// k.mu held.
func (k *Kubelet) retryDeferredLocked(node string) {
	for key, uid := range k.keys {
		if r := k.running[uid]; r != nil && r.node == node && r.pending != nil {
			k.podQueue.Add(key)
		}
	}
}
