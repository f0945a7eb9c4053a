package core

import (
	"context"
	"fmt"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/internal/podqos"
	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/internal/podspec"
	"github.com/kubeembed/apiserver/providers/internal/validation"
	"github.com/kubeembed/apiserver/providers/registry"
)

// podFields are the field selectors kube-apiserver supports for pods.
var podFields = []string{
	"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork",
	"status.phase", "status.podIP", "status.nominatedNodeName",
}

func podFieldSet(p *corev1.Pod) fields.Set {
	podIP := ""
	if len(p.Status.PodIPs) > 0 {
		podIP = p.Status.PodIPs[0].IP
	}
	return fields.Set{
		"spec.nodeName": p.Spec.NodeName, "spec.restartPolicy": string(p.Spec.RestartPolicy),
		"spec.schedulerName": p.Spec.SchedulerName, "spec.serviceAccountName": p.Spec.ServiceAccountName,
		"spec.hostNetwork": fmt.Sprint(p.Spec.HostNetwork), "status.phase": string(p.Status.Phase),
		"status.podIP": podIP, "status.nominatedNodeName": p.Status.NominatedNodeName,
	}
}

// defaultPod applies the pod defaults: the spec's, enableServiceLinks (which
// kube-apiserver 1.37 defaults on pods only, not in workload templates), and
// requests from limits where requests are not set.
func defaultPod(p *corev1.Pod) {
	podspec.DefaultSpec(&p.Spec)
	if p.Spec.EnableServiceLinks == nil {
		p.Spec.EnableServiceLinks = ptr.To(corev1.DefaultEnableServiceLinks)
	}
	for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range list {
			r := &list[i].Resources
			for name, limit := range r.Limits {
				if _, ok := r.Requests[name]; !ok {
					if r.Requests == nil {
						r.Requests = corev1.ResourceList{}
					}
					r.Requests[name] = limit.DeepCopy()
				}
			}
		}
	}
}

var pods = registry.Kind[*corev1.Pod]{
	Default:      defaultPod,
	GroupVersion: corev1.SchemeGroupVersion, Resource: "pods", Singular: "pod",
	ShortNames: []string{"po"}, Categories: []string{"all"}, Namespaced: true,
	NewObj:  func() runtime.Object { return &corev1.Pod{} },
	NewList: func() runtime.Object { return &corev1.PodList{} },
	// DELETE answers with the pod, as kube-apiserver: with its deletion
	// timestamp when the deletion is graceful.
	ReturnDeleted: true,
	GenerationOf:  func(p *corev1.Pod) any { return p.Spec },
	PrepareCreate: func(_ context.Context, p *corev1.Pod) {
		podspec.DropDisabledFields(&p.Spec, nil)
		podspec.DefaultPodLevelResources(p)
		p.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: podqos.Class(p)}
		if len(p.Spec.SchedulingGates) > 0 {
			// As kube-apiserver's strategy: a gated pod says why it waits.
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
				Reason: corev1.PodReasonSchedulingGated, Message: "Scheduling is blocked due to non-empty scheduling gates",
				LastTransitionTime: metav1.Now()}}
		}
	},
	// A client that does not know pod-level resources (one that dropped
	// the field) keeps them, as kube-apiserver's strategy does; fields of
	// disabled features are dropped unless the pod had them.
	PrepareUpdate: func(p, old *corev1.Pod) {
		if p.Spec.Resources == nil && old.Spec.Resources != nil {
			p.Spec.Resources = old.Spec.Resources.DeepCopy()
		}
		podspec.DropDisabledFields(&p.Spec, &old.Spec)
	},
	Validate: func(p *corev1.Pod) field.ErrorList {
		spec := field.NewPath("spec")
		return append(podspec.ValidateSpec(&p.Spec, spec), podspec.ValidatePodContainers(&p.Spec, spec)...)
	},
	ValidateUpdate: func(p, old *corev1.Pod) field.ErrorList { return validatePodSpecUpdate(&p.Spec, &old.Spec) },
	Status:         true, StatusWritesLabels: true,
	// /status never changes who owns the pod or its deletion.
	StatusResetPaths: []string{"metadata.deletionTimestamp", "metadata.ownerReferences"},
	PrepareStatusUpdate: func(p, old *corev1.Pod) {
		p.DeletionTimestamp = old.DeletionTimestamp
		p.DeletionGracePeriodSeconds = old.DeletionGracePeriodSeconds
		p.OwnerReferences = old.OwnerReferences
	},
	ValidateStatus: validatePodStatus,
	NoAge:          true, Columns: podColumns(), RowConditions: podRowConditions,
	Fields: podFieldSet, FieldNames: podFields,
	Customize: podSubresources,
}

