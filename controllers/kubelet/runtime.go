package kubelet

// The simulated container runtime: what runs in a pod, advanced to "now"
// at each sync. Nothing here writes to the API; status.go turns it into a
// pod status, pods.go writes it.

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The kubelet's crash back-off: the first restart is at once, then 10 s,
// doubling up to 5 minutes; a container that ran for 10 minutes starts
// over (kubelet.go's backOffPeriod, MaxContainerBackOff).
const (
	backOffInitial = 10 * time.Second
	backOffMax     = 300 * time.Second
	backOffReset   = 2 * backOffMax
)

// podRuntime is a pod as the simulated runtime runs it.
type podRuntime struct {
	uid  types.UID
	node string
	ip   string
	// version is the pod's resourceVersion when the kubelet admitted it.
	version string
	// admitted: its first status (admission: no sandbox yet) was
	// computed; sandbox: its sandbox runs.
	admitted, sandbox bool
	startTime         time.Time
	init              []*container
	main              []*container
	// ephemeral are the ephemeral containers (kubectl debug), in the
	// order they were added; each runs once and never restarts.
	ephemeral []*container
	// initFailed: a regular init container failed and may not restart.
	initFailed bool
	// stopping is when the pod's deletion was seen (its containers were
	// SIGTERMed: orderStops).
	stopping time.Time
	// stops is the kill ordered last (orderStops), ordered again as
	// preStop hooks end.
	stops stopOrder
	// deleted: the kubelet deleted the pod (grace 0) after its final
	// status.
	deleted bool
	// reported is the server's answer to the kubelet's last status patch
	// (statusBase).
	reported *corev1.Pod
	// inProgress is the condition of a resize allocated and not yet
	// actuated; pending, of one the node cannot take yet (resize.go).
	inProgress, pending *corev1.PodCondition
	// over: its phase ended and nothing runs; it takes no room on the node.
	// ipReleased: its sandbox's address went back to the node's pool.
	// pastDeadline: it outlived its activeDeadlineSeconds (deadline.go).
	over, ipReleased, pastDeadline bool
	// killing: it ended without a deletion and what ran in it is being
	// stopped (killPod): nothing starts again.
	killing bool
	// initialized: a status of the pod said Initialized True (it stays).
	initialized bool
	// restartingAll: its init and regular containers were removed to
	// restart it in place, and no status has shown them removed yet
	// (restartall.go).
	restartingAll bool
	// resetAt is when its containers were last removed so.
	resetAt time.Time
	// rejection, when set, is why the kubelet rejected the pod at
	// admission (admit.go): it never ran.
	rejection *rejection
	// mountFailures are the failed tries to set up its volumes, the next
	// at mountRetryAt (configrefs.go); podEvents are the kubelet's events
	// about the pod, to be recorded by the writer of the next status.
	mountFailures int
	mountRetryAt  time.Time
	podEvents     []event
	// overhead and podResources are the pod's spec.overhead and
	// spec.resources as admitted (podResources: as allocated, after a
	// resize): what it holds of the node beside its containers' requests.
	// podActuated are the pod-level resources its cgroup applies; nil
	// when it has none (resize.go).
	overhead     corev1.ResourceList
	podResources *corev1.ResourceRequirements
	podActuated  *corev1.ResourceRequirements
}

