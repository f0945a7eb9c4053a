package scheduler

// The default profile's scores, each normalised to 0-100 and weighted as
// kube-scheduler's: TaintToleration 3, NodeAffinity 2, NodeResourcesFit
// (least allocated) 1, PodTopologySpread 2, InterPodAffinity 2,
// NodeResourcesBalancedAllocation 1. ImageLocality and VolumeBinding score
// 0 here (simulated nodes report no images; no storage capacity).

import (
	"math"
	"math/rand/v2"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// best picks the feasible node of the highest total score, at random
// among equals.
func (c *cycle) best(feasible []*nodeInfo) *nodeInfo {
	if len(feasible) == 1 {
		return feasible[0]
	}
	total := make([]int64, len(feasible))
	add := func(weight int64, raw []int64, normalize func([]int64)) {
		if normalize != nil {
			normalize(raw)
		}
		for i := range total {
			total[i] += weight * raw[i]
		}
	}
	add(3, c.each(feasible, c.untoleratedPreferNoSchedule), reverseNormalize)
	add(2, c.each(feasible, c.preferredNodeAffinity), normalize)
	add(1, c.each(feasible, c.leastAllocated), nil)
	add(2, c.spreadScores(feasible), nil)
	add(2, c.each(feasible, c.preferredPodAffinity), minMaxNormalize)
	add(1, c.each(feasible, c.balancedAllocation), nil)
	var top []*nodeInfo
	var max int64 = math.MinInt64
	for i, ni := range feasible {
		switch {
		case total[i] > max:
			max, top = total[i], []*nodeInfo{ni}
		case total[i] == max:
			top = append(top, ni)
		}
	}
	return top[rand.IntN(len(top))]
}

func (c *cycle) each(nodes []*nodeInfo, score func(*nodeInfo) int64) []int64 {
	out := make([]int64, len(nodes))
	for i, ni := range nodes {
		out[i] = score(ni)
	}
	return out
}

// normalize scales to 0-100 by the highest score.
func normalize(s []int64) {
	max := int64(0)
	for _, v := range s {
		max = maxOf(max, v)
	}
	for i := range s {
		if max == 0 {
			s[i] = 0
		} else {
			s[i] = 100 * s[i] / max
		}
	}
}

// reverseNormalize scales to 100-0: the lowest raw score is the best.
func reverseNormalize(s []int64) {
	max := int64(0)
	for _, v := range s {
		max = maxOf(max, v)
	}
	for i := range s {
		if max == 0 {
			s[i] = 100
		} else {
			s[i] = 100 - 100*s[i]/max
		}
	}
}

func minMaxNormalize(s []int64) {
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, v := range s {
		lo, hi = min(lo, v), maxOf(hi, v)
	}
	for i := range s {
		if hi == lo {
			s[i] = 0
		} else {
			s[i] = 100 * (s[i] - lo) / (hi - lo)
		}
	}
}

func maxOf(a, b int64) int64 { return max(a, b) }

// untoleratedPreferNoSchedule counts the node's PreferNoSchedule taints
// the pod does not tolerate.
func (c *cycle) untoleratedPreferNoSchedule(ni *nodeInfo) int64 {
	var n int64
	for i := range ni.node.Spec.Taints {
		t := &ni.node.Spec.Taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule && !corev1helpers.TolerationsTolerateTaint(klog.Background(), c.pod.Spec.Tolerations, t, false) {
			n++
		}
	}
	return n
}

// preferredNodeAffinity sums the weights of the pod's preferred node
// affinity terms the node matches.
func (c *cycle) preferredNodeAffinity(ni *nodeInfo) int64 {
	a := c.pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		return 0
	}
	terms, err := nodeaffinity.NewPreferredSchedulingTerms(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	if err != nil {
		return 0
	}
	return terms.Score(ni.node)
}

// leastAllocated favours nodes with the most CPU and memory left, counting
// kube-scheduler's non-zero requests for containers that name none.
func (c *cycle) leastAllocated(ni *nodeInfo) int64 {
	podNonZero := c.nonZero
	var sum int64
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		alloc := milli(ni.node.Status.Allocatable, name)
		req := ni.nonZeroRequested.of(name) + milli(podNonZero, name)
		if alloc == 0 || req > alloc {
			continue
		}
		sum += (alloc - req) * 100 / alloc
	}
	return sum / 2
}

