package scheduler

// Preemption: the default profile's DefaultPreemption PostFilter, as
// kube-scheduler v1.37.2 runs it for a pod that fits nowhere. On each node
// where the pod was refused for something lower priority pods free
// (Unschedulable, not UnschedulableAndUnresolvable), every pod of lower
// priority is taken off; if the pod then fits, the victims are given back
// one by one, the most important first (those whose eviction a
// PodDisruptionBudget would not allow first), while it still fits. The
// node chosen has the fewest budget violations, then the lowest priority
// of its most important victim, the lowest sum of priorities, the fewest
// victims, the latest start of its most important victims; the first
// such node by name (upstream takes one of a map's order). The victims get
// the condition DisruptionTarget (PreemptionByScheduler) and are deleted,
// with a Preempted event; pods of lower priority nominated to the node
// lose the nomination; the pod is nominated to the node and bound there
// once the victims are gone. Budgets are counted, never written.

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/kubeembed/apiserver/internal/hostports"
)

// candidate is a node where the pod fits once victims are gone.
type candidate struct {
	node          string
	victims       []*corev1.Pod
	pdbViolations int
}

// preemption is PostFilter's outcome: a candidate chosen, or not, and its
// message (without "preemption: "); keep says the pod's nomination stays
// as it is (it was not eligible).
type preemption struct {
	chosen  *candidate
	message string
	keep    bool
}

// preempt finds the node to preempt on, if any, for a pod refused
// everywhere with statuses.
func (s *Scheduler) preempt(c *cycle, statuses map[string]*status) preemption {
	pod := c.pod
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == corev1.PreemptNever {
		return preemption{message: "not eligible due to preemptionPolicy=Never.", keep: true}
	}
	if nn := c.snap.nominatedNode(pod); nn != "" {
		if st := statuses[nn]; (st == nil || st.code != unresolvable) && c.snap.preemptionUnderway(nn, pod) {
			return preemption{message: "not eligible due to a terminating pod on the nominated node.", keep: true}
		}
	}
	dryRun := map[string]*status{}
	var candidates []candidate
	for _, ni := range c.snap.nodes {
		st := statuses[ni.node.Name]
		if st == nil || st.code == unresolvable {
			dryRun[ni.node.Name] = reject(unresolvable, "Preemption is not helpful for scheduling")
			continue
		}
		if cand, st := s.selectVictims(c, ni); st != nil {
			dryRun[ni.node.Name] = st
		} else {
			candidates = append(candidates, cand)
		}
	}
	if len(candidates) == 0 {
		return preemption{message: fmt.Sprintf("0/%d nodes are available: %s.", len(c.snap.nodes),
			histogram(dryRun, func(s *status) []string { return s.reasons }))}
	}
	chosen := pickCandidate(candidates)
	return preemption{chosen: chosen,
		message: fmt.Sprintf("found a potential placement for pod on node %v, preempting %d victims", chosen.node, len(chosen.victims))}
}

// selectVictims is SelectVictimsOnNode: the fewest pods of lower priority
// whose removal lets the pod fit on ni, or why it does not.
func (s *Scheduler) selectVictims(c *cycle, ni *nodeInfo) (candidate, *status) {
	prio := corev1helpers.PodPriority(c.pod)
	var potential []*corev1.Pod
	for _, p := range ni.pods {
		if corev1helpers.PodPriority(p) < prio {
			potential = append(potential, s.current(p))
		}
	}
	if len(potential) == 0 {
		return candidate{}, reject(unresolvable, "No preemption victims found for incoming pod")
	}
	removed := map[types.UID]bool{}
	for _, p := range potential {
		removed[p.UID] = true
	}
	if st := c.fitsWithout(ni.node.Name, removed); st != nil {
		return candidate{}, st
	}
	byImportance := s.importance(potential)
	slices.SortStableFunc(potential, byImportance)
	violating, other := s.splitByBudgets(potential)
	cand := candidate{node: ni.node.Name}
	reprieve := func(p *corev1.Pod) bool {
		delete(removed, p.UID)
		if c.fitsWithout(ni.node.Name, removed) == nil {
			return true
		}
		removed[p.UID] = true
		cand.victims = append(cand.victims, p)
		return false
	}
	for _, p := range violating {
		if !reprieve(p) {
			cand.pdbViolations++
		}
	}
	for _, p := range other {
		reprieve(p)
	}
	if len(cand.victims) == 0 {
		// Cannot be: the pod did not fit with them all. Upstream's error.
		return candidate{}, reject(unresolvable, fmt.Sprintf("expected at least one victim pod on node %q", ni.node.Name))
	}
	if len(violating) > 0 && len(other) > 0 {
		slices.SortStableFunc(cand.victims, byImportance)
	}
	return cand, nil
}

