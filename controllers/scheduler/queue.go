package scheduler

// When a pod that fits nowhere is tried again: kube-scheduler keeps it
// aside (its unschedulable pods) until a change in the cluster may help,
// as its queueing hints decide; a status write, its own included, does
// not. This is a coarse form of those hints: a new or changed node, a
// freed pod or volume retries every such pod; a pod placed or relabelled
// retries those refused for (anti-)affinity or spreading.

import (
	"maps"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// retry is which unschedulable pods the next cycle tries again.
type retry int

const (
	retryNone retry = iota
	// retryPlacement: pods refused for pod (anti-)affinity or topology
	// spread, which a pod placed or relabelled can change.
	retryPlacement
	retryAll
)

// requeue runs a cycle that tries the unschedulable pods r says, besides
// the pending pods not tried yet.
func (s *Scheduler) requeue(r retry) {
	s.mu.Lock()
	s.retry = max(s.retry, r)
	s.mu.Unlock()
	s.queue.Add(pending)
}

// tryAgain: the cycle tries pod, given which unschedulable pods it
// retries. Called with s.mu held.
func (s *Scheduler) tryAgain(pod *corev1.Pod, r retry) bool {
	msg, ok := s.unschedulable[pod.UID]
	switch {
	case !ok || r == retryAll:
		return true
	case r == retryPlacement:
		return strings.Contains(msg, "affinity rules") || strings.Contains(msg, "topology spread")
	}
	return false
}

// podUpdated is kube-scheduler's test of a pending pod's update: anything
// but its status, resourceVersion, generation, managed fields and
// finalizers changed.
func podUpdated(old, cur *corev1.Pod) bool {
	strip := func(p *corev1.Pod) *corev1.Pod {
		p = p.DeepCopy()
		p.ResourceVersion, p.Generation, p.ManagedFields, p.Finalizers = "", 0, nil, nil
		p.Status = corev1.PodStatus{ResourceClaimStatuses: p.Status.ResourceClaimStatuses}
		return p
	}
	return !reflect.DeepEqual(strip(old), strip(cur))
}

// nodeChanged: the update can make a pod fit the node (its allocatable,
// labels, taints, cordon, annotations or conditions changed; a heartbeat
// does not).
func nodeChanged(old, cur *corev1.Node) bool {
	if !equality.Semantic.DeepEqual(old.Status.Allocatable, cur.Status.Allocatable) || !maps.Equal(old.Labels, cur.Labels) ||
		!maps.Equal(old.Annotations, cur.Annotations) || !equality.Semantic.DeepEqual(old.Spec.Taints, cur.Spec.Taints) ||
		old.Spec.Unschedulable != cur.Spec.Unschedulable {
		return true
	}
	conditions := func(n *corev1.Node) map[corev1.NodeConditionType]corev1.ConditionStatus {
		m := map[corev1.NodeConditionType]corev1.ConditionStatus{}
		for _, c := range n.Status.Conditions {
			m[c.Type] = c.Status
		}
		return m
	}
	return !maps.Equal(conditions(old), conditions(cur))
}

// podChanged: a pending pod's own change lets it be tried again; a placed
// pod that ends, leaves its node, is resized down or relabelled can make
// room.
func (s *Scheduler) podChanged(old, cur *corev1.Pod) {
	changed := false
	if cur.Spec.NodeName != "" {
		s.mu.Lock()
		assumed := s.assumed[cur.UID] // never changed once stored
		s.mu.Unlock()
		// The binding of a pod assumed on the node it is bound to is
		// in the snapshot already, unless the pod the informer shows
		// differs from the copy the snapshot counts (relabelled or
		// deleted since it was listed).
		bound := old.Spec.NodeName == "" && assumed != nil && !s.placedChanged(assumed, cur)
		changed = !bound && s.placedChanged(old, cur)
		s.mu.Lock()
		s.stale = s.stale || changed
		delete(s.assumed, cur.UID)
		delete(s.unschedulable, cur.UID)
		delete(s.nominations, cur.UID)
		s.mu.Unlock()
		s.placed(cur)
	}
	switch {
	case cur.Spec.NodeName == "":
		if podUpdated(old, cur) {
			s.mu.Lock()
			delete(s.unschedulable, cur.UID)
			s.mu.Unlock()
			s.queue.Add(pending)
		}
	case old.Spec.NodeName != cur.Spec.NodeName:
		s.requeue(retryPlacement) // bound
	case podEnded(old) != podEnded(cur):
		s.requeue(retryAll) // as deleted: a terminating pod holds its room until then
	case changed && s.scaledDown(old, cur):
		s.requeue(retryAll) // kube-scheduler's UpdatePodScaleDown: a resize gave room back
	case !maps.Equal(old.Labels, cur.Labels):
		s.requeue(retryPlacement)
	}
}

// placedChanged: a placed pod's update changes what the snapshot counts
// of it (its node, whether it ended or is terminating, its labels, spec
// or requests), or is another pod of its name (an informer's relist); a
// status write (the kubelet's) does not.
func (s *Scheduler) placedChanged(old, cur *corev1.Pod) bool {
	if old.UID != cur.UID || old.Spec.NodeName != cur.Spec.NodeName || podEnded(old) != podEnded(cur) ||
		(old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil) ||
		!maps.Equal(old.Labels, cur.Labels) || !sameSpec(old, cur) {
		return true
	}
	if sameStatusRequests(old, cur) {
		s.requests.carry(old, cur)
		return false
	}
	return !s.requests.of(old).requested.equal(s.requests.of(cur).requested)
}

// scaledDown: a placed pod's update shrank its requests. The old version's
// are computed first, so the cache keeps the new one's.
func (s *Scheduler) scaledDown(old, cur *corev1.Pod) bool {
	if sameSpec(old, cur) && sameStatusRequests(old, cur) {
		return false
	}
	was := s.requests.of(old).requested
	return s.requests.of(cur).requested.less(was)
}

// sameSpec: cur's spec is old's but for its node. A server that tracks
// pods' generations (kube-apiserver since 1.34, KEP-5067) increments it
// at each change of the spec but a binding's, so a status write is told by
// its generation without comparing two specs, ~2% of the CPU of a thousand
// pods' start; a pod without one is compared.
func sameSpec(old, cur *corev1.Pod) bool {
	if old.UID == cur.UID && old.Generation > 0 && old.Generation == cur.Generation {
		return true // not another pod of the name (an informer's relist can tell one as an update)
	}
	return equality.Semantic.DeepEqual(old.Spec, cur.Spec)
}

// placed records when the scheduler first saw p on a node (assumed or
// bound), as its cache's order of the node's pods.
func (s *Scheduler) placed(p *corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.placedAt[p.UID]; !ok {
		s.placements++
		s.placedAt[p.UID] = s.placements
	}
}

// podAdded: a new pending pod is tried; a pod created on a node is placed.
func (s *Scheduler) podAdded(obj any) {
	if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
		s.placed(p)
		s.invalidate()
		s.requeue(retryPlacement)
		return
	}
	s.queue.Add(pending)
}
