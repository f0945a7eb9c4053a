package daemonset

// Where a DaemonSet's pods belong (upstream's nodeShouldRunDaemonPod and
// predicates) and how a daemon pod is made for a node (util's
// CreatePodTemplate, AddOrUpdateDaemonPodTolerations and
// ReplaceDaemonSetPodNodeNameNodeAffinity).

import (
	"errors"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// The labels daemon pods carry, and the DaemonSet annotation the server
// keeps the template generation in.
const (
	templateGenerationLabel      = "pod-template-generation"
	templateGenerationAnnotation = "deprecated.daemonset.template.generation"
)

// daemonTolerations are the tolerations every daemon pod gets, in
// upstream's order; network-unavailable only for host network pods.
func daemonTolerations(hostNetwork bool) []corev1.Toleration {
	t := []corev1.Toleration{
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	}
	if hostNetwork {
		t = append(t, corev1.Toleration{Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoSchedule})
	}
	return t
}

// addDaemonTolerations adds each daemon toleration to spec as upstream's
// AddOrUpdateTolerationInPodSpec: none is changed when one that matches it
// (same key, operator, value and effect) is equal to it; otherwise those
// that match are replaced by it, or it is appended.
func addDaemonTolerations(spec *corev1.PodSpec) {
	for _, want := range daemonTolerations(spec.HostNetwork) {
		var next []corev1.Toleration
		found, equal := false, false
		for _, have := range spec.Tolerations {
			if want.MatchToleration(&have) {
				found, equal = true, equal || apiequality.Semantic.DeepEqual(want, have)
				next = append(next, want)
				continue
			}
			next = append(next, have)
		}
		switch {
		case equal:
			continue
		case !found:
			next = append(next, want)
		}
		spec.Tolerations = next
	}
}

// placement is what decides a DaemonSet's nodes, built once per sync.
type placement struct {
	ds          *appsv1.DaemonSet
	tolerations []corev1.Toleration
	affinity    nodeaffinity.RequiredNodeAffinity
}

func placementOf(ds *appsv1.DaemonSet) placement {
	spec := *ds.Spec.Template.Spec.DeepCopy()
	addDaemonTolerations(&spec)
	return placement{ds: ds, tolerations: spec.Tolerations,
		affinity: nodeaffinity.NewRequiredNodeAffinity(ds.Spec.Template.Spec.NodeSelector, ds.Spec.Template.Spec.Affinity)}
}

func noScheduleOrExecute(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoExecute || t.Effect == corev1.TaintEffectNoSchedule
}

func noExecute(t *corev1.Taint) bool { return t.Effect == corev1.TaintEffectNoExecute }

// shouldRun reports whether a daemon pod should be created on node
// (shouldRun) and whether one there should stay (shouldContinue).
func (p placement) shouldRun(node *corev1.Node) (shouldRun, shouldContinue bool) {
	if name := p.ds.Spec.Template.Spec.NodeName; name != "" && name != node.Name {
		return false, false
	}
	if fits, _ := p.affinity.Match(node); !fits { // parse errors ignored, as upstream
		return false, false
	}
	logger := klog.Background()
	if _, untolerated := v1helper.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, p.tolerations, noScheduleOrExecute, false); !untolerated {
		return true, true
	}
	_, untolerated := v1helper.FindMatchingUntoleratedTaint(logger, node.Spec.Taints, p.tolerations, noExecute, false)
	return false, !untolerated
}

// templateGeneration is the DaemonSet's template generation annotation;
// nil when absent or not a number.
func templateGeneration(ds *appsv1.DaemonSet) *int64 {
	v, ok := ds.Annotations[templateGenerationAnnotation]
	if !ok {
		return nil
	}
	g, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil
	}
	return &g
}

// isUpdated: the pod carries the current hash or template generation.
func isUpdated(pod *corev1.Pod, hash string, generation *int64) bool {
	return hash != "" && pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == hash ||
		generation != nil && pod.Labels[templateGenerationLabel] == strconv.FormatInt(*generation, 10)
}

// newPod is the daemon pod of ds for node, as upstream creates it.
func newPod(ds *appsv1.DaemonSet, hash, node string) (*corev1.Pod, error) {
	t := ds.Spec.Template.DeepCopy()
	addDaemonTolerations(&t.Spec)
	podLabels := make(map[string]string, len(t.Labels)+2)
	for k, v := range t.Labels {
		podLabels[k] = v
	}
	if g := templateGeneration(ds); g != nil {
		podLabels[templateGenerationLabel] = strconv.FormatInt(*g, 10)
	}
	if hash != "" {
		podLabels[appsv1.DefaultDaemonSetUniqueLabelKey] = hash
	}
	t.Spec.Affinity = nodeNameAffinity(t.Spec.Affinity, node)
	if len(podLabels) == 0 {
		return nil, errors.New("unable to create pods, no labels")
	}
	prefix := ds.Name + "-"
	if len(validation.IsDNS1123Subdomain(ds.Name+"a")) != 0 {
		prefix = ds.Name
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix, Namespace: ds.Namespace, Labels: podLabels,
		Annotations: t.Annotations, Finalizers: t.Finalizers, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: controllerKind.GroupVersion().String(), Kind: controllerKind.Kind, Name: ds.Name, UID: ds.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}}, Spec: t.Spec}, nil
}

// nodeNameAffinity makes affinity's required node affinity select node by
// metadata.name, replacing the terms it had (upstream's
// ReplaceDaemonSetPodNodeNameNodeAffinity).
func nodeNameAffinity(affinity *corev1.Affinity, node string) *corev1.Affinity {
	sel := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
		Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}
	switch {
	case affinity == nil:
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: sel}}
	case affinity.NodeAffinity == nil:
		affinity.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: sel}
	case affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil:
		affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = sel
	default:
		affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = sel.NodeSelectorTerms
	}
	return affinity
}

// targetNode is the node a daemon pod is for: its nodeName, or before it
// is bound, the metadata.name its required node affinity selects.
func targetNode(pod *corev1.Pod) (string, error) {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName, nil
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return "", fmt.Errorf("no spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution for pod %s/%s", pod.Namespace, pod.Name)
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, req := range term.MatchFields {
			if req.Key != metav1.ObjectNameField || req.Operator != corev1.NodeSelectorOpIn {
				continue
			}
			if len(req.Values) != 1 {
				return "", fmt.Errorf("the matchFields value of '%s' is not unique for pod %s/%s", metav1.ObjectNameField, pod.Namespace, pod.Name)
			}
			return req.Values[0], nil
		}
	}
	return "", fmt.Errorf("no node name found for pod %s/%s", pod.Namespace, pod.Name)
}