// container is one container of a pod: its current instance and the
// previous one.
type container struct {
	spec *corev1.Container
	// init: an init container; sidecar: one with restartPolicy Always;
	// ephemeral: an ephemeral container.
	init, sidecar, ephemeral bool
	// added: an ephemeral container whose waiting status is not reported
	// yet (the kubelet reports the status it read before it starts one).
	added bool
	// allocated are the resources the kubelet admitted it with (its
	// allocation checkpoint), actuated those its runtime applied; they
	// differ while a resize is in progress, whose actuation restarts it
	// if restartOnResize.
	allocated, actuated corev1.ResourceRequirements
	restartOnResize     bool
	// instance is the current run: zero before the first start.
	instance run
	last     *run
	restarts int32
	// backOff is the next crash's wait; wait the current one's, which
	// CrashLoopBackOff's message names.
	backOff, wait time.Duration
	// restartAt, when not zero, is when a crashed container may start
	// again (CrashLoopBackOff until then).
	restartAt time.Time
	// endedInBackOff: the pod ended (not deleted) while the container
	// waited out its back-off; the kubelet's last status shows it waiting,
	// and TerminatePod ends it (terminate).
	endedInBackOff bool
	// exitAt, exitAs: the current instance exits then, so (zero: runs
	// on).
	exitAt time.Time
	exitAs Exit
	// exitUnseen: the instance exited and no status showing it ended is
	// computed yet. The kubelet's sync that sees an exit writes the
	// container terminated (not ready) before it restarts it.
	exitUnseen bool
	// probeKilled: the instance was killed by a failing probe, and is
	// restarted in the sync that killed it (restartAfterKill).
	probeKilled bool
	// readyAt and startedAt are when its readiness and startup probes
	// first pass; ready, when set, is the test's readiness result.
	readyAt, startupAt time.Time
	ready              *bool
	// failingLive, failingStartup: the test fails its liveness or
	// startup probe (SetLive, SetStarted; probes.go). A failing startup
	// probe holds startupAt zero: not started.
	failingLive, failingStartup failingProbe
	// events are to be recorded by the writer of the next status, each
	// stamped with its place among all the pod's (record).
	events []stampedEvent
	// waiting, when set, is why the container could not be created (its
	// image, its configuration); createRetryAt when it is tried again.
	waiting       *corev1.ContainerStateWaiting
	createRetryAt time.Time
	// pullBackOff, pullUpdate and pullErr are the image manager's back-off
	// for the container's image after a failed pull (images.go).
	pullBackOff time.Duration
	pullUpdate  time.Time
	pullErr     string
	// preStop is its preStop hook's run, once the kubelet began to kill
	// it; postStart the postStart hook's of the instance it starts, until
	// it has run (hooks.go); hookError the message of a postStart hook
	// that failed, until the container starts again.
	preStop, postStart *hook
	hookError          string
	// waitedBackOff: the instance starting waited out a back-off, which
	// its status shows until it runs (CrashLoopBackOff, the kubelet's
	// reason cache).
	waitedBackOff bool
	// shownRemoved is its status once the pod's restart in place removed
	// it, until a status has shown it; recount: removed as it waited to
	// restart, its next start counts as a restart (restartall.go).
	shownRemoved *corev1.ContainerStatus
	recount      bool
}

// run is a container instance: running when finished is zero.
type run struct {
	id                string
	started, finished time.Time
	exitCode          int32
	reason, message   string
	// messageRead: its termination message was read (termination.go).
	messageRead bool
}

func (r run) running() bool    { return !r.started.IsZero() && r.finished.IsZero() }
func (r run) terminated() bool { return !r.finished.IsZero() }

// event is a kubelet event about a container.
type event struct {
	kind, reason, message string
}

// stampedEvent is a container's event and when it happened among all
// others (eventSeq): the pod's events are recorded in that order, as the
// kubelet's actions made them, whichever containers they are about.
type stampedEvent struct {
	event
	seq uint64
}

var eventSeq atomic.Uint64

// stamp gives e its place among all events now.
func stamp(e event) stampedEvent { return stampedEvent{e, eventSeq.Add(1)} }

// record adds the kubelet's events about the container, in order.
func (c *container) record(events ...event) {
	for _, e := range events {
		c.events = append(c.events, stamp(e))
	}
}

func newContainerID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newRuntime is the runtime of pod, just admitted on node.
func newRuntime(pod *corev1.Pod, node, ip string, now time.Time) *podRuntime {
	r := &podRuntime{uid: pod.UID, node: node, ip: ip, startTime: now, version: pod.ResourceVersion,
		overhead: pod.Spec.Overhead, podResources: pod.Spec.Resources, podActuated: actuatedPodLevel(pod.Spec.Resources)}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		r.init = append(r.init, newContainer(c, true, isSidecar(*c)))
	}
	for i := range pod.Spec.Containers {
		r.main = append(r.main, newContainer(&pod.Spec.Containers[i], false, false))
	}
	return r
}

// newContainer is a container of spec, allocated the resources it asks.
func newContainer(spec *corev1.Container, init, sidecar bool) *container {
	c := &container{spec: spec, init: init, sidecar: sidecar, allocated: *spec.Resources.DeepCopy()}
	c.actuated = *c.allocated.DeepCopy()
	return c
}