// current is the informer's copy of p: the snapshot keeps the copy it
// placed, without the status the kubelet wrote since (its start time).
func (s *Scheduler) current(p *corev1.Pod) *corev1.Pod {
	if cur, err := s.pods.Pods(p.Namespace).Get(p.Name); err == nil && cur.UID == p.UID && cur.Spec.NodeName == p.Spec.NodeName {
		return cur
	}
	return p
}

// importance orders victims as MoreImportantVictim: higher priority, then
// the earlier started, first. It first puts them in the order the
// scheduler saw them placed, its cache's order of the node's pods, which
// upstream's sort of a few pods (an insertion sort, stable) keeps for
// pods started in the same second (the status's precision). A pod not
// started yet counts as started now, at each comparison, as upstream's
// (so of two such pods the one compared first comes first).
func (s *Scheduler) importance(pods []*corev1.Pod) func(a, b *corev1.Pod) int {
	order := make(map[types.UID]uint64, len(pods))
	s.mu.Lock()
	for _, p := range pods {
		order[p.UID] = s.placedAt[p.UID]
	}
	s.mu.Unlock()
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return cmp.Compare(order[a.UID], order[b.UID]) })
	return func(a, b *corev1.Pod) int {
		if pa, pb := corev1helpers.PodPriority(a), corev1helpers.PodPriority(b); pa != pb {
			return int(pb) - int(pa)
		}
		return startTime(a).Compare(startTime(b))
	}
}

// startTime is the pod's status.startTime, now for a pod without one.
func startTime(p *corev1.Pod) time.Time {
	if p.Status.StartTime == nil {
		return time.Now()
	}
	return p.Status.StartTime.Time
}

// splitByBudgets splits the victims, most important first, into those whose
// eviction a PodDisruptionBudget would not allow and the others, counting
// each budget's allowed disruptions down as the victims take them.
func (s *Scheduler) splitByBudgets(victims []*corev1.Pod) (violating, other []*corev1.Pod) {
	allowed := map[types.UID]int32{}
	for _, p := range victims {
		violates := false
		pdbs, _ := s.pdbs.PodDisruptionBudgets(p.Namespace).List(labels.Everything())
		for _, pdb := range pdbs {
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil || sel.Empty() || len(p.Labels) == 0 || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			if _, disrupted := pdb.Status.DisruptedPods[p.Name]; disrupted {
				continue
			}
			left, ok := allowed[pdb.UID]
			if !ok {
				left = pdb.Status.DisruptionsAllowed
			}
			allowed[pdb.UID] = left - 1
			if left-1 < 0 {
				violates = true
				break
			}
		}
		if violates {
			violating = append(violating, p)
		} else {
			other = append(other, p)
		}
	}
	return violating, other
}

// pickCandidate is pickOneNodeForPreemption's order; the first by node
// name breaks the last tie.
func pickCandidate(cands []candidate) *candidate {
	sum := func(c candidate) int64 {
		var n int64
		for _, p := range c.victims {
			n += int64(corev1helpers.PodPriority(p)) + math.MaxInt32 + 1
		}
		return n
	}
	best := slices.MinFunc(cands, func(a, b candidate) int {
		if a.pdbViolations != b.pdbViolations {
			return a.pdbViolations - b.pdbViolations
		}
		if pa, pb := corev1helpers.PodPriority(a.victims[0]), corev1helpers.PodPriority(b.victims[0]); pa != pb {
			return int(pa) - int(pb)
		}
		if sa, sb := sum(a), sum(b); sa != sb {
			return cmp.Compare(sa, sb)
		}
		if len(a.victims) != len(b.victims) {
			return len(a.victims) - len(b.victims)
		}
		return earliestStart(b).Compare(earliestStart(a)) // the latest first
	})
	return &best
}