// updatableContainers refuses an update that adds or removes containers,
// as kube-apiserver's ValidateContainerUpdates, before anything else of
// the spec is compared.
func updatableContainers(spec, old *corev1.PodSpec) field.ErrorList {
	if len(spec.Containers) != len(old.Containers) {
		return field.ErrorList{field.Forbidden(field.NewPath("spec", "containers"), "pod updates may not add or remove containers")}
	}
	if len(spec.InitContainers) != len(old.InitContainers) {
		return field.ErrorList{field.Forbidden(field.NewPath("spec", "initContainers"), "pod updates may not add or remove containers")}
	}
	return nil
}

// activeDeadlineUpdate: spec.activeDeadlineSeconds may be set, or lowered,
// never raised or unset. An out-of-range or raised value stops the
// update's checks there (stop), an unset one does not, as in
// ValidatePodUpdate.
func activeDeadlineUpdate(spec, old *corev1.PodSpec) (errs field.ErrorList, stop bool) {
	path := field.NewPath("spec", "activeDeadlineSeconds")
	switch cur, was := spec.ActiveDeadlineSeconds, old.ActiveDeadlineSeconds; {
	case cur == nil && was != nil:
		return field.ErrorList{field.Invalid(path, cur, "must not update from a positive integer to nil value")}, false
	case cur == nil:
		return nil, false
	case *cur < 0 || *cur > math.MaxInt32:
		return field.ErrorList{field.Invalid(path, *cur, utilvalidation.InclusiveRangeError(0, math.MaxInt32))}, true
	case was != nil && *was < *cur:
		return field.ErrorList{field.Invalid(path, *cur, "must be less than or equal to previous value")}, true
	}
	return nil, false
}

// podSubresources makes deletion graceful and adds the subresources with
// logic of their own.
func podSubresources(cfg providers.Config, store *registry.Store, s map[string]rest.Storage) error {
	store.Store.DeleteStrategy = &podDeleteStrategy{Strategy: store.Strategy}
	pdbs, err := registry.Kind[*policyv1.PodDisruptionBudget]{
		GroupVersion: policyv1.SchemeGroupVersion, Resource: "poddisruptionbudgets", Singular: "poddisruptionbudget",
		Namespaced: true, NameValidation: registry.PathSegmentName,
		NewObj:  func() runtime.Object { return &policyv1.PodDisruptionBudget{} },
		NewList: func() runtime.Object { return &policyv1.PodDisruptionBudgetList{} },
	}.Store(cfg)
	if err != nil {
		return err
	}
	ephemeral, resize := podSubresourceStrategies(store.Strategy)
	s["pods/binding"] = &bindingREST{pods: store}
	s["bindings"] = &legacyBindingREST{bindingREST{pods: store}}
	s["pods/eviction"] = &evictionREST{pods: store, pdbs: pdbs}
	s["pods/ephemeralcontainers"] = registry.Subresource(store, ephemeral, ephemeral)
	s["pods/resize"] = registry.Subresource(store, resize, resize)
	return addPodConnect(cfg, store, s)
}

func validatePodStatus(p, old *corev1.Pod) field.ErrorList {
	var errs field.ErrorList
	switch p.Status.Phase {
	case "", corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown:
	default:
		errs = append(errs, field.NotSupported(field.NewPath("status", "phase"), p.Status.Phase,
			[]string{string(corev1.PodPending), string(corev1.PodRunning), string(corev1.PodSucceeded), string(corev1.PodFailed), string(corev1.PodUnknown)}))
	}
	if terminal(old.Status.Phase) && p.Status.Phase != old.Status.Phase {
		errs = append(errs, field.Forbidden(field.NewPath("status", "phase"), fmt.Sprintf("cannot transition from terminal phase %s to %s", old.Status.Phase, p.Status.Phase)))
	}
	return errs
}

func terminal(p corev1.PodPhase) bool { return p == corev1.PodSucceeded || p == corev1.PodFailed }

