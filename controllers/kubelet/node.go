package kubelet

// Nodes as the kubelet registers and keeps them: the Node object its
// initialNode() and status setters build, posted whole (the API server keeps
// a Node's status on create), then its Lease in kube-node-lease.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"runtime"

	"github.com/google/uuid"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/nodefeatures"
	"github.com/kubeembed/apiserver/internal/version"
)

// Simulated hosts' values. The runtime is named as containerd is (what a
// kind node reports), marked as kubeembed's.
const (
	runtimeName      = "containerd"
	runtimeVersion   = runtimeName + "://2.1.4-kubeembed"
	kubeletPort      = 10250
	leaseDuration    = 40 // seconds, the kubelet's --node-lease-duration-seconds
	maxNodes         = 250
	controllerDetach = "volumes.kubernetes.io/controller-managed-attach-detach"
)

// The simulated addresses: node i's InternalIP is in NodeAddresses, its
// pods' in its /24 of PodAddresses. Nothing listens at them; a server
// never dials them (its Service resolver refuses to).
const (
	PodAddresses  = "10.244.0.0/16"
	NodeAddresses = "172.18.0.0/16"
)

// node is a simulated node: what the kubelet knows of it.
type node struct {
	spec  controllers.Node
	index int // its addresses and pod CIDR
	uid   types.UID
	// notReady, when not empty, is why the kubelet reports the node not
	// Ready (SetNodeReady); stopped: the kubelet stopped posting (Stop).
	notReady string
	stopped  bool
	ipam     *ipam
	bootID   string
	// fresh is the Node as admission last read it from the server
	// (refreshNode).
	fresh *corev1.Node
}

func (n *node) internalIP() string { return fmt.Sprintf("172.18.%d.%d", n.index/250, n.index%250+2) }

func (n *node) podCIDR() string { return fmt.Sprintf("10.244.%d.0/24", n.index) }

// labels are the kubelet's well-known labels, the zone and the node's own.
func (n *node) labels() map[string]string {
	l := map[string]string{
		corev1.LabelHostname: n.spec.Name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: runtime.GOARCH,
		"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": runtime.GOARCH,
	}
	if n.spec.Zone != "" {
		l[corev1.LabelTopologyZone] = n.spec.Zone
	}
	maps.Copy(l, n.spec.Labels)
	return l
}

// object is the Node the kubelet posts at registration.
func (n *node) object(now metav1.Time) *corev1.Node {
	capacity := capacityOf(n.spec)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.spec.Name, Labels: n.labels(),
			Annotations: map[string]string{controllerDetach: "true", controllers.SimulatedAnnotation: "true"}},
		Spec: corev1.NodeSpec{PodCIDR: n.podCIDR(), PodCIDRs: []string{n.podCIDR()}, Taints: n.spec.Taints, Unschedulable: n.spec.Unschedulable},
		Status: corev1.NodeStatus{
			Capacity: capacity, Allocatable: allocatable(capacity),
			Conditions: n.conditions(nil, now),
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.internalIP()},
				{Type: corev1.NodeHostName, Address: n.spec.Name}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: kubeletPort}},
			NodeInfo:        n.info(),
			// What a v1.37 kubelet with its default gates declares
			// (NodeDeclaredFeatures): admission and the scheduler match
			// pods' needs against it.
			DeclaredFeatures: nodefeatures.Declared(),
			RuntimeHandlers:  runtimeHandlers(),
		},
	}
}

// runtimeHandlers are the simulated containerd's handlers as the kubelet
// reports them (the RuntimeHandlers setter): containerd 2 with runc only,
// on Linux 6.1, lists runc, then itself as the default handler (""), each
// supporting recursive read-only mounts and user namespaces.
func runtimeHandlers() []corev1.NodeRuntimeHandler {
	handler := func(name string) corev1.NodeRuntimeHandler {
		return corev1.NodeRuntimeHandler{Name: name, Features: &corev1.NodeRuntimeHandlerFeatures{
			RecursiveReadOnlyMounts: ptr.To(true), UserNamespaces: ptr.To(true)}}
	}
	return []corev1.NodeRuntimeHandler{handler("runc"), handler("")}
}