// earliestStart is the earliest start of the candidate's highest priority
// victims.
func earliestStart(c candidate) time.Time {
	top, at := corev1helpers.PodPriority(c.victims[0]), startTime(c.victims[0])
	for _, p := range c.victims {
		switch prio := corev1helpers.PodPriority(p); {
		case prio == top && startTime(p).Before(at):
			at = startTime(p)
		case prio > top:
			top, at = prio, startTime(p)
		}
	}
	return at
}

// disruptionTarget is the condition a victim gets.
func disruptionTarget(preemptor, victim *corev1.Pod) corev1.PodCondition {
	return corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: corev1.PodReasonPreemptionByScheduler,
		Message: preemptor.Spec.SchedulerName + ": preempting to accommodate a higher priority pod", ObservedGeneration: victim.Generation}
}

// actuate preempts the candidate's victims for pod, as the asynchronous
// preemption does: the lower priority pods nominated to the node lose it,
// then each victim not yet being deleted gets its condition, is deleted
// and an event says by whom.
func (s *Scheduler) actuate(ctx context.Context, pod *corev1.Pod, cand *candidate, snap *snapshot) error {
	prio := corev1helpers.PodPriority(pod)
	for _, p := range snap.nominatedOn(cand.node, math.MinInt32, pod.UID) {
		if corev1helpers.PodPriority(p) < prio {
			s.nominate(snap, p, "")
			p = withNomination(p, cand.node)
			status := p.Status.DeepCopy()
			status.NominatedNodeName = ""
			_ = s.patchStatus(ctx, p, *status) // as upstream, failures ignored
		}
	}
	for _, victim := range cand.victims {
		if victim.DeletionTimestamp != nil {
			continue
		}
		if err := s.preemptVictim(ctx, pod, victim, cand.node); err != nil {
			return err
		}
	}
	return nil
}

// preemptVictim writes the victim's DisruptionTarget condition, deletes it
// and records Preempted; a victim gone meanwhile is left.
func (s *Scheduler) preemptVictim(ctx context.Context, pod, victim *corev1.Pod, node string) error {
	cond := disruptionTarget(pod, victim)
	status := victim.Status.DeepCopy()
	i := slices.IndexFunc(status.Conditions, func(c corev1.PodCondition) bool { return c.Type == cond.Type })
	if i < 0 || status.Conditions[i].Status != cond.Status || status.Conditions[i].Reason != cond.Reason || status.Conditions[i].Message != cond.Message {
		cond.LastTransitionTime = metav1.Now()
		if i < 0 {
			status.Conditions = append(status.Conditions, cond)
		} else {
			if status.Conditions[i].Status == cond.Status {
				cond.LastTransitionTime = status.Conditions[i].LastTransitionTime // as UpdatePodCondition
			}
			status.Conditions[i] = cond
		}
		// A victim gone meanwhile is left to the delete, which finds it
		// gone too.
		if err := s.patchStatus(ctx, victim, *status); err != nil {
			return fmt.Errorf("preempt %s/%s: %w", victim.Namespace, victim.Name, err)
		}
	}
	err := s.client.CoreV1().Pods(victim.Namespace).Delete(ctx, victim.Name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("preempt %s/%s: %w", victim.Namespace, victim.Name, err)
	}
	// No related object: v1.37.2 passes the recorder its preemptor's
	// wrapper, not the pod, whose reference it cannot make.
	s.recorder.Eventf(victim, nil, corev1.EventTypeNormal, "Preempted", "Preempting", "Preempted by pod %v on node %v", pod.UID, node)
	return nil
}

// nominee is a pod nominated to a node: it is to go there once room is
// made (by preemption, or by its volumes' provisioning).
type nominee struct {
	pod  *corev1.Pod
	node string
}

// nominatedNode is the node pod is nominated to, "" for none.
func (snap *snapshot) nominatedNode(pod *corev1.Pod) string { return snap.nominated[pod.UID].node }

// nominatedOn are the pods nominated to node of at least priority min,
// but except.
func (snap *snapshot) nominatedOn(node string, min int32, except types.UID) []*corev1.Pod {
	var pods []*corev1.Pod
	for uid, n := range snap.nominated {
		if n.node == node && uid != except && corev1helpers.PodPriority(n.pod) >= min {
			pods = append(pods, n.pod)
		}
	}
	return pods
}

