package kubelet

// Pods as a kubelet runs them: admitted with a sandbox and an IP, their
// containers run by the simulated runtime, their status reported as a
// strategic merge patch of pods/status (conditioned on the pod's UID, as
// the kubelet's status manager writes it), and, once deleted, stopped and
// deleted with grace period 0.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/internal/controller"
)

// podWork is what a sync of one pod found to do, computed under the lock
// and carried out after it.
type podWork struct {
	status corev1.PodStatus
	events []containerEvent
	// version is the pod's resourceVersion the events name: the one the
	// kubelet first saw (its pod manager keeps that object and merges
	// later updates into it, resourceVersion aside).
	version string
	// podEvents are the kubelet's events about the pod itself (resizes),
	// recorded after the containers'; deadline its active deadline's,
	// recorded before them (one per generateAPIPodStatus: the two before
	// the kill with its Killing events, the two after once all stopped).
	podEvents, deadline []event
	// remove: the pod is stopped and deleted; delete it from the API.
	remove bool
	// hold: something may still run in the pod; a phase turning Succeeded
	// or Failed is not written yet (holdPhase).
	hold bool
	next time.Time
}

type containerEvent struct {
	container *container
	stampedEvent
}

// syncPod runs the pod key if it is bound to a simulated node whose
// kubelet runs.
func (k *Kubelet) syncPod(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	pod, err := k.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		k.forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	k.mu.Lock()
	n, ok := k.simulated[pod.Spec.NodeName]
	if !ok || n.stopped || n.uid == "" || n.notReady != "" {
		k.mu.Unlock()
		return nil // no kubelet, or its runtime is down (SetNodeReady): the pod is left as it is
	}
	if k.running[pod.UID] == nil && !terminal(pod) && k.nodeAffinityFails(pod) {
		k.mu.Unlock()
		k.refreshNode(ctx, pod.Spec.NodeName) // admission reads the node again before it rejects
		k.mu.Lock()
	}
	work, ok := k.work(key, pod, n)
	k.mu.Unlock()
	if !ok {
		return nil
	}
	k.record(pod, n.spec.Name, work)
	if err := k.report(ctx, pod, work); err != nil {
		return fmt.Errorf("report status of pod %s: %w", key, err)
	}
	if !work.next.IsZero() {
		k.requeueAt(key, work.next)
	}
	return nil
}

// report writes the pod's status, then deletes it if the work says so;
// if either fails, the pod is not taken as deleted, so that its next sync
// tries again.
func (k *Kubelet) report(ctx context.Context, pod *corev1.Pod, work podWork) error {
	base := k.statusBase(pod)
	status := keepOthers(base, work.status)
	if work.hold {
		holdPhase(base, &status)
	}
	err := k.patchStatus(ctx, base, status)
	if err == nil && work.remove {
		err = k.deletePod(ctx, pod)
	}
	if err != nil && work.remove {
		k.mu.Lock()
		if r := k.running[pod.UID]; r != nil {
			r.deleted = false
		}
		k.mu.Unlock()
	}
	return err
}

// work advances the pod's runtime to now and computes its status; false
// when there is nothing to report (the pod was deleted by the kubelet, or
// finished before this kubelet knew it). Called with k.mu held.
func (k *Kubelet) work(key string, pod *corev1.Pod, n *node) (podWork, bool) {
	r := k.running[pod.UID]
	if r == nil {
		if terminal(pod) {
			return podWork{}, false
		}
		r = k.admit(key, pod, n)
	}
	if r.deleted {
		return podWork{}, false
	}
	if r.rejection != nil {
		return r.rejectedWork(pod), true
	}
	if !terminal(pod) {
		r.addEphemeral(pod) // a finished pod's worker takes no more updates
	}
	now := k.clock.Now()
	deadline, hooked := k.endings(pod, r, now)
	var podEvents []event
	if r.admitted && !r.sandbox && r.stopping.IsZero() && !r.pastDeadline {
		r.sandbox = k.mount(pod, r, now) // the admission status is written: volumes, then the sandbox
	}
	r.admitted = true
	switch {
	case hooked, r.resetHolds(): // a resize is actuated once the hook has run, the pod restarted in place
	case r.sandbox && r.stopping.IsZero() && !r.killing && !terminal(pod) && !r.pastDeadline:
		podEvents = append(podEvents, k.resize(pod, r, n, now, k.plans())...)
	default:
		r.inProgress, r.pending = nil, nil // a deleted or finished pod's resize is dropped
	}
	r.advance(pod, now, k.plans())
	for k.startHooks(pod, r) { // a postStart hook with nothing to run: the sync goes on
		r.advance(pod, now, k.plans())
	}
	status, again := k.status(pod, r, n, now)
	podEvents, r.podEvents = append(r.podEvents, podEvents...), nil
	w := podWork{status: status, events: r.takeEvents(), podEvents: podEvents, deadline: deadline, version: r.version,
		next: r.next(pod, now), hold: !r.stopped()}
	restart := r.exitsSeen(pod)
	if added := r.reportedAdded(); r.sandboxDue(pod) || added || restart || r.inProgress != nil && !r.postStarting(now) && !r.resetHolds() || again {
		w.next = now // the sandbox and containers start (a resize is actuated) at the next sync
	}
	if retry := now.Add(deferredRetry); r.pending != nil && (w.next.IsZero() || retry.Before(w.next)) {
		w.next = retry
	}
	k.end(pod, r, n, &w)
	return w, true
}