// info is nodeInfo: stable IDs derived from the name, a boot ID per
// registration.
func (n *node) info() corev1.NodeSystemInfo {
	sum := sha256.Sum256([]byte(n.spec.Name))
	id := hex.EncodeToString(sum[:16])
	return corev1.NodeSystemInfo{
		MachineID: id, SystemUUID: uuid.NewSHA1(uuid.NameSpaceOID, []byte(n.spec.Name)).String(), BootID: n.bootID,
		KernelVersion: "6.1.0-kubeembed", OSImage: "kubeembed simulated node", ContainerRuntimeVersion: runtimeVersion,
		KubeletVersion: "v" + version.Kubernetes(), OperatingSystem: "linux", Architecture: runtime.GOARCH,
	}
}

// capacityOf is DefaultCapacity with the node's own.
func capacityOf(spec controllers.Node) corev1.ResourceList {
	c := controllers.DefaultCapacity()
	maps.Copy(c, spec.Capacity)
	return c
}

// allocatable is capacity less the kubelet's default reservations: the
// hard eviction thresholds memory.available<100Mi and
// nodefs.available<10%.
func allocatable(capacity corev1.ResourceList) corev1.ResourceList {
	a := capacity.DeepCopy()
	if m, ok := a[corev1.ResourceMemory]; ok {
		m.Sub(resource.MustParse("100Mi"))
		a[corev1.ResourceMemory] = m
	}
	if s, ok := a[corev1.ResourceEphemeralStorage]; ok {
		a[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(s.Value()*9/10, resource.DecimalSI)
	}
	return a
}

// conditions are the kubelet's four, in its setters' order (Ready last),
// updated from old: a condition keeps its lastTransitionTime while its
// status stays.
func (n *node) conditions(old []corev1.NodeCondition, now metav1.Time) []corev1.NodeCondition {
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"}
	if n.notReady != "" {
		ready = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: n.notReady}
	}
	want := []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
		ready,
	}
	for i := range want {
		want[i].LastHeartbeatTime, want[i].LastTransitionTime = now, now
		for _, o := range old {
			if o.Type == want[i].Type && o.Status == want[i].Status {
				want[i].LastTransitionTime = o.LastTransitionTime
			}
		}
	}
	return want
}

// lease is the node's heartbeat Lease, owned by its Node.
func (n *node) lease(now metav1.MicroTime) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: n.spec.Name, Namespace: corev1.NamespaceNodeLease,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.spec.Name, UID: n.uid}}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(n.spec.Name), LeaseDurationSeconds: ptr.To[int32](leaseDuration), RenewTime: &now},
	}
}

// ref is the node as the kubelet's events name it once registered.
func (n *node) ref() *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: n.spec.Name, UID: n.uid}
}

// newBootID is a boot ID for a node's registration.
func newBootID() string { return uuid.NewString() }

// register posts the node (or, when it exists, takes it over and posts its
// status), then records the kubelet's start-up events and renews its Lease.
func (k *Kubelet) register(ctx context.Context, n *node) error {
	now := metav1.NewTime(k.clock.Now())
	created, err := k.client.CoreV1().Nodes().Create(ctx, n.object(now), metav1.CreateOptions{})
	if err != nil {
		if created, err = k.adopt(ctx, n, now); err != nil {
			return fmt.Errorf("register node %s: %w", n.spec.Name, err)
		}
	}
	k.mu.Lock()
	n.uid = created.UID
	k.mu.Unlock()
	// The events' namespace (default) and the Lease's (kube-node-lease)
	// are made by the server's start: an event posted before then is
	// refused ("namespaces \"default\" not found", logged as an error by
	// the broadcaster), a Lease waits 50 ms in namespace admission, then
	// fails.
	if k.ready != nil {
		select {
		case <-k.ready:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	k.startupEvents(n)
	return k.renewLease(ctx, n)
}

// startupEvents records the events a kubelet records as it registers its
// node, in its order; they name the node without its UID, as kubelet
// v1.37's do (its node is not yet in its cache).
func (k *Kubelet) startupEvents(n *node) {
	rec := k.recorder(n.spec.Name)
	ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: n.spec.Name}
	rec.Event(ref, corev1.EventTypeNormal, "Starting", "Starting kubelet.")
	for _, reason := range []string{"NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID"} {
		rec.Eventf(ref, corev1.EventTypeNormal, reason, "Node %s status is now: %s", n.spec.Name, reason)
	}
	rec.Event(ref, corev1.EventTypeNormal, "NodeAllocatableEnforced", "Updated Node Allocatable limit across pods")
}
