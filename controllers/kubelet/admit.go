package kubelet

// The kubelet's admission of a pod new to it (HandlePodAdditions and its
// admit handlers, kubelet v1.37.2): a pod the node cannot run, which only a
// pod given its nodeName past the scheduler can be, is rejected: phase
// Failed, the handler's reason (OutOfcpu, NodeAffinity, SysctlForbidden,
// ...) with "Pod was rejected: " and its message, a Warning event with
// both; it never runs. Not simulated: the eviction handler (a simulated
// node is never under pressure), the critical pod handler (a critical pod
// is rejected too, where a kubelet would evict others for it), device
// plugins and AppArmor profiles (a node has every one).

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/component-helpers/node/util/sysctl"
	"k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/kubeembed/apiserver/internal/hostports"
	"github.com/kubeembed/apiserver/internal/podqos"
)

// safeSysctls are the kubelet's safe sysctls (all of them: the simulated
// node's kernel has each), the only ones it allows without
// --allowed-unsafe-sysctls.
var safeSysctls = []string{"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
	"net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start", "net.ipv4.ip_local_reserved_ports",
	"net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
	"net.ipv4.tcp_keepalive_probes", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",
	"net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_notsent_lowat"}

// admission is why the kubelet of n rejects pod, or "" when it admits it:
// its admit handlers in order (sysctls, then the predicates: OS, resources,
// node affinity, host ports, NoExecute taints), the first failure's reason
// and message. Called with k.mu held.
func (k *Kubelet) admission(pod *corev1.Pod, n *node) (reason, message string) {
	if msg := forbiddenSysctl(pod); msg != "" {
		return "SysctlForbidden", msg
	}
	if os, ok := pod.Labels[corev1.LabelOSStable]; ok && os != "linux" {
		return "PodOSSelectorNodeLabelDoesNotMatch", "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"
	}
	if pod.Spec.OS != nil && pod.Spec.OS.Name != corev1.Linux {
		return "PodOSNotSupported", "Failed to admit pod as the OS field doesn't match node OS"
	}
	obj := k.nodeObject(n)
	if reason, msg := k.resourcesFit(pod, n, obj); reason != "" {
		return reason, msg
	}
	predicate := func(name, desc string) (string, string) {
		return name, fmt.Sprintf("Predicate %s failed: %s", name, desc)
	}
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(obj); !ok {
		return predicate("NodeAffinity", "node(s) didn't match Pod's node affinity/selector")
	}
	if k.hostPortTaken(pod, n) {
		return predicate("NodePorts", "node(s) didn't have free ports for the requested pod ports")
	}
	if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), obj.Spec.Taints, pod.Spec.Tolerations,
		func(t *corev1.Taint) bool { return t.Effect == corev1.TaintEffectNoExecute }, false); untolerated {
		return predicate("TaintToleration", "node(s) had taints that the pod didn't tolerate")
	}
	return "", ""
}

// nodeObject is the node as the kubelet of n last read it: from the
// server when admission read it again (refreshNode), else the informer's
// copy, else as registered. Called with k.mu held.
func (k *Kubelet) nodeObject(n *node) *corev1.Node {
	informer, err := k.nodes.Get(n.spec.Name)
	if err != nil {
		informer = n.object(metav1.NewTime(k.clock.Now())) // not in the cache yet
	}
	if fresh := n.fresh; fresh != nil && resourceVersionAfter(fresh.ResourceVersion, informer.ResourceVersion) {
		return fresh
	}
	return informer
}

// nodeAffinityFails: pod's required node affinity does not match its
// node as the informer has it. Called with k.mu held.
func (k *Kubelet) nodeAffinityFails(pod *corev1.Pod) bool {
	obj, err := k.nodes.Get(pod.Spec.NodeName)
	if err != nil {
		return false
	}
	ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(obj)
	return !ok
}

// refreshNode reads the node from the server, as the kubelet's admission
// does before it rejects a pod for its node affinity alone (the informer
// may not have a label just added).
func (k *Kubelet) refreshNode(ctx context.Context, name string) {
	obj, err := k.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return
	}
	k.mu.Lock()
	if n := k.simulated[name]; n != nil {
		n.fresh = obj
	}
	k.mu.Unlock()
}

// resourceVersionAfter: a is a later resourceVersion than b.
func resourceVersionAfter(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x > y
}

// forbiddenSysctl is the sysctl allowlist's message for the first of the
// pod's sysctls it does not allow, or "".
func forbiddenSysctl(pod *corev1.Pod) string {
	if pod.Spec.SecurityContext == nil {
		return ""
	}
	for _, s := range pod.Spec.SecurityContext.Sysctls {
		name := sysctl.NormalizeName(s.Name)
		if !slices.Contains(safeSysctls, name) {
			return fmt.Sprintf("forbidden sysctl: %q not allowlisted", name)
		}
		ns, _, _ := sysctl.GetNamespace(name)
		if ns == sysctl.NetNamespace && pod.Spec.HostNetwork || ns == sysctl.IPCNamespace && pod.Spec.HostIPC {
			return fmt.Sprintf("forbidden sysctl: %q not allowed with host %s enabled", name, ns)
		}
	}
	return ""
}