// endings acts on the pod's deletion (its kill begins) and on its active
// deadline (the events of one passed), unless a postStart hook runs
// (hooked): that holds the sync where it is, and they are acted on once
// it has run. Called with k.mu held.
func (k *Kubelet) endings(pod *corev1.Pod, r *podRuntime, now time.Time) (deadline []event, hooked bool) {
	if r.sandbox {
		r.endPostStarts(pod, now, k.plans())
	}
	if r.postStarting(now) {
		return nil, true
	}
	if pod.DeletionTimestamp != nil && r.stopping.IsZero() {
		after, code := k.outcomes.stopRule(pod)
		r.startStopping(now, after, code, podGrace(pod)) // a later, shorter delete does not touch the kill under way
		k.startHooks(pod, r)
	}
	return r.checkDeadline(pod, now), false
}

// status is the pod's status as r runs it at now. What still runs of a
// pod that ended without a deletion (its regular containers ended for
// good while its sidecars run, or its phase is over: past its active
// deadline, an init container failed for good) is stopped (killPod), and
// the containers of a pod this status says restarts in place are removed
// (restartall.go), after this status is written: again, the pod is synced
// again at once.
func (k *Kubelet) status(pod *corev1.Pod, r *podRuntime, n *node, now time.Time) (status corev1.PodStatus, again bool) {
	k.terminationMessages(pod, r)
	status = podStatus(pod, r, n.internalIP(), now)
	if r.restartingAll { // this status shows the containers removed: the next sync starts them
		r.restartedAll()
		return status, true
	}
	ended := phaseOver(status.Phase) || status.Phase == corev1.PodRunning && r.mainOver(pod)
	if ended && r.stopping.IsZero() && !r.killing && !r.stopped() && !r.postStarting(now) { // a hook holds the sync
		after, code := k.outcomes.stopRule(pod)
		r.killPod(now, after, code, podGrace(pod))
		k.startHooks(pod, r)
		return status, true
	}
	if r.resetDue(now, status.Phase) {
		r.resetAll(status, now)
		return status, true
	}
	return status, false
}

// end marks r over once its phase ended and nothing runs (its address and
// room on the node given back, a passed deadline's last events added to
// w), gives the status of a pod the kubelet is
// done with TerminatePod's touches, and says to remove a deleted pod whose
// containers all stopped.
func (k *Kubelet) end(pod *corev1.Pod, r *podRuntime, n *node, w *podWork) {
	if over := phaseOver(w.status.Phase) && r.stopped(); over && !r.over {
		r.over = true
		if r.pastDeadline {
			w.deadline = append(w.deadline, deadlineExceeded(deadlineEventsAfterKill)...)
		}
		r.endBackOffs()
		k.releaseIPLocked(r)               // the sandbox is gone; the status keeps the address
		k.retryDeferredLocked(n.spec.Name) // it leaves room on the node
	}
	if r.over || !r.stopping.IsZero() && r.stopped() {
		terminate(pod, &w.status)
	}
	if !r.stopping.IsZero() && r.stopped() {
		r.deleted, w.remove = true, true
	}
}

// releaseIPLocked gives r's sandbox address back to its node's pool, once
// (the node's own address of a host network pod is not the pool's). Called
// with k.mu held.
func (k *Kubelet) releaseIPLocked(r *podRuntime) {
	n := k.simulated[r.node]
	if r.ipReleased || r.ip == "" || n == nil {
		return
	}
	if r.ip != n.internalIP() {
		n.ipam.release(r.ip)
	}
	r.ipReleased = true
}

// podIP is a new address for pod's sandbox: the node's for host network
// pods.
func (k *Kubelet) podIP(pod *corev1.Pod, n *node) string {
	if pod.Spec.HostNetwork {
		return n.internalIP()
	}
	return n.ipam.allocate()
}

