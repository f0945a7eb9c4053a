// Package quota holds the quota evaluators of the core resources (pods,
// services, persistent volume claims, DRA resource claims, and the object
// counts with legacy names), as kube-apiserver and kube-controller-manager
// configure them.
// The ResourceQuota admission plugin and the resource quota controller
// both take their configuration from here; k8s.io/apiserver publishes the
// generic evaluators and the plugin, not these.
package quota

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/utils/clock"
)

// legacyCounts are the object counts quota knew before count/<resource>,
// by their old names.
var legacyCounts = map[schema.GroupResource]corev1.ResourceName{
	corev1.Resource("configmaps"):             corev1.ResourceConfigMaps,
	corev1.Resource("resourcequotas"):         corev1.ResourceQuotas,
	corev1.Resource("replicationcontrollers"): corev1.ResourceReplicationControllers,
	corev1.Resource("secrets"):                corev1.ResourceSecrets,
}

// Ignored are the resources quota never counts: those never stored, and
// events.
func Ignored() map[schema.GroupResource]struct{} {
	return map[schema.GroupResource]struct{}{
		corev1.Resource("bindings"):                                            {},
		corev1.Resource("componentstatuses"):                                   {},
		{Group: "authentication.k8s.io", Resource: "tokenreviews"}:             {},
		{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"}:       {},
		{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}:      {},
		{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}:  {},
		{Group: "authorization.k8s.io", Resource: "localsubjectaccessreviews"}: {},
		{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"}:   {},
		corev1.Resource("events"):                                              {},
		{Group: eventsv1.GroupName, Resource: "events"}:                        {},
	}
}

// Configuration returns the quota configuration whose evaluators list
// objects with listers (nil for admission, which never lists: it charges
// each request against the quota's recorded usage); the resource claim
// evaluator reads device classes, pods and claims from dra.
func Configuration(listers quota.ListerForResourceFunc, clk clock.PassiveClock, dra DRA) quota.Configuration {
	evaluators := []quota.Evaluator{
		&pods{list: generic.ListResourceUsingListerFunc(listers, corev1.SchemeGroupVersion.WithResource("pods")), clock: clk},
		&services{list: generic.ListResourceUsingListerFunc(listers, corev1.SchemeGroupVersion.WithResource("services"))},
		&claims{list: generic.ListResourceUsingListerFunc(listers, corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"))},
		&resourceClaims{list: generic.ListResourceUsingListerFunc(listers, resourcev1.SchemeGroupVersion.WithResource("resourceclaims")), dra: dra, clock: clk},
	}
	for gr, name := range legacyCounts {
		evaluators = append(evaluators, generic.NewObjectCountEvaluator(gr,
			generic.ListResourceUsingListerFunc(listers, corev1.SchemeGroupVersion.WithResource(gr.Resource)), name))
	}
	return generic.NewConfiguration(evaluators, Ignored())
}

// uncovered returns the limited scopes no quota scope of the same name
// covers: an object matching a limited scope must be charged to a quota
// that names it.
func uncovered(limited, matched []corev1.ScopedResourceSelectorRequirement) []corev1.ScopedResourceSelectorRequirement {
	out := []corev1.ScopedResourceSelectorRequirement{}
	for _, l := range limited {
		covered := false
		for _, m := range matched {
			covered = covered || m.ScopeName == l.ScopeName
		}
		if !covered {
			out = append(out, l)
		}
	}
	return out
}

// matchingScopes returns the scopes item matches.
func matchingScopes(item runtime.Object, scopes []corev1.ScopedResourceSelectorRequirement, matches func(corev1.ScopedResourceSelectorRequirement, runtime.Object) (bool, error)) ([]corev1.ScopedResourceSelectorRequirement, error) {
	out := []corev1.ScopedResourceSelectorRequirement{}
	for _, s := range scopes {
		ok, err := matches(s, item)
		if err != nil {
			return []corev1.ScopedResourceSelectorRequirement{}, fmt.Errorf("error on matching scope %v: %w", s, err)
		}
		if ok {
			out = append(out, s)
		}
	}
	return out, nil
}

// selects reports whether the scope selector s matches the label set a
// scope value makes ({scopeName: value}, or none).
func selects(s corev1.ScopedResourceSelectorRequirement, values ...string) (bool, error) {
	selector, err := scopeSelector(s)
	if err != nil {
		return false, err
	}
	if len(values) == 0 {
		return selector.Matches(labels.Set(nil)), nil
	}
	for _, v := range values {
		if selector.Matches(labels.Set{string(s.ScopeName): v}) {
			return true, nil
		}
	}
	return false, nil
}

// scopeSelector is the label selector a scope selector requirement means,
// its scope name the label key.
func scopeSelector(s corev1.ScopedResourceSelectorRequirement) (labels.Selector, error) {
	ops := map[corev1.ScopeSelectorOperator]selection.Operator{
		corev1.ScopeSelectorOpIn: selection.In, corev1.ScopeSelectorOpNotIn: selection.NotIn,
		corev1.ScopeSelectorOpExists: selection.Exists, corev1.ScopeSelectorOpDoesNotExist: selection.DoesNotExist,
	}
	op, ok := ops[s.Operator]
	if !ok {
		return nil, fmt.Errorf("%q is not a valid scope selector operator", s.Operator)
	}
	r, err := labels.NewRequirement(string(s.ScopeName), op, s.Values)
	if err != nil {
		return nil, err
	}
	return labels.NewSelector().Add(*r), nil
}

// UsageChanged reports whether an update of an object of resource gr can
// have lowered what it uses, so the quota controller recalculates: a pod
// that finished, was resized or changed its termination scope; a service
// that changed type; a claim whose allocation or attributes classes
// changed. Other updates never change usage.
func UsageChanged(gr schema.GroupResource, old, cur any) bool {
	switch gr {
	case corev1.Resource("pods"):
		o, ok1 := old.(*corev1.Pod)
		n, ok2 := cur.(*corev1.Pod)
		if !ok1 || !ok2 {
			return false
		}
		now := time.Now()
		return resized(o, n) || terminating(o) != terminating(n) || (charged(o, now) && !charged(n, now))
	case corev1.Resource("services"):
		o, ok1 := old.(*corev1.Service)
		n, ok2 := cur.(*corev1.Service)
		return ok1 && ok2 && serviceQuotaType(o) != serviceQuotaType(n)
	case corev1.Resource("persistentvolumeclaims"):
		o, ok1 := old.(*corev1.PersistentVolumeClaim)
		n, ok2 := cur.(*corev1.PersistentVolumeClaim)
		return ok1 && ok2 && replenishes(n, o)
	}
	return false
}