// all are the pod's containers: init, regular, then ephemeral.
func (r *podRuntime) all() []*container {
	out := make([]*container, 0, len(r.init)+len(r.main)+len(r.ephemeral))
	return append(append(append(out, r.init...), r.main...), r.ephemeral...)
}

// addEphemeral adds the ephemeral containers of pod the runtime does not
// have yet (they can only be added, never changed or removed).
func (r *podRuntime) addEphemeral(pod *corev1.Pod) {
	for i := len(r.ephemeral); i < len(pod.Spec.EphemeralContainers); i++ {
		spec := (*corev1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		c := newContainer(spec, false, false)
		c.ephemeral, c.added = true, true
		r.ephemeral = append(r.ephemeral, c)
	}
}

// reportedAdded marks the ephemeral containers just added as reported
// waiting, and tells whether there were any: they start at the next sync.
func (r *podRuntime) reportedAdded() bool {
	var any bool
	for _, c := range r.ephemeral {
		any = any || c.added
		c.added = false
	}
	return any
}

// advance runs the pod's containers up to now: init containers in order,
// then the others; exits, restarts and back-offs that are due happen.
func (r *podRuntime) advance(pod *corev1.Pod, now time.Time, plans planner) {
	if !r.sandbox {
		return // admitted: the sandbox starts at the next sync
	}
	if !r.stopping.IsZero() || r.killing {
		r.stopsDue(now)
		return
	}
	if r.over || r.pastDeadline {
		return // its containers were (are being) killed as it ended: none starts again
	}
	for range 64 { // each round changes something or ends the loop
		if !r.step(pod, now, plans) {
			return
		}
	}
}

// step makes the first change due, and reports whether it made one.
func (r *podRuntime) step(pod *corev1.Pod, now time.Time, plans planner) bool {
	if r.initFailed || r.postStarting(now) {
		return false // a postStart hook runs: the kubelet's sync waits for it
	}
	if r.endPostStarts(pod, now, plans) {
		return true
	}
	if r.resetHolds() {
		return false // the status is written, then the pod's containers are removed (restartall.go)
	}
	// The kills of failed probes come before any start (SyncPod kills,
	// then starts).
	for _, c := range slices.Concat(r.init, r.main) {
		if c.postStart == nil && c.probeFailures(pod, now, plans) {
			return true
		}
	}
	// Ephemeral containers start before init containers, even when those
	// fail (computePodActions), unless the pod is over; they never restart.
	for _, c := range r.ephemeral {
		if !c.added && !(c.instance.started.IsZero() && terminal(pod)) && c.advance(now, false, plans, pod) {
			return true
		}
	}
	// An init container starts once the one before it has done its part
	// (a regular one exited 0, a sidecar started); one started goes on
	// whatever those before it do. The regular containers start once the
	// last has, and go on once one of them has started: the pod has
	// initialized, a sidecar's restarts hold nothing back
	// (computeInitContainerActions).
	done := true
	for _, c := range r.init {
		if !done && c.instance.started.IsZero() {
			break
		}
		if changed := c.advance(now, restartable(pod, c, c.instance.exitCode), plans, pod); changed {
			if c.failedForGood(pod) {
				r.initFailed = true
			}
			return true
		}
		done = c.sidecar && c.started(now) || !c.sidecar && c.succeeded()
	}
	if !done && !r.mainStarted() {
		return false
	}
	for _, c := range r.main {
		if c.advance(now, restartable(pod, c, c.instance.exitCode), plans, pod) {
			return true
		}
	}
	return false
}

// exitDue makes the first container exit that is due of a pod whose
// containers are being stopped, and reports whether there was one (no
// restart follows it).
func (r *podRuntime) exitDue(now time.Time) bool {
	for _, c := range r.all() {
		if c.exitDue(now) {
			c.exitUnseen = false
			return true
		}
	}
	return false
}

// mainStarted: a regular container has started once (the pod has
// initialized: HasAnyActiveRegularContainerStarted).
func (r *podRuntime) mainStarted() bool {
	return slices.ContainsFunc(r.main, func(c *container) bool { return !c.instance.started.IsZero() })
}

// terminal: the pod's phase is Succeeded or Failed, as written.
func terminal(pod *corev1.Pod) bool { return phaseOver(pod.Status.Phase) }

func phaseOver(p corev1.PodPhase) bool { return p == corev1.PodSucceeded || p == corev1.PodFailed }

// advance makes the container's next change if it is due: its first start,
// its exit, its restart after back-off.
func (c *container) advance(now time.Time, restart bool, plans planner, pod *corev1.Pod) bool {
	switch {
	case c.postStart != nil:
		return false // starting: its postStart hook runs
	case c.instance.started.IsZero():
		return c.create(now, plans, pod)
	case c.exitDue(now):
		return true
	case c.instance.terminated() && restart && c.restartAt.IsZero() && !c.exitUnseen:
		c.scheduleRestart(pod)
		return true
	case c.instance.terminated() && restart && !c.restartAt.IsZero() && !now.Before(c.restartAt):
		c.waitedBackOff = c.restartAt.After(c.instance.finished) // shown while a postStart hook runs
		c.restartAt = time.Time{}
		c.start(now, plans, pod)
		return true
	}
	return false
}

// exitDue ends the running instance if its exit is due, and reports
// whether it did.
func (c *container) exitDue(now time.Time) bool {
	if !c.instance.running() || c.exitAt.IsZero() || now.Before(c.exitAt) {
		return false
	}
	c.exit(c.exitAt, c.exitAs)
	c.exitUnseen = true
	return true
}

// create creates and starts the container, unless its image cannot be
// pulled (images.go) or its configuration made (configrefs.go): then it
// waits, with the kubelet's events, and is tried again after the pod
// worker's back-off. It reports whether it changed anything.
func (c *container) create(now time.Time, plans planner, pod *corev1.Pod) bool {
	if now.Before(c.createRetryAt) {
		return false
	}
	waiting, events := plans.pull(c, now)
	if waiting == nil {
		if msg := plans.configError(pod, c); msg != "" {
			waiting = &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: msg}
			events = append(pullEvents(c.spec), event{corev1.EventTypeWarning, "Failed", "Error: " + msg})
		}
	}
	if waiting != nil {
		// The first retry is the sync the runtime's relist (PLEG, every
		// second) makes on seeing the sandbox just started; later ones
		// come on the pod worker's back-off.
		retry := workerBackOff
		if c.waiting == nil {
			retry = plegRelist
		}
		c.waiting, c.createRetryAt = waiting, now.Add(retry)
		c.record(events...)
		return true
	}
	c.waiting, c.createRetryAt = nil, time.Time{}
	c.start(now, plans, pod)
	return true
}

