package kubelet

// What happens to containers is the test's to say: rules for containers as
// they start (a Job's pods succeed after a second), and calls for
// containers that run (this one exits 3 now, that one is not ready).

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Rule says what the containers of matching pods do: how each of their
// instances ends (Exit), how long they take to stop once the pod is deleted
// and how they exit then (StopAfter, StopExitCode). Without a rule a
// container runs until its pod is deleted and then stops at once with exit
// code 143, as a process ended by SIGTERM, and an init container completes
// (exit 0) at once.
type Rule struct {
	// Namespace, Selector and OwnerKind select the pods (all three when
	// set): a namespace, a label selector, the kind of the pod's
	// controller (its ownerReference with controller: true, such as
	// "Job").
	Namespace string
	Selector  labels.Selector
	OwnerKind string
	// Container, when set, is the one container of the pod the rule is
	// for; otherwise every regular (not init) container.
	Container string
	// Exit, when set, ends each instance of the containers (a restarted
	// container exits again).
	Exit *Exit
	// StopAfter is how long the containers take to stop once the kubelet
	// stops them, as the pod is deleted or ends with something running
	// (past its active deadline, its sidecars once its regular containers
	// ended): a process slow to handle SIGTERM. Default 0: at once, so a
	// deleted pod is gone within milliseconds, Terminating only briefly.
	// Past the pod's grace period (terminationGracePeriodSeconds, or the
	// deletion's; at least 2 s, as the kubelet gives), the runtime kills
	// them with SIGKILL then: exit code 137, whatever StopExitCode says.
	StopAfter time.Duration
	// StopExitCode, when set, is the exit code of the containers the
	// kubelet stops. Default 143: a process ended by the SIGTERM
	// the kubelet sends, as one that does not handle it ends (the pod
	// ends Failed, and a Job counts it failed); 0 for a process that
	// exits cleanly on SIGTERM (the pod ends Succeeded).
	StopExitCode *int32
}

// sigtermExitCode is how a process that the SIGTERM a kubelet sends on
// deletion ends exits: 128 + 15; sigkillExitCode one still running when
// the grace period is over: 128 + 9.
const (
	sigtermExitCode = 143
	sigkillExitCode = 137
)

// minimumGrace is the least grace period the kubelet gives a container it
// stops (kuberuntime's minimumGracePeriodInSeconds).
const minimumGrace = 2 * time.Second

// Exit is how a container's instance ends: with Code, After it started.
type Exit struct {
	Code  int32
	After time.Duration
	// Reason is the runtime's reason for the end: by default Completed for
	// code 0, Error otherwise; OOMKilled for a container killed for its
	// memory (code 137).
	Reason string
	// Message is what the process wrote to its terminationMessagePath
	// (at most 4,096 bytes are read), the status's terminated message.
	// Without one, a container whose terminationMessagePolicy is
	// FallbackToLogsOnError and that failed has the end of its log (80
	// lines, at most 2,048 bytes), as the kubelet reads it.
	Message string
}

// matches: the rule is for pod's container c.
func (r *Rule) matches(pod *corev1.Pod, c *container) bool {
	if r.Container != "" {
		return r.Container == c.spec.Name && r.matchesPod(pod)
	}
	return !c.init && !c.ephemeral && r.matchesPod(pod)
}

// matchesPod: the rule selects pod.
func (r *Rule) matchesPod(pod *corev1.Pod) bool {
	return (r.Namespace == "" || r.Namespace == pod.Namespace) &&
		(r.Selector == nil || r.Selector.Matches(labels.Set(pod.Labels))) &&
		(r.OwnerKind == "" || ownedBy(pod, r.OwnerKind))
}

func ownedBy(pod *corev1.Pod, kind string) bool {
	for _, o := range pod.OwnerReferences {
		if o.Controller != nil && *o.Controller && o.Kind == kind {
			return true
		}
	}
	return false
}

// outcomes are the rules, the latest first, and the images whose pulls
// fail, with the runtime's error (images.go).
type outcomes struct {
	mu        sync.Mutex
	rules     []*Rule
	failPulls map[string]string
}

type planner interface {
	plan(pod *corev1.Pod, c *container) (Exit, bool)
	// configError is why the container cannot be created now (its
	// environment's ConfigMap or Secret is missing), or "".
	configError(pod *corev1.Pod, c *container) string
	// pull is why the container's image cannot be had now, and the
	// events of the try, or nil.
	pull(c *container, now time.Time) (*corev1.ContainerStateWaiting, []event)
	// stopPlan is how long a stopped container takes and its exit code.
	stopPlan(pod *corev1.Pod) (time.Duration, int32)
}

// plan is how the container's instance that starts now ends: by the
// latest matching rule; a regular init container completes at once.
// reset drops every rule (Kubelet.Reset).
func (o *outcomes) reset() {
	o.mu.Lock()
	o.rules, o.failPulls = nil, nil
	o.mu.Unlock()
}

func (o *outcomes) plan(pod *corev1.Pod, c *container) (Exit, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range o.rules {
		if r.Exit != nil && r.matches(pod, c) {
			return *r.Exit, true
		}
	}
	if c.init && !c.sidecar {
		return Exit{}, true
	}
	return Exit{}, false
}

// stopPlan is how long a deleted pod's containers take to stop and the
// code they exit with, by the latest matching rule that says each; the
// code is also that of containers the kubelet kills otherwise (what still
// runs when a pod ends, a restart for a resize).
func (o *outcomes) stopPlan(pod *corev1.Pod) (after time.Duration, code int32) {
	after, code = o.stopRule(pod)
	if grace := gracePeriod(pod); after > grace {
		return grace, sigkillExitCode
	}
	return after, code
}