// validatePodSpecUpdate allows only what kube-apiserver allows in a pod's
// spec after creation.
func validatePodSpecUpdate(spec, old *corev1.PodSpec) field.ErrorList {
	if errs := updatableContainers(spec, old); errs != nil {
		return errs
	}
	deadline, stop := activeDeadlineUpdate(spec, old)
	if stop {
		return deadline
	}
	a, b := spec.DeepCopy(), old.DeepCopy()
	for i := range a.Containers {
		if i < len(b.Containers) {
			a.Containers[i].Image = b.Containers[i].Image
		}
	}
	for i := range a.InitContainers {
		if i < len(b.InitContainers) {
			a.InitContainers[i].Image = b.InitContainers[i].Image
		}
	}
	a.ActiveDeadlineSeconds = b.ActiveDeadlineSeconds
	// Tolerations may only be added to.
	if len(a.Tolerations) >= len(b.Tolerations) && apiequality.Semantic.DeepEqual(a.Tolerations[:len(b.Tolerations)], b.Tolerations) {
		a.Tolerations = b.Tolerations
	}
	errs := append(deadline, onlyDeletedSchedulingGates(a.SchedulingGates, b.SchedulingGates)...)
	a.SchedulingGates = b.SchedulingGates
	if b.TerminationGracePeriodSeconds != nil && *b.TerminationGracePeriodSeconds < 0 &&
		a.TerminationGracePeriodSeconds != nil && *a.TerminationGracePeriodSeconds == 1 {
		a.TerminationGracePeriodSeconds = b.TerminationGracePeriodSeconds
	}
	if len(b.SchedulingGates) > 0 {
		errs = append(errs, gatedPodPlacement(a, b)...)
	}
	if apiequality.Semantic.DeepEqual(a, b) {
		return errs
	}
	return append(errs, field.Forbidden(field.NewPath("spec"), "pod updates may not change fields other than "+
		"`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "+
		"(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)\n"+
		validation.Diff(*b, *a)))
}

// onlyDeletedSchedulingGates refuses gates an update adds: they may only
// be removed.
func onlyDeletedSchedulingGates(gates, old []corev1.PodSchedulingGate) field.ErrorList {
	var errs field.ErrorList
	for i, g := range gates {
		if !slices.ContainsFunc(old, func(o corev1.PodSchedulingGate) bool { return o.Name == g.Name }) {
			errs = append(errs, field.Forbidden(field.NewPath("spec", "schedulingGates").Index(i).Child("name"),
				fmt.Sprintf("only deletion is allowed, but found new scheduling gate '%s'", g.Name)))
		}
	}
	return errs
}

// gatedPodPlacement lets an update of a pod still gated add to its node
// selector, and set a required node affinity where it had none (as
// kube-apiserver; narrowing an existing one's terms is refused here, which
// kube-apiserver allows). It carries what it allows over into a.
func gatedPodPlacement(a, b *corev1.PodSpec) field.ErrorList {
	var errs field.ErrorList
	for k, v := range b.NodeSelector {
		if w, ok := a.NodeSelector[k]; !ok || v != w {
			errs = append(errs, field.Invalid(field.NewPath("spec", "nodeSelector"), a.NodeSelector,
				"only additions to spec.nodeSelector are allowed (no mutations or deletions)"))
			break
		}
	}
	a.NodeSelector = b.NodeSelector
	var old *corev1.NodeAffinity
	if b.Affinity != nil {
		old = b.Affinity.NodeAffinity
	}
	if old != nil && old.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		return errs
	}
	switch {
	case a.Affinity == nil:
		if old != nil {
			a.Affinity = &corev1.Affinity{NodeAffinity: old}
		}
	case b.Affinity == nil && a.Affinity.PodAffinity == nil && a.Affinity.PodAntiAffinity == nil:
		a.Affinity = nil
	default:
		a.Affinity.NodeAffinity = old
	}
	return errs
}

// podDeleteStrategy makes pod deletion graceful as kube-apiserver does: a
// pod bound to a node and not finished is kept with a deletionTimestamp for
// its grace period (there is no kubelet here to confirm, so it stays until
// deleted with grace period 0); others go at once.
type podDeleteStrategy struct{ *registry.Strategy }

var _ rest.RESTGracefulDeleteStrategy = (*podDeleteStrategy)(nil)

func (s *podDeleteStrategy) CheckGracefulDelete(_ context.Context, obj runtime.Object, options *metav1.DeleteOptions) bool {
	if options == nil {
		return false
	}
	p := obj.(*corev1.Pod)
	period := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if p.Spec.TerminationGracePeriodSeconds != nil {
		period = *p.Spec.TerminationGracePeriodSeconds
	}
	if options.GracePeriodSeconds != nil {
		period = *options.GracePeriodSeconds
	}
	if p.Spec.NodeName == "" || terminal(p.Status.Phase) {
		period = 0 // nothing runs it: delete now
	}
	if period < 0 {
		period = 1
	}
	options.GracePeriodSeconds = &period
	return true
}