// start starts a new instance of the container, with the kubelet's
// events; one with a postStart hook is the container's instance once the
// hook has run (hooks.go: the kubelet's sync waits for it).
func (c *container) start(now time.Time, plans planner, pod *corev1.Pod) {
	c.record(pullEvents(c.spec)...)
	c.record(event{corev1.EventTypeNormal, "Created", "Container created"},
		event{corev1.EventTypeNormal, "Started", "Container started"})
	if lc := c.spec.Lifecycle; lc != nil && lc.PostStart != nil {
		c.postStart = beginHook(now, lc.PostStart)
		return
	}
	c.run(now, now, plans, pod)
}

// run makes the instance started at started the container's (the one
// before it its last), with the test's plan for it. Its probes count their
// delays from its start, and begin once the kubelet has seen it running
// at seen (after its postStart hook).
func (c *container) run(started, seen time.Time, plans planner, pod *corev1.Pod) {
	if !c.instance.started.IsZero() {
		previous := c.instance
		c.last = &previous
		c.restarts++
	} else if c.recount {
		c.restarts++
	}
	c.hookError, c.waitedBackOff, c.recount = "", false, false
	c.instance = run{id: newContainerID(), started: started}
	c.exitAt, c.exitAs = time.Time{}, Exit{}
	if plan, ok := plans.plan(pod, c); ok {
		c.exitAt, c.exitAs = started.Add(plan.After), plan
	}
	c.readyAt, c.startupAt = seen, seen
	if p := c.spec.ReadinessProbe; p != nil {
		c.readyAt = later(seen, started.Add(seconds(p.InitialDelaySeconds)))
	}
	if p := c.spec.StartupProbe; p != nil {
		c.startupAt = later(seen, started.Add(seconds(p.InitialDelaySeconds)))
	}
	c.startProbes(started, seen)
}

