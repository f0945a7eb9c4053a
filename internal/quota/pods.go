package quota

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/admission"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/clock"

	"github.com/kubeembed/apiserver/internal/podqos"
)

var podCount = generic.ObjectCountQuotaResourceNameFor(corev1.Resource("pods"))

// podResources are the names the pod evaluator answers for, beside the
// hugepages and extended resource requests.
var podResources = []corev1.ResourceName{
	podCount, corev1.ResourcePods,
	corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage,
	corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceRequestsEphemeralStorage,
	corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourceLimitsEphemeralStorage,
}

// constrained are the names a quota can require every container to set.
var constrained = sets.New[corev1.ResourceName](corev1.ResourceCPU, corev1.ResourceMemory,
	corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory)

// pods evaluates pods: compute requests and limits of pods not yet
// terminal, by scope (Terminating, BestEffort, PriorityClass,
// CrossNamespacePodAffinity and their negations).
type pods struct {
	list  generic.ListFuncByNamespace
	clock clock.PassiveClock
}

var _ quota.Evaluator = &pods{}

func (*pods) GroupResource() schema.GroupResource { return corev1.Resource("pods") }

// Constraints requires each container to set what the quota limits (of cpu
// and memory), unless the pod sets pod-level resources.
func (*pods) Constraints(required []corev1.ResourceName, item runtime.Object) error {
	pod, ok := item.(*corev1.Pod)
	if !ok {
		return fmt.Errorf("expect *api.Pod or *v1.Pod, got %T", item)
	}
	if resourcehelper.IsPodLevelResourcesSet(pod) {
		return nil
	}
	want := sets.New(required...).Intersection(constrained)
	missing := map[corev1.ResourceName]sets.Set[string]{}
	for _, c := range slices.Concat(pod.Spec.Containers, pod.Spec.InitContainers) {
		has := sets.KeySet(computeUsage(c.Resources.Requests, c.Resources.Limits))
		for _, name := range want.Difference(has).UnsortedList() {
			if missing[name] == nil {
				missing[name] = sets.New[string]()
			}
			missing[name].Insert(c.Name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	var msgs []string
	for _, name := range sets.List(sets.KeySet(missing)) {
		msgs = append(msgs, fmt.Sprintf("%s for: %s", name, strings.Join(sets.List(missing[name]), ",")))
	}
	return fmt.Errorf("must specify %s", strings.Join(msgs, "; "))
}

// Handles: pods are charged when created, when their termination scope
// changes, and when resized.
func (*pods) Handles(a admission.Attributes) bool {
	switch a.GetSubresource() {
	case "":
		if a.GetOperation() == admission.Update {
			pod, ok1 := a.GetObject().(*corev1.Pod)
			old, ok2 := a.GetOldObject().(*corev1.Pod)
			if ok1 && ok2 && terminating(pod) != terminating(old) {
				return true
			}
		}
		return a.GetOperation() == admission.Create
	case "resize":
		return a.GetOperation() == admission.Update
	}
	return false
}

func (p *pods) Matches(q *corev1.ResourceQuota, item runtime.Object) (bool, error) {
	return generic.Matches(q, item, p.MatchingResources, podMatchesScope)
}

func (*pods) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	out := quota.Intersection(input, podResources)
	for _, name := range input {
		if quota.ContainsPrefix([]string{corev1.ResourceHugePagesPrefix, corev1.ResourceRequestsHugePagesPrefix}, name) ||
			extendedRequest(name) {
			out = append(out, name)
		}
	}
	return out
}

func (*pods) MatchingScopes(item runtime.Object, scopes []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return matchingScopes(item, scopes, podMatchesScope)
}

func (*pods) UncoveredQuotaScopes(limited, matched []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return uncovered(limited, matched), nil
}

// Usage is one pod, and its compute resources while it is not terminal.
func (p *pods) Usage(item runtime.Object) (corev1.ResourceList, error) {
	pod, ok := item.(*corev1.Pod)
	if !ok {
		return corev1.ResourceList{}, fmt.Errorf("expect *api.Pod or *v1.Pod, got %T", item)
	}
	out := corev1.ResourceList{podCount: *resource.NewQuantity(1, resource.DecimalSI)}
	if !charged(pod, p.clock.Now()) {
		return out, nil
	}
	opts := resourcehelper.PodResourcesOptions{UseStatusResources: true}
	return quota.Add(out, computeUsage(resourcehelper.PodRequests(pod, opts), resourcehelper.PodLimits(pod, opts))), nil
}

func (p *pods) UsageStats(options quota.UsageStatsOptions) (quota.UsageStats, error) {
	return generic.CalculateUsageStats(options, p.list, podMatchesScope, p.Usage)
}

// computeUsage names requests and limits as quota does: a pod, cpu and
// memory requests both bare and as requests.*, limits as limits.*, and
// hugepages and extended resource requests as requests.*.
func computeUsage(requests, limits corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		if q, ok := requests[r]; ok {
			out[r] = q
			out[corev1.DefaultResourceRequestsPrefix+r] = q
		}
		if q, ok := limits[r]; ok {
			out[corev1.ResourceName("limits.")+r] = q
		}
	}
	for name, q := range requests {
		if strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
			out[name] = q
			out[corev1.DefaultResourceRequestsPrefix+name] = q
		} else if extended(name) {
			out[corev1.DefaultResourceRequestsPrefix+name] = q
		}
	}
	return out
}

