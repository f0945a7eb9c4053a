package scheduler

import (
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/resource"

	"github.com/kubeembed/apiserver/internal/hostports"
)

// Scoring's requests for containers that name none, kube-scheduler's
// non-zero defaults: 100m of CPU, 200 MiB of memory.
var nonZero = corev1.ResourceList{
	corev1.ResourceCPU:    *mustQuantity("100m"),
	corev1.ResourceMemory: *mustQuantity("209715200"),
}

// nodeInfo is a node and the pods assigned to it, as the scheduler's
// snapshot holds them.
type nodeInfo struct {
	node *corev1.Node
	pods []*corev1.Pod
	// requested is the pods' requests; nonZeroRequested with the
	// non-zero defaults, for scoring.
	requested, nonZeroRequested amounts
	// ports are the host ports in use: ip/protocol/port.
	ports map[hostports.Port]bool
}

// snapshot is the cluster as one scheduling cycle sees it.
type snapshot struct {
	nodes []*nodeInfo
	// byName finds a node's info.
	byName map[string]*nodeInfo
	// namespaces are the namespaces' labels, for affinity terms'
	// namespaceSelectors.
	namespaces map[string]map[string]string
	// antiAffine are the placed pods with required anti-affinity, which
	// may refuse a pod their domains.
	antiAffine []*placed
	requests   *requestCache
	// nominated are the pending pods nominated to nodes, by UID; set for
	// each cycle.
	nominated map[types.UID]nominee
}

// placed is a pod on a node.
type placed struct {
	pod  *corev1.Pod
	node *nodeInfo
}

func newSnapshot(nodes []*corev1.Node, pods []*corev1.Pod, namespaces map[string]map[string]string, requests *requestCache) *snapshot {
	s := &snapshot{byName: map[string]*nodeInfo{}, namespaces: namespaces, requests: requests}
	for _, n := range nodes {
		ni := &nodeInfo{node: n, ports: map[hostports.Port]bool{}}
		s.nodes = append(s.nodes, ni)
		s.byName[n.Name] = ni
	}
	for _, p := range pods {
		if ni := s.byName[p.Spec.NodeName]; ni != nil {
			s.add(ni, p)
		}
	}
	return s
}

// add assigns p to the node: its requests and host ports are in use.
func (s *snapshot) add(ni *nodeInfo, p *corev1.Pod) {
	ni.pods = append(ni.pods, p)
	req := s.requests.of(p)
	ni.requested.add(req.requested)
	ni.nonZeroRequested.add(req.nonZero)
	for _, hp := range req.ports {
		ni.ports[hp] = true
	}
	if a := p.Spec.Affinity; a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
		s.antiAffine = append(s.antiAffine, &placed{pod: p, node: ni})
	}
}

// requestCache keeps each pod's requests and host ports by UID while its
// resourceVersion stays: computing them for every pod at every cycle made
// the scheduler the bottleneck of a thousand pods' creation.
type requestCache struct {
	mu   sync.Mutex
	pods map[types.UID]podRequests
}

type podRequests struct {
	resourceVersion    string
	requested, nonZero *amounts
	ports              []hostports.Port
}

func newRequestCache() *requestCache { return &requestCache{pods: map[types.UID]podRequests{}} }

func (c *requestCache) of(p *corev1.Pod) podRequests {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.pods[p.UID]; ok && r.resourceVersion == p.ResourceVersion && p.ResourceVersion != "" {
		return r
	}
	r := podRequests{resourceVersion: p.ResourceVersion, ports: hostports.Of(&p.Spec),
		requested: amountsOf(resource.PodRequests(p, resource.PodResourcesOptions{UseStatusResources: true})),
		nonZero:   amountsOf(resource.PodRequests(p, resource.PodResourcesOptions{UseStatusResources: true, NonMissingContainerRequests: nonZero}))}
	c.pods[p.UID] = r
	return r
}

// carry keeps old's requests for cur, a later version of the pod with the
// same spec and sameStatusRequests: a status write (the kubelet's) does not
// compute them again.
func (c *requestCache) carry(old, cur *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.pods[old.UID]; ok && r.resourceVersion == old.ResourceVersion && old.ResourceVersion != "" {
		r.resourceVersion = cur.ResourceVersion
		c.pods[old.UID] = r
	}
}