// balancedAllocation favours nodes whose CPU and memory would be used in
// equal shares, by the change the pod makes to that balance.
func (c *cycle) balancedAllocation(ni *nodeInfo) int64 {
	if c.requests.Cpu().IsZero() && c.requests.Memory().IsZero() {
		return 0
	}
	balance := func(extra corev1.ResourceList) int64 {
		var f [2]float64
		for i, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			alloc := float64(milli(ni.node.Status.Allocatable, name))
			if alloc > 0 {
				f[i] = math.Min(1, float64(ni.requested.of(name)+milli(extra, name))/alloc)
			}
		}
		return int64((1 - math.Abs(f[0]-f[1])/2) * 100)
	}
	return 50 + (50+balance(c.requests)-balance(nil))/2
}

// milli is l's amount of name in kube-scheduler's units (amounts).
func milli(l corev1.ResourceList, name corev1.ResourceName) int64 {
	q, ok := l[name]
	if !ok {
		return 0
	}
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// spreadScores prefers the nodes whose domains hold fewer of the pod's
// peers, by its ScheduleAnyway constraints, or kube-scheduler's system
// defaults (3 per host, 5 per zone) for the pods of the same controller
// when it has no constraints at all.
func (c *cycle) spreadScores(nodes []*nodeInfo) []int64 {
	constraints := c.softConstraints()
	raw := make([]float64, len(nodes))
	if len(constraints) == 0 {
		return make([]int64, len(nodes))
	}
	for _, tsc := range constraints {
		sel := tsc.selector
		counts, domains := map[string]int{}, map[string]bool{}
		for _, ni := range c.snap.nodes {
			if v, ok := ni.node.Labels[tsc.TopologyKey]; ok {
				counts[v] += countMatching(ni.pods, c.pod.Namespace, sel)
			}
		}
		for _, ni := range nodes {
			if v, ok := ni.node.Labels[tsc.TopologyKey]; ok {
				domains[v] = true
			}
		}
		size := float64(len(domains))
		if tsc.TopologyKey == corev1.LabelHostname {
			size = float64(len(nodes))
		}
		for i, ni := range nodes {
			if v, ok := ni.node.Labels[tsc.TopologyKey]; ok {
				raw[i] += float64(counts[v])*math.Log(size+2) + float64(tsc.MaxSkew-1)
			}
		}
	}
	out := make([]int64, len(nodes))
	lo, hi := int64(math.MaxInt64), int64(0)
	for i := range raw {
		out[i] = int64(math.Round(raw[i]))
		lo, hi = min(lo, out[i]), max(hi, out[i])
	}
	for i := range out {
		if hi == 0 {
			out[i] = 100
		} else {
			out[i] = 100 * (hi + lo - out[i]) / hi
		}
	}
	return out
}

// softConstraints are the pod's ScheduleAnyway constraints, or the system
// defaults over its controller's pods.
func (c *cycle) softConstraints() []spreadConstraint {
	var out []spreadConstraint
	for _, tsc := range c.pod.Spec.TopologySpreadConstraints {
		if tsc.WhenUnsatisfiable == corev1.ScheduleAnyway {
			sel, err := metav1.LabelSelectorAsSelector(tsc.LabelSelector)
			if err == nil {
				out = append(out, spreadConstraint{TopologySpreadConstraint: tsc, selector: sel})
			}
		}
	}
	if len(c.pod.Spec.TopologySpreadConstraints) > 0 {
		return out
	}
	owner := metav1.GetControllerOf(c.pod)
	if owner == nil {
		return nil
	}
	sel := labels.SelectorFromSet(c.pod.Labels)
	for _, d := range []struct {
		key  string
		skew int32
	}{{corev1.LabelHostname, 3}, {corev1.LabelTopologyZone, 5}} {
		out = append(out, spreadConstraint{TopologySpreadConstraint: corev1.TopologySpreadConstraint{TopologyKey: d.key, MaxSkew: d.skew}, selector: sel})
	}
	return out
}

// preferredPodAffinity sums the weights of the pod's preferred affinity
// terms with pods in the node's domain, less those of its preferred
// anti-affinity.
func (c *cycle) preferredPodAffinity(ni *nodeInfo) int64 {
	a := c.pod.Spec.Affinity
	if a == nil {
		return 0
	}
	var score int64
	weigh := func(weighted []corev1.WeightedPodAffinityTerm, sign int64) {
		for _, w := range weighted {
			t := terms([]corev1.PodAffinityTerm{w.PodAffinityTerm}, c.pod.Namespace, c.snap.namespaces)[0]
			if v, ok := ni.node.Labels[t.key]; ok && c.domainHas(t.key, v, t.matches) {
				score += sign * int64(w.Weight)
			}
		}
	}
	if a.PodAffinity != nil {
		weigh(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution, 1)
	}
	if a.PodAntiAffinity != nil {
		weigh(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, -1)
	}
	return score
}