// podMatchesScope reports whether the pod is in the scope.
func podMatchesScope(s corev1.ScopedResourceSelectorRequirement, item runtime.Object) (bool, error) {
	pod, ok := item.(*corev1.Pod)
	if !ok {
		return false, fmt.Errorf("expect *api.Pod or *v1.Pod, got %T", item)
	}
	switch s.ScopeName {
	case corev1.ResourceQuotaScopeTerminating:
		return terminating(pod), nil
	case corev1.ResourceQuotaScopeNotTerminating:
		return !terminating(pod), nil
	case corev1.ResourceQuotaScopeBestEffort:
		return bestEffort(pod), nil
	case corev1.ResourceQuotaScopeNotBestEffort:
		return !bestEffort(pod), nil
	case corev1.ResourceQuotaScopePriorityClass:
		if s.Operator == corev1.ScopeSelectorOpExists {
			return pod.Spec.PriorityClassName != "", nil
		}
		if pod.Spec.PriorityClassName == "" {
			return selects(s)
		}
		return selects(s, pod.Spec.PriorityClassName)
	case corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		return crossNamespaceAffinity(pod), nil
	}
	return false, nil
}

// terminating: the pod has an active deadline.
func terminating(pod *corev1.Pod) bool {
	return pod.Spec.ActiveDeadlineSeconds != nil && *pod.Spec.ActiveDeadlineSeconds >= 0
}

func bestEffort(pod *corev1.Pod) bool {
	class := pod.Status.QOSClass
	if class == "" {
		class = podqos.Class(pod)
	}
	return class == corev1.PodQOSBestEffort
}

// charged: a pod's compute resources count until it has succeeded or
// failed, or its deletion's grace period is over.
func charged(pod *corev1.Pod, now time.Time) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil {
		end := pod.DeletionTimestamp.Add(time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second)
		return !now.After(end)
	}
	return true
}

func crossNamespaceAffinity(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	if a == nil {
		return false
	}
	var terms []corev1.PodAffinityTerm
	if a.PodAffinity != nil {
		terms = append(terms, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	if a.PodAntiAffinity != nil {
		terms = append(terms, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	return slices.ContainsFunc(terms, func(t corev1.PodAffinityTerm) bool {
		return len(t.Namespaces) != 0 || t.NamespaceSelector != nil
	})
}

// native: a resource in the kubernetes.io namespace (unprefixed names are).
func native(name corev1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || strings.Contains(string(name), corev1.ResourceDefaultNamespacePrefix)
}

// extended reports whether a pod's request is an extended resource (or a
// DRA device class's implicit one), which quota names requests.<name>.
func extended(name corev1.ResourceName) bool {
	if strings.HasPrefix(string(name), resourcev1.ResourceDeviceClassPrefix) {
		return true
	}
	if native(name) || strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+string(name))) == 0
}

// extendedRequest: a quota's requests.<extended resource>.
func extendedRequest(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix) &&
		(!native(name) || strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix+resourcev1.ResourceDeviceClassPrefix))
}

// resized: a container's actual resources changed (in-place resize).
func resized(old, cur *corev1.Pod) bool {
	changed := func(olds, curs []corev1.ContainerStatus) bool {
		for _, o := range olds {
			for _, c := range curs {
				if c.Name == o.Name && !apiequality.Semantic.DeepEqual(o.Resources, c.Resources) {
					return true
				}
			}
		}
		return false
	}
	return changed(old.Status.ContainerStatuses, cur.Status.ContainerStatuses) ||
		changed(old.Status.InitContainerStatuses, cur.Status.InitContainerStatuses)
}
