package scheduler

// PodTopologySpread and InterPodAffinity, the filters that count the pods
// already placed in each topology domain.

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// spreadConstraint is a DoNotSchedule constraint with its counts per
// domain (the values of its topology key on eligible nodes).
type spreadConstraint struct {
	corev1.TopologySpreadConstraint
	selector labels.Selector
	counts   map[string]int
	selfHit  int // 1 when the pod matches its own selector
}

// spreadConstraints counts, for each of the pod's DoNotSchedule
// constraints, the matching pods of its namespace in each domain of the
// nodes that have every constraint's key and match the pod's required
// node affinity (the default nodeAffinityPolicy: Honor; taints are
// ignored, the default nodeTaintsPolicy).
func spreadConstraints(pod *corev1.Pod, snap *snapshot) []spreadConstraint {
	var out []spreadConstraint
	for _, tsc := range pod.Spec.TopologySpreadConstraints {
		if tsc.WhenUnsatisfiable != corev1.DoNotSchedule {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(tsc.LabelSelector)
		if err != nil {
			sel = labels.Nothing()
		}
		sc := spreadConstraint{TopologySpreadConstraint: tsc, selector: sel, counts: map[string]int{}}
		if sel.Matches(labels.Set(pod.Labels)) {
			sc.selfHit = 1
		}
		out = append(out, sc)
	}
	required := nodeaffinity.GetRequiredNodeAffinity(pod)
	for _, ni := range snap.nodes {
		if ok, _ := required.Match(ni.node); !ok || !hasKeys(ni.node, out) {
			continue
		}
		for i := range out {
			value := ni.node.Labels[out[i].TopologyKey]
			out[i].counts[value] += countMatching(ni.pods, pod.Namespace, out[i].selector)
		}
	}
	return out
}

func hasKeys(n *corev1.Node, constraints []spreadConstraint) bool {
	for _, c := range constraints {
		if _, ok := n.Labels[c.TopologyKey]; !ok {
			return false
		}
	}
	return true
}

func countMatching(pods []*corev1.Pod, ns string, sel labels.Selector) int {
	n := 0
	for _, p := range pods {
		if p.Namespace == ns && p.DeletionTimestamp == nil && sel.Matches(labels.Set(p.Labels)) {
			n++
		}
	}
	return n
}

// topologySpread: placing the pod on the node keeps every DoNotSchedule
// constraint's skew within maxSkew.
func (c *cycle) topologySpread(ni *nodeInfo) *status {
	for _, sc := range c.spread {
		value, ok := ni.node.Labels[sc.TopologyKey]
		if !ok {
			return reject(unresolvable, "node(s) didn't match pod topology spread constraints (missing required label)")
		}
		minCount := -1
		for _, n := range sc.counts {
			if minCount < 0 || n < minCount {
				minCount = n
			}
		}
		if minCount < 0 || (sc.MinDomains != nil && int32(len(sc.counts)) < *sc.MinDomains) {
			minCount = 0
		}
		if sc.counts[value]+sc.selfHit-minCount > int(sc.MaxSkew) {
			return reject(unschedulable, "node(s) didn't match pod topology spread constraints")
		}
	}
	return nil
}

// affinityTerm is a pod affinity term with its namespaces and selector
// resolved.
type affinityTerm struct {
	namespaces map[string]bool
	selector   labels.Selector
	key        string
}

// terms resolves terms of a pod in namespace ns: their namespaces (listed,
// selected, or the pod's own when neither is given) and selectors.
func terms(ts []corev1.PodAffinityTerm, ns string, namespaceLabels map[string]map[string]string) []affinityTerm {
	var out []affinityTerm
	for _, t := range ts {
		at := affinityTerm{namespaces: map[string]bool{}, key: t.TopologyKey}
		sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
		if err != nil || t.LabelSelector == nil {
			sel = labels.Nothing()
		}
		at.selector = sel
		for _, n := range t.Namespaces {
			at.namespaces[n] = true
		}
		if t.NamespaceSelector != nil {
			nsSel, err := metav1.LabelSelectorAsSelector(t.NamespaceSelector)
			for name, l := range namespaceLabels {
				if err == nil && nsSel.Matches(labels.Set(l)) {
					at.namespaces[name] = true
				}
			}
		}
		if len(t.Namespaces) == 0 && t.NamespaceSelector == nil {
			at.namespaces[ns] = true
		}
		out = append(out, at)
	}
	return out
}

func (t affinityTerm) matches(p *corev1.Pod) bool {
	return t.namespaces[p.Namespace] && t.selector.Matches(labels.Set(p.Labels))
}

// interPodAffinity: the node's domains hold pods the pod's required
// affinity wants and none its anti-affinity refuses, and no pod already
// placed refuses it there.
func (c *cycle) interPodAffinity(ni *nodeInfo) *status {
	if len(c.affinity) > 0 && !c.affinityHolds(ni) {
		return reject(unresolvable, "node(s) didn't match pod affinity rules")
	}
	for _, t := range c.antiAffinity {
		if v, ok := ni.node.Labels[t.key]; ok && c.domainHas(t.key, v, t.matches) {
			return reject(unschedulable, "node(s) didn't match pod anti-affinity rules")
		}
	}
	for key, values := range c.refused {
		if v, ok := ni.node.Labels[key]; ok && values[v] {
			return reject(unschedulable, "node(s) didn't satisfy existing pods anti-affinity rules")
		}
	}
	return nil
}

// affinityHolds: for every term, the node's domain has a pod matching all
// of the pod's terms; or no pod anywhere does and the pod matches its own
// terms (the first of a group that wants to be together).
func (c *cycle) affinityHolds(ni *nodeInfo) bool {
	matchesAll := func(p *corev1.Pod) bool {
		for _, t := range c.affinity {
			if !t.matches(p) {
				return false
			}
		}
		return true
	}
	for _, t := range c.affinity {
		if _, ok := ni.node.Labels[t.key]; !ok {
			return false
		}
	}
	anywhere := false
	for _, other := range c.snap.nodes {
		for _, p := range other.pods {
			anywhere = anywhere || matchesAll(p)
		}
	}
	if !anywhere {
		return matchesAll(c.pod)
	}
	for _, t := range c.affinity {
		if !c.domainHas(t.key, ni.node.Labels[t.key], matchesAll) {
			return false
		}
	}
	return true
}

// domainHas: a node whose key label is value holds a pod that match
// accepts.
func (c *cycle) domainHas(key, value string, match func(*corev1.Pod) bool) bool {
	for _, ni := range c.snap.nodes {
		if v, ok := ni.node.Labels[key]; !ok || v != value {
			continue
		}
		for _, p := range ni.pods {
			if match(p) {
				return true
			}
		}
	}
	return false
}

// refusedDomains are the domains where placed pods' required
// anti-affinity refuses pod: topology key -> values.
func refusedDomains(pod *corev1.Pod, snap *snapshot) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, pl := range snap.antiAffine {
		p := pl.pod
		for _, t := range terms(p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, p.Namespace, snap.namespaces) {
			if v, ok := pl.node.node.Labels[t.key]; ok && t.matches(pod) {
				if out[t.key] == nil {
					out[t.key] = map[string]bool{}
				}
				out[t.key][v] = true
			}
		}
	}
	return out
}