// pullEvents are the image manager's events for a container's start: a
// pull for policy Always, the image already present otherwise (the
// simulated node has every image).
func pullEvents(spec *corev1.Container) []event {
	if spec.ImagePullPolicy != corev1.PullAlways {
		return []event{{corev1.EventTypeNormal, "Pulled",
			fmt.Sprintf("Container image %q already present on machine and can be accessed by the pod", spec.Image)}}
	}
	return []event{
		{corev1.EventTypeNormal, "Pulling", fmt.Sprintf("Pulling image %q", spec.Image)},
		{corev1.EventTypeNormal, "Pulled", fmt.Sprintf("Successfully pulled image %q in 0s (0s including waiting). Image size: 0 bytes.", spec.Image)},
	}
}

// exit ends the running instance at t as e says, as the runtime reports
// it: by default reason Completed for code 0, Error otherwise; the
// termination message as much of e's as the kubelet reads.
func (c *container) exit(t time.Time, e Exit) {
	i := &c.instance
	i.finished, i.exitCode, i.reason, i.message = t, e.Code, e.Reason, e.Message
	switch {
	case i.reason != "":
	case e.Code == 0:
		i.reason = "Completed"
	default:
		i.reason = "Error"
	}
	if len(i.message) > maxTerminationMessage { // tail.ReadAtMost: the end of the file
		i.message = i.message[len(i.message)-maxTerminationMessage:]
	}
	c.exitAt = time.Time{}
}

// scheduleRestart sets when the crashed container starts again: at once
// the first time, then after the kubelet's doubling back-off, counted from
// its exit.
func (c *container) scheduleRestart(pod *corev1.Pod) {
	if c.probeKilled {
		c.probeKilled = false
		c.restartAfterKill(pod)
		return
	}
	ran := c.instance.finished.Sub(c.instance.started)
	if c.backOff == 0 || ran >= backOffReset {
		c.backOff = backOffInitial
		c.restartAt = c.instance.finished
		return
	}
	c.waitBackOff(pod)
}

// waitBackOff makes the container wait its back-off from its exit
// (CrashLoopBackOff, the BackOff event), the next one doubled.
func (c *container) waitBackOff(pod *corev1.Pod) {
	c.wait = c.backOff
	c.restartAt = c.instance.finished.Add(c.wait)
	c.record(event{corev1.EventTypeWarning, "BackOff",
		fmt.Sprintf("Back-off restarting failed container %s in pod %s", c.spec.Name, podDesc(pod))})
	c.backOff = min(2*c.backOff, backOffMax)
}

// restartAfterKill sets when a container a probe killed starts again. The
// kubelet kills and restarts it in one sync, whose back-off reads the
// status from before the kill (kuberuntime's doBackOff): the instance
// before, if any. None: at once, the back-off untouched; one that ended
// at least the back-off before this one did: at once, the back-off grown
// (from the second kill); else it waits the back-off from the kill.
func (c *container) restartAfterKill(pod *corev1.Pod) {
	c.restartAt = c.instance.finished
	prev := c.last
	switch {
	case prev == nil:
	case c.backOff == 0 || c.instance.finished.Sub(c.instance.started) >= backOffReset:
		c.backOff = backOffInitial
	case c.instance.finished.Sub(prev.finished) >= c.backOff:
		c.backOff = min(2*c.backOff, backOffMax)
	default:
		c.waitBackOff(pod)
	}
}

// exitsSeen marks the exits of the status just computed as seen, and
// tells whether one of those containers is to restart: at the next sync.
func (r *podRuntime) exitsSeen(pod *corev1.Pod) bool {
	var restart bool
	for _, c := range r.all() {
		if c.exitUnseen {
			c.exitUnseen = false
			restart = restart || restartable(pod, c, c.instance.exitCode)
		}
	}
	return restart
}