// stopRule is how long the pod's containers take to stop after a SIGTERM
// and the code they exit with, by the rules alone.
func (o *outcomes) stopRule(pod *corev1.Pod) (after time.Duration, code int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var delayed, coded bool
	code = sigtermExitCode
	for _, r := range o.rules { // the latest added first
		if !r.matchesPod(pod) {
			continue
		}
		if !delayed && r.StopAfter > 0 {
			after, delayed = r.StopAfter, true
		}
		if !coded && r.StopExitCode != nil {
			code, coded = *r.StopExitCode, true
		}
	}
	return after, code
}

// gracePeriod is the time the kubelet gives a deleted pod's containers
// to stop, at least 2 s (killContainer's minimum): podGrace.
func gracePeriod(pod *corev1.Pod) time.Duration { return max(podGrace(pod), minimumGrace) }

// podGrace is the grace period the kubelet kills a pod's containers with:
// the deletion's as the kubelet first sees it (a later, shorter delete
// does not touch a kill under way), else the pod's
// terminationGracePeriodSeconds
// (calculateEffectiveGracePeriod); sidecars wait for their turn no longer
// (waitForTurn).
func podGrace(pod *corev1.Pod) time.Duration {
	grace := 30 * time.Second
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	if g := pod.DeletionGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	return grace
}

// AddRule adds a rule for containers that start from now on (the latest
// added wins where several match) and returns what removes it.
func (k *Kubelet) AddRule(r Rule) (remove func()) {
	rule := &r
	k.outcomes.mu.Lock()
	k.outcomes.rules = slices.Insert(k.outcomes.rules, 0, rule)
	k.outcomes.mu.Unlock()
	return func() {
		k.outcomes.mu.Lock()
		defer k.outcomes.mu.Unlock()
		k.outcomes.rules = slices.DeleteFunc(k.outcomes.rules, func(x *Rule) bool { return x == rule })
	}
}

// Exit makes the named container of the pod exit with code now, as its
// process ending: the pod's restartPolicy (or the container's) decides
// whether it restarts. An empty container name is every running container
// of the pod but its sidecars, which the kubelet stops once the regular
// containers have ended (Complete and Fail use it).
func (k *Kubelet) Exit(ctx context.Context, namespace, pod, containerName string, code int32) error {
	return k.ExitWith(ctx, namespace, pod, containerName, Exit{Code: code})
}

// ExitWith is Exit with the end's reason and termination message (e's
// After is not read: the container exits now).
func (k *Kubelet) ExitWith(ctx context.Context, namespace, pod, containerName string, e Exit) error {
	return k.act(namespace, pod, func(r *podRuntime, now time.Time) error {
		var hit bool
		for _, c := range r.all() {
			if (containerName == "" && !c.sidecar || c.spec.Name == containerName) && c.instance.running() {
				c.exitAt, c.exitAs, hit = now, e, true
			}
		}
		if !hit {
			return fmt.Errorf("exit: no running container %q in pod %s/%s", containerName, namespace, pod)
		}
		return nil
	})
}

// Complete makes every running container of the pod exit 0: a Job's pod
// that succeeds.
func (k *Kubelet) Complete(ctx context.Context, namespace, pod string) error {
	return k.Exit(ctx, namespace, pod, "", 0)
}

// Fail makes every running container of the pod exit with code, which
// must not be 0.
func (k *Kubelet) Fail(ctx context.Context, namespace, pod string, code int32) error {
	if code == 0 {
		return fmt.Errorf("fail pod %s/%s: exit code 0 is success (Complete)", namespace, pod)
	}
	return k.Exit(ctx, namespace, pod, "", code)
}

// SetReady sets the container's readiness probe result from now on, for
// its running and later instances: not ready, the pod is not Ready and
// leaves its Services' ready endpoints; ready again, it comes back. A
// container without a readiness probe is ready while it runs, unless set
// here.
func (k *Kubelet) SetReady(ctx context.Context, namespace, pod, containerName string, ready bool) error {
	return k.act(namespace, pod, func(r *podRuntime, _ time.Time) error {
		for _, c := range r.all() {
			if c.spec.Name == containerName && c.ephemeral {
				return fmt.Errorf("set ready: container %q of pod %s/%s is ephemeral: it has no probes", containerName, namespace, pod)
			}
			if c.spec.Name == containerName {
				c.ready = &ready
				if !ready && c.instance.running() {
					c.record(event{corev1.EventTypeWarning, "Unhealthy", "Readiness probe failed: "})
				}
				return nil
			}
		}
		return fmt.Errorf("set ready: no container %q in pod %s/%s", containerName, namespace, pod)
	})
}

// act changes the runtime of a pod the kubelet runs, then syncs it.
func (k *Kubelet) act(namespace, name string, change func(*podRuntime, time.Time) error) error {
	key := namespace + "/" + name
	k.mu.Lock()
	uid, ok := k.keys[key]
	r := k.running[uid]
	if !ok || r == nil {
		k.mu.Unlock()
		return fmt.Errorf("pod %s is not running on a simulated node (yet)", key)
	}
	err := change(r, k.clock.Now())
	k.mu.Unlock()
	if err == nil {
		k.podQueue.Add(key)
	}
	return err
}

// plans are the outcomes and the config source a container's start reads.
func (k *Kubelet) plans() plans { return plans{outcomes: &k.outcomes, config: k.config} }