// sameStatusRequests: what of a and b's statuses their requests read
// (component-helpers' PodRequests with status resources: the pod's and
// its containers' resources and allocated resources, a pending resize's
// reason, its node allocatable claims) is the same, for pods of the same
// spec.
func sameStatusRequests(a, b *corev1.Pod) bool {
	as, bs := &a.Status, &b.Status
	return resizeReason(a) == resizeReason(b) &&
		equality.Semantic.DeepEqual(as.Resources, bs.Resources) &&
		equality.Semantic.DeepEqual(as.AllocatedResources, bs.AllocatedResources) &&
		equality.Semantic.DeepEqual(as.NodeAllocatableResourceClaimStatuses, bs.NodeAllocatableResourceClaimStatuses) &&
		sameContainerResources(a, b, a.Spec.Containers) && sameContainerResources(a, b, a.Spec.InitContainers)
}

// sameContainerResources: each container's status as PodRequests finds it
// (the first of its name, among the containers' statuses then the init
// containers') reports the same resources in a and b; a status that
// reports none reads as no status.
func sameContainerResources(a, b *corev1.Pod, containers []corev1.Container) bool {
	for _, c := range containers {
		sa, sb := statusNamed(a, c.Name), statusNamed(b, c.Name)
		if !equality.Semantic.DeepEqual(sa.Resources, sb.Resources) || !equality.Semantic.DeepEqual(sa.AllocatedResources, sb.AllocatedResources) {
			return false
		}
	}
	return true
}

// statusNamed is the first status of a container of that name, or none.
func statusNamed(p *corev1.Pod, name string) corev1.ContainerStatus {
	for _, statuses := range [][]corev1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} {
		for _, s := range statuses {
			if s.Name == name {
				return s
			}
		}
	}
	return corev1.ContainerStatus{}
}

// resizeReason is the reason of the pod's PodResizePending condition.
func resizeReason(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodResizePending {
			return c.Reason
		}
	}
	return ""
}

func (c *requestCache) forget(uid types.UID) {
	c.mu.Lock()
	delete(c.pods, uid)
	c.mu.Unlock()
}

// assigned: the pod is on the node (by UID).
func (ni *nodeInfo) assigned(uid types.UID) bool {
	for _, p := range ni.pods {
		if p.UID == uid {
			return true
		}
	}
	return false
}

// amounts are resources in kube-scheduler's units (its framework.Resource):
// millicores of CPU, whole units (bytes) of the others, CPU and memory
// in fields of their own. A node's sums are kept so, as kube-scheduler
// keeps them: adding Quantities in maps for every placed pod at every
// cycle was most of the scheduler's snapshot time.
type amounts struct {
	cpu, memory int64
	others      map[corev1.ResourceName]int64
}

func amountsOf(l corev1.ResourceList) *amounts {
	a := &amounts{}
	for name := range l {
		switch v := milli(l, name); name {
		case corev1.ResourceCPU:
			a.cpu = v
		case corev1.ResourceMemory:
			a.memory = v
		default:
			if a.others == nil {
				a.others = map[corev1.ResourceName]int64{}
			}
			a.others[name] = v
		}
	}
	return a
}

// of is the amount of name.
func (a *amounts) of(name corev1.ResourceName) int64 {
	switch name {
	case corev1.ResourceCPU:
		return a.cpu
	case corev1.ResourceMemory:
		return a.memory
	}
	return a.others[name]
}

func (a *amounts) equal(b *amounts) bool {
	return a.cpu == b.cpu && a.memory == b.memory && maps.Equal(a.others, b.others)
}

// less: a has less of some resource than b.
func (a *amounts) less(b *amounts) bool {
	if a.cpu < b.cpu || a.memory < b.memory {
		return true
	}
	for name, v := range b.others {
		if a.others[name] < v {
			return true
		}
	}
	return false
}

func (a *amounts) add(b *amounts) {
	a.cpu += b.cpu
	a.memory += b.memory
	for name, v := range b.others {
		if a.others == nil {
			a.others = map[corev1.ResourceName]int64{}
		}
		a.others[name] += v
	}
}

// conflicts: hp is in use on the node (the same port and protocol on the
// same address, or either on every address).
func (ni *nodeInfo) conflicts(hp hostports.Port) bool {
	for used := range ni.ports {
		if used.Conflicts(hp) {
			return true
		}
	}
	return false
}