// resourcesFit is the resource check of the kubelet's predicates
// (noderesources.Fits): room for another pod, then the pod's cpu, memory,
// ephemeral storage, hugepages and extended resources (those the node has:
// others are not the predicate's) against the node's allocatable less what the
// pods it admitted request.
func (k *Kubelet) resourcesFit(pod *corev1.Pod, n *node, obj *corev1.Node) (reason, message string) {
	others := k.admitted(n, nil)
	allocatable := obj.Status.Allocatable
	insufficient := func(name corev1.ResourceName, req, u, c int64) (string, string) {
		return "OutOf" + string(name), fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d", name, req, u, c)
	}
	if c := allocatable.Pods().Value(); int64(len(others))+1 > c {
		return insufficient(corev1.ResourcePods, 1, int64(len(others)), c)
	}
	requests := resource.PodRequests(pod, resource.PodResourcesOptions{})
	names := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}
	var extended []corev1.ResourceName
	for name := range requests {
		_, onNode := allocatable[name]
		if (onNode || strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)) && !slices.Contains(names, name) && name != corev1.ResourcePods {
			extended = append(extended, name)
		}
	}
	slices.Sort(extended)
	var used corev1.ResourceList
	for _, name := range append(names, extended...) {
		req := amount(requests, name)
		if req == 0 {
			continue
		}
		if used == nil {
			used = requested(others)
		}
		if u, c := amount(used, name), amount(allocatable, name); req > c-u {
			return insufficient(name, req, u, c)
		}
	}
	return "", ""
}

// admitted are the pods the kubelet of n admitted and runs (not finished,
// not deleted) but except. Called with k.mu held.
func (k *Kubelet) admitted(n *node, except *podRuntime) []*podRuntime {
	var out []*podRuntime
	for _, r := range k.running {
		if r != except && r.node == n.spec.Name && !r.deleted && !r.over {
			out = append(out, r)
		}
	}
	return out
}

// requested is what the pods request, as allocated.
func requested(pods []*podRuntime) corev1.ResourceList {
	used := corev1.ResourceList{}
	for _, r := range pods {
		used = quota.Add(used, resource.PodRequests(r.allocatedPod(&corev1.Pod{}), resource.PodResourcesOptions{}))
	}
	return used
}

// hostPortTaken: a host port of pod's is one a running pod of n holds.
// Called with k.mu held.
func (k *Kubelet) hostPortTaken(pod *corev1.Pod, n *node) bool {
	want := hostports.Of(&pod.Spec)
	if len(want) == 0 {
		return false
	}
	for _, other := range k.admitted(n, nil) {
		spec := other.allocatedPod(&corev1.Pod{}).Spec
		for _, have := range hostports.Of(&spec) {
			if slices.ContainsFunc(want, have.Conflicts) {
				return true
			}
		}
	}
	return false
}

// admit admits pod, new to the kubelet of n, and returns its runtime: one
// that holds nothing of the node if the kubelet rejects it. Called with
// k.mu held.
func (k *Kubelet) admit(key string, pod *corev1.Pod, n *node) *podRuntime {
	k.forgetLocked(key, pod.UID) // a pod of the same name before it
	var r *podRuntime
	if reason, message := k.admission(pod, n); reason != "" {
		r = &podRuntime{uid: pod.UID, node: n.spec.Name, startTime: k.clock.Now(), version: pod.ResourceVersion,
			over: true, ipReleased: true, rejection: &rejection{reason: reason, message: message}}
	} else {
		r = newRuntime(pod, n.spec.Name, k.podIP(pod, n), k.clock.Now())
	}
	k.running[pod.UID] = r
	k.keys[key] = pod.UID
	return r
}

// rejection is why the kubelet rejected a pod; recorded: its event was.
type rejection struct {
	reason, message string
	recorded        bool
}

// rejectedWork is what a sync of a rejected pod does: write the status the
// kubelet writes for it (rejectPod; its status manager adds the start time
// and keeps only others' conditions), record the Warning event once, and
// delete the pod once it is deleted.
func (r *podRuntime) rejectedWork(pod *corev1.Pod) podWork {
	w := podWork{version: r.version, status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: r.rejection.reason,
		Message: "Pod was rejected: " + r.rejection.message, QOSClass: podqos.Class(pod), StartTime: ptrTime(r.startTime),
		ObservedGeneration: pod.Generation}}
	if !r.rejection.recorded {
		r.rejection.recorded = true
		w.podEvents = []event{{corev1.EventTypeWarning, r.rejection.reason, r.rejection.message}}
	}
	r.deleted, w.remove = pod.DeletionTimestamp != nil, pod.DeletionTimestamp != nil
	return w
}