// podDesc is a pod as the kubelet's messages name it: name_namespace(uid).
func podDesc(pod *corev1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

// succeeded: the container's last instance exited 0 (an init container is
// done).
func (c *container) succeeded() bool {
	return c.instance.terminated() && c.instance.exitCode == 0
}

// started: running and past its startup probe.
func (c *container) started(now time.Time) bool {
	return c.instance.running() && !c.startupAt.IsZero() && !now.Before(c.startupAt)
}

// isReady: running, started, and its readiness probe passes (or the test's
// result says so).
func (c *container) isReady(now time.Time) bool {
	if !c.started(now) {
		return false
	}
	if c.ready != nil {
		return *c.ready
	}
	return !now.Before(c.readyAt)
}

// failedForGood: a regular init container failed and the pod does not
// restart it.
func (c *container) failedForGood(pod *corev1.Pod) bool {
	return !c.sidecar && c.instance.terminated() && c.instance.exitCode != 0 && !restartable(pod, c, c.instance.exitCode)
}

// restartable: the container restarts after it exits with code, by its own
// restart policy or the pod's (Always; OnFailure for a failure; regular
// init containers follow OnFailure unless the pod's is Never).
func restartable(pod *corev1.Pod, c *container, code int32) bool {
	if p := c.spec.RestartPolicy; p != nil {
		if restartRule(c.spec, code) {
			return true
		}
		switch *p {
		case corev1.ContainerRestartPolicyAlways:
			return true
		case corev1.ContainerRestartPolicyOnFailure:
			return code != 0
		case corev1.ContainerRestartPolicyNever:
			return false
		}
	}
	policy := pod.Spec.RestartPolicy
	if c.init && !c.sidecar && policy == corev1.RestartPolicyAlways {
		policy = corev1.RestartPolicyOnFailure
	}
	switch policy {
	case corev1.RestartPolicyAlways:
		return true
	case corev1.RestartPolicyOnFailure:
		return code != 0
	}
	return false
}

// restartRule: the first of the container's restartPolicyRules whose exit
// codes match code says to restart it, alone or with the whole pod
// (ContainerShouldRestart).
func restartRule(spec *corev1.Container, code int32) bool {
	rule, ok := matchingRule(spec, code)
	return ok && (rule.Action == corev1.ContainerRestartRuleActionRestart || rule.Action == corev1.ContainerRestartRuleActionRestartAllContainers)
}

// startStopping begins stopping the deleted pod's containers at now
// (orderStops), none to restart: the kubelet records Killing for each as
// it begins, before the containers end.
func (r *podRuntime) startStopping(now time.Time, after time.Duration, code int32, grace time.Duration) {
	r.stopping = now
	if !r.killing { // otherwise the kill under way goes on: no second Killing
		r.announceKill()
	}
	for _, c := range r.all() {
		c.restartAt, c.hookError = time.Time{}, ""
		c.endedInBackOff = c.endedInBackOff && r.over // deleted: it would not restart (ShouldContainerBeRestarted)
	}
	r.beginPreStops(now, grace)
	r.orderStops(now, after, code, grace)
}

// stopOrder is a kill's start, how long its containers take to stop once
// signalled and their exit code, and its grace period.
type stopOrder struct {
	from  time.Time
	after time.Duration
	code  int32
	grace time.Duration
}

// reorderStops orders the last kill's stops again: a preStop hook ended.
func (r *podRuntime) reorderStops() {
	if o := r.stops; !o.from.IsZero() {
		r.orderStops(o.from, o.after, o.code, o.grace)
	}
}

// orderStops sets when each running container ends, killed from now
// with grace (kuberuntime_termination_order.go, killContainer): its
// preStop hook first (hooks.go), then the SIGTERM: the regular and
// ephemeral ones after after with code, or 137 once their
// grace (at least 2 s) is over, so too a running init container that is
// not a sidecar; then the sidecars, the last first, each
// once every regular container and the sidecar after it (if that one
// runs) have stopped, but waiting no longer than grace, with what remains
// of it in whole seconds (at least 2 s). The hook and the wait each use
// up the grace period by their whole seconds. A container due to end
// sooner by itself does.
func (r *podRuntime) orderStops(now time.Time, after time.Duration, code int32, grace time.Duration) {
	grace = max(grace, time.Second) // the pod worker's least (calculateEffectiveGracePeriod)
	r.stops = stopOrder{from: now, after: after, code: code, grace: grace}
	end := func(c *container, turn time.Time) time.Time {
		hooked, left := now, grace
		if h := c.preStop; h != nil {
			hooked = h.over()
			left -= hooked.Sub(h.start).Truncate(time.Second)
		}
		sent := later(hooked, earlier(turn, hooked.Add(max(left, 0))))
		left = max(left-sent.Sub(hooked).Truncate(time.Second), minimumGrace)
		at, exit := sent.Add(after), Exit{Code: code}
		if after > left {
			at, exit = sent.Add(left), Exit{Code: sigkillExitCode}
		}
		if c.exitAt.IsZero() || at.Before(c.exitAt) {
			c.exitAt, c.exitAs = at, exit
		}
		return c.exitAt
	}
	mainsEnd := now // every regular container stopped (not the ephemeral ones)
	for _, c := range r.main {
		if c.instance.running() {
			mainsEnd = later(mainsEnd, end(c, now))
		}
	}
	for _, c := range slices.Concat(r.ephemeral, r.init) { // a running init container waits for nothing
		if c.instance.running() && !c.sidecar {
			end(c, now)
		}
	}
	turn := mainsEnd
	for _, c := range slices.Backward(r.init) {
		switch {
		case c.sidecar && c.instance.running():
			turn = end(c, turn)
		case c.sidecar:
			turn = mainsEnd // the next waits for no sidecar
		}
	}
}

// stopsDue ends the containers of a pod being stopped once the last of
// them is due, each at its own time: the kubelet, blocked in its kill
// until every container has stopped, writes the pod's status before and
// after it, not between.
func (r *podRuntime) stopsDue(now time.Time) {
	for _, c := range r.all() {
		if c.instance.running() && (c.exitAt.IsZero() || now.Before(c.exitAt)) {
			return
		}
	}
	for r.exitDue(now) {
	}
	r.stopHooks()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// mainOver: every regular container has ended and none will restart
// (computePodActions' keepCount 0 with nothing to start).
func (r *podRuntime) mainOver(pod *corev1.Pod) bool {
	return !slices.ContainsFunc(r.main, func(c *container) bool {
		return !c.instance.terminated() || restartable(pod, c, c.instance.exitCode)
	})
}

// killPod stops what runs of a pod that ended without a deletion (its
// regular containers all ended for good while its sidecars run, or its
// phase is over: past its active deadline, an init container failed for
// good): Killing for each at once, then in order with the pod's grace
// period (orderStops), as SyncPod's or SyncTerminatingPod's killPod;
// nothing starts again.
func (r *podRuntime) killPod(now time.Time, after time.Duration, code int32, grace time.Duration) {
	r.killing = true
	r.announceKill()
	r.endBackOffs()
	r.beginPreStops(now, grace)
	r.orderStops(now, after, code, grace)
}

// endBackOffs marks the containers waiting out a back-off as the pod ends
// without a deletion: the kubelet would still restart them
// (ShouldContainerBeRestarted), so its last status shows them waiting.
func (r *podRuntime) endBackOffs() {
	for _, c := range r.all() {
		if !c.restartAt.IsZero() {
			c.endedInBackOff, c.restartAt = true, time.Time{}
		}
	}
}

func (r *podRuntime) announceKill() {
	for _, c := range r.all() {
		if c.instance.running() {
			c.record(event{corev1.EventTypeNormal, "Killing", "Stopping container " + c.spec.Name})
		}
	}
}

// stopped: nothing runs any more (a container whose postStart hook runs
// does, though it is not reported running yet).
func (r *podRuntime) stopped() bool {
	for _, c := range r.all() {
		if c.instance.running() || c.postStart != nil {
			return false
		}
	}
	return true
}

// next is the earliest instant after now at which something is due: an
// exit, a restart, a probe passing, the containers stopping, pod's active
// deadline.
func (r *podRuntime) next(pod *corev1.Pod, now time.Time) time.Time {
	var next time.Time
	consider := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if !r.pastDeadline {
		consider(r.deadline(pod))
	}
	if !r.sandbox {
		consider(r.mountRetryAt)
	}
	if r.restartAllDue() {
		consider(r.nextReset())
	}
	for _, c := range r.all() {
		if c.postStart != nil {
			consider(c.postStart.end)
		}
		consider(c.exitAt)
		consider(c.restartAt)
		consider(c.createRetryAt)
		consider(c.nextProbe(now))
		if c.instance.running() {
			consider(c.readyAt)
			consider(c.startupAt)
		}
	}
	return next
}