// preemptionUnderway: node has a pod of lower priority than pod being
// deleted by a preemption.
func (snap *snapshot) preemptionUnderway(node string, pod *corev1.Pod) bool {
	ni := snap.byName[node]
	if ni == nil {
		return false
	}
	prio := corev1helpers.PodPriority(pod)
	return slices.ContainsFunc(ni.pods, func(p *corev1.Pod) bool {
		return p.DeletionTimestamp != nil && corev1helpers.PodPriority(p) < prio && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == corev1.PodReasonPreemptionByScheduler
		})
	})
}

// nominate records that pod is nominated to node ("": to none) for the
// rest of the cycle, and for the next ones until the informer shows it.
func (s *Scheduler) nominate(snap *snapshot, pod *corev1.Pod, node string) {
	if snap.nominatedNode(pod) == node && pod.Status.NominatedNodeName == node {
		return // as it is, and as the pod says
	}
	if node == "" {
		delete(snap.nominated, pod.UID)
	} else {
		snap.nominated[pod.UID] = nominee{pod: pod, node: node}
	}
	s.mu.Lock()
	s.nominations[pod.UID] = node
	s.mu.Unlock()
}

// nominees are the pending pods' nominations: their
// status.nominatedNodeName, or what the scheduler made it since and the
// informer does not show yet. Called with s.mu held.
func (s *Scheduler) nominees(all []*corev1.Pod) map[types.UID]nominee {
	out := map[types.UID]nominee{}
	pending := make(map[types.UID]bool, len(s.nominations))
	for _, p := range all {
		if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || p.Spec.SchedulerName != Name {
			continue
		}
		if len(s.nominations) > 0 {
			pending[p.UID] = true
		}
		node := p.Status.NominatedNodeName
		if mine, ok := s.nominations[p.UID]; ok {
			if mine == node {
				delete(s.nominations, p.UID) // shown: the pod's status says it now
			}
			node = mine
		}
		if node != "" {
			out[p.UID] = nominee{pod: p, node: node}
		}
	}
	for uid := range s.nominations {
		if !pending[uid] {
			delete(s.nominations, uid) // bound or gone before its nomination was recorded
		}
	}
	return out
}

// fitsWithout filters the pod on node as if the removed pods were not
// there, as RunFilterPluginsWithNominatedPods: with the pods of at least
// its priority nominated to the node placed there, then without them.
func (c *cycle) fitsWithout(node string, removed map[types.UID]bool) *status {
	if st := c.filterNominated(node, removed); st != nil {
		return st
	}
	return c.whatIf(node, removed, nil)
}

// filterNominated filters the pod on node with the pods of at least its
// priority nominated there placed on it (and without the removed ones):
// nil when none is.
func (c *cycle) filterNominated(node string, removed map[types.UID]bool) *status {
	nominated := c.snap.nominatedOn(node, corev1helpers.PodPriority(c.pod), c.pod.UID)
	if len(nominated) == 0 {
		return nil
	}
	return c.whatIf(node, removed, nominated)
}

// whatIf filters the pod on node in a copy of the snapshot where that node
// lacks the removed pods and has the extra ones. The other nodes are the
// snapshot's own, shared: filtering only reads them.
func (c *cycle) whatIf(node string, removed map[types.UID]bool, extra []*corev1.Pod) *status {
	target := c.snap.byName[node]
	snap := &snapshot{byName: make(map[string]*nodeInfo, len(c.snap.nodes)), namespaces: c.snap.namespaces,
		requests: c.snap.requests, nominated: c.snap.nominated}
	for _, pl := range c.snap.antiAffine {
		if pl.node != target {
			snap.antiAffine = append(snap.antiAffine, pl)
		}
	}
	copied := &nodeInfo{node: target.node, ports: map[hostports.Port]bool{}}
	for _, ni := range c.snap.nodes {
		if ni == target {
			ni = copied
		}
		snap.nodes = append(snap.nodes, ni)
		snap.byName[ni.node.Name] = ni
	}
	for _, p := range target.pods {
		if !removed[p.UID] {
			snap.add(copied, p)
		}
	}
	for _, p := range extra {
		placedCopy := *p
		placedCopy.Spec.NodeName = node
		snap.add(copied, &placedCopy)
	}
	what := c.s.newCycle(c.pod, snap)
	what.claims = c.claims
	return what.filter(copied)
}