// takeEvents returns the events the containers recorded since last asked,
// in the order they happened.
func (r *podRuntime) takeEvents() []containerEvent {
	var out []containerEvent
	for _, c := range r.all() {
		for _, e := range c.events {
			out = append(out, containerEvent{c, e})
		}
		c.events = nil
	}
	slices.SortFunc(out, func(a, b containerEvent) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// forget drops the runtime of the pod at key: it is gone.
func (k *Kubelet) forget(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.forgetLocked(key, "")
}

// forgetLocked drops the runtime of the pod at key unless it is keep's,
// with k.mu held.
func (k *Kubelet) forgetLocked(key string, keep types.UID) {
	uid, ok := k.keys[key]
	if !ok || uid == keep {
		return
	}
	gone := k.running[uid]
	if gone != nil {
		k.releaseIPLocked(gone)
		gone.stopHooks()
	}
	delete(k.running, uid)
	delete(k.keys, key)
	if t := k.timers[key]; t != nil {
		t.Stop()
		delete(k.timers, key)
	}
	if gone != nil {
		k.retryDeferredLocked(gone.node)
	}
}

// statusBase is the pod whose status the kubelet's next patch is computed
// against: the informer's copy, or the server's answer to the kubelet's
// last patch when the informer has not shown it yet. Against the informer's
// copy alone, a patch made after another writer's (an adoption) but before
// the informer showed the kubelet's own last one would diff against a
// status without it, and leave its condition reasons behind (the real
// kubelet diffs against the pod it reads from the API server).
func (k *Kubelet) statusBase(pod *corev1.Pod) *corev1.Pod {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.running[pod.UID].lastStatus(pod)
}

// lastStatus is the newer of pod, the informer's copy, and the server's
// answer to the kubelet's last status patch of it. Called with k.mu held.
func (r *podRuntime) lastStatus(pod *corev1.Pod) *corev1.Pod {
	if r == nil || r.reported == nil {
		return pod
	}
	seen, err1 := strconv.ParseUint(pod.ResourceVersion, 10, 64)
	reported, err2 := strconv.ParseUint(r.reported.ResourceVersion, 10, 64)
	if err1 != nil || err2 != nil || seen >= reported {
		return pod
	}
	return r.reported
}

// keepReported keeps the server's answer to a status patch of the kubelet.
func (k *Kubelet) keepReported(pod *corev1.Pod) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if r := k.running[pod.UID]; r != nil {
		r.reported = pod
	}
}

// patchStatus writes status over pod's, as the kubelet's status manager
// does: a strategic merge patch, with the pod's UID as its precondition;
// nothing when the status is unchanged. Most syncs (the echo of the
// kubelet's own write among them) change nothing: an identical status is
// told before any patch is computed (reflect.DeepEqual only says equal
// where their JSON is too).
func (k *Kubelet) patchStatus(ctx context.Context, pod *corev1.Pod, status corev1.PodStatus) error {
	patched, err := controller.PatchPodStatus(ctx, k.client, pod, status)
	if patched != nil {
		k.keepReported(patched)
	}
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or another pod of that name: its own sync follows
	}
	return err
}

// deletePod deletes a pod whose containers stopped, as the kubelet does
// once its final status is written: grace period 0, the pod's UID a
// precondition.
func (k *Kubelet) deletePod(ctx context.Context, pod *corev1.Pod) error {
	err := k.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// record records the containers' events and the pod's, as the kubelet of
// the node (the pod's name the pod it read, with no field).
func (k *Kubelet) record(pod *corev1.Pod, nodeName string, w podWork) {
	if len(w.events) == 0 && len(w.podEvents) == 0 && len(w.deadline) == 0 {
		return
	}
	rec := k.recorder(nodeName)
	podRef := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, ResourceVersion: w.version}
	for _, e := range w.deadline {
		rec.Event(podRef, e.kind, e.reason, e.message)
	}
	defer func() { // after the containers' (a restart's events before ResizeCompleted)
		for _, e := range w.podEvents {
			rec.Event(podRef, e.kind, e.reason, e.message)
		}
	}()
	for _, e := range w.events {
		field := "spec.containers{" + e.container.spec.Name + "}"
		switch {
		case e.container.init:
			field = "spec.initContainers{" + e.container.spec.Name + "}"
		case e.container.ephemeral:
			field = "spec.ephemeralContainers{" + e.container.spec.Name + "}"
		}
		ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name,
			UID: pod.UID, ResourceVersion: w.version, FieldPath: field}
		rec.Event(ref, e.kind, e.reason, e.message)
	}
}

// requeueAt syncs key again at t on the kubelet's clock (a fake clock's
// timers fire only when it is stepped: what is due now is queued now).
func (k *Kubelet) requeueAt(key string, t time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if old := k.timers[key]; old != nil {
		old.Stop()
		delete(k.timers, key)
	}
	d := t.Sub(k.clock.Now())
	if d <= 0 {
		k.podQueue.Add(key)
		return
	}
	k.timers[key] = k.clock.AfterFunc(d, func() { k.podQueue.Add(key) })
}

// requeuePods syncs every pod of the node again.
func (k *Kubelet) requeuePods(nodeName string) {
	pods, err := k.pods.List(labels.Everything())
	if err != nil {
		return
	}
	for _, p := range pods {
		if p.Spec.NodeName == nodeName {
			k.podQueue.Add(p.Namespace + "/" + p.Name)
		}
	}
}

// stopTimers stops every pending requeue and the heartbeat (Run ends).
func (k *Kubelet) stopTimers() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.nextBeat != nil {
		k.nextBeat.Stop()
	}
	for key, t := range k.timers {
		t.Stop()
		delete(k.timers, key)
	}
}
