package namespace

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// conditionTypes are the namespace conditions the controller keeps, in the
// order kube-controller-manager writes them; each has its reason and
// message when nothing is wrong.
var conditionTypes = []struct {
	typ             corev1.NamespaceConditionType
	reason, message string
}{
	{corev1.NamespaceDeletionDiscoveryFailure, "ResourcesDiscovered", "All resources successfully discovered"},
	{corev1.NamespaceDeletionGVParsingFailure, "ParsedGroupVersions", "All legacy kube types successfully parsed"},
	{corev1.NamespaceDeletionContentFailure, "ContentDeleted", "All content successfully deleted, may be waiting on finalization"},
	{corev1.NamespaceContentRemaining, "ContentRemoved", "All content successfully removed"},
	{corev1.NamespaceFinalizersRemaining, "ContentHasNoFinalizers", "All content-preserving finalizers finished"},
}

// conditions are the failing conditions of one deletion pass.
type conditions struct {
	failing     []corev1.NamespaceCondition
	contentErrs []error
}

func (c *conditions) add(typ corev1.NamespaceConditionType, reason, message string) {
	c.failing = append(c.failing, corev1.NamespaceCondition{Type: typ, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.Now(), Reason: reason, Message: message})
}

func (c *conditions) discoveryFailed(err error) {
	msg := err.Error()
	var derr *discovery.ErrGroupDiscoveryFailed
	if errors.As(err, &derr) {
		msg = fmt.Sprintf("Discovery failed for some groups, %d failing: %v", len(derr.Groups), err)
	}
	c.add(corev1.NamespaceDeletionDiscoveryFailure, "DiscoveryFailed", msg)
}

func (c *conditions) groupVersionFailed(err error) {
	c.add(corev1.NamespaceDeletionGVParsingFailure, "GroupVersionParsingFailed", err.Error())
}

func (c *conditions) contentFailed(err error) { c.contentErrs = append(c.contentErrs, err) }

// contentTotals sets the remaining-content conditions from what is left.
func (c *conditions) contentTotals(byResource map[schema.GroupVersionResource]int, byFinalizer map[string]int) {
	if len(byResource) > 0 {
		var msgs []string
		for gvr, n := range byResource {
			msgs = append(msgs, fmt.Sprintf("%s.%s has %d resource instances", gvr.Resource, gvr.Group, n))
		}
		sort.Strings(msgs)
		c.add(corev1.NamespaceContentRemaining, "SomeResourcesRemain", "Some resources are remaining: "+strings.Join(msgs, ", "))
	}
	if len(byFinalizer) > 0 {
		var msgs []string
		for f, n := range byFinalizer {
			msgs = append(msgs, fmt.Sprintf("%s in %d resource instances", f, n))
		}
		sort.Strings(msgs)
		c.add(corev1.NamespaceFinalizersRemaining, "SomeFinalizersRemain",
			"Some content in the namespace has finalizers remaining: "+strings.Join(msgs, ", "))
	}
}

// apply writes the pass's conditions into status (the healthy variant of
// each that is not failing) and reports whether anything changed.
func (c *conditions) apply(status *corev1.NamespaceStatus) bool {
	if len(c.contentErrs) > 0 && c.get(corev1.NamespaceDeletionContentFailure) == nil {
		msgs := make([]string, 0, len(c.contentErrs))
		for _, e := range c.contentErrs {
			msgs = append(msgs, e.Error())
		}
		sort.Strings(msgs)
		c.add(corev1.NamespaceDeletionContentFailure, "ContentDeletionFailed",
			fmt.Sprintf("Failed to delete all resource types, %d remaining: %v", len(msgs), strings.Join(msgs, ", ")))
	}
	changed := false
	for _, t := range conditionTypes {
		want := c.get(t.typ)
		if want == nil {
			want = &corev1.NamespaceCondition{Type: t.typ, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now(),
				Reason: t.reason, Message: t.message}
		}
		old := condition(status.Conditions, t.typ)
		switch {
		case old == nil:
			status.Conditions = append(status.Conditions, *want)
			changed = true
		case old.Status != want.Status || old.Reason != want.Reason || old.Message != want.Message:
			if old.Status != want.Status {
				old.LastTransitionTime = metav1.Now()
			}
			old.Status, old.Reason, old.Message = want.Status, want.Reason, want.Message
			changed = true
		}
	}
	return changed
}

func (c *conditions) get(t corev1.NamespaceConditionType) *corev1.NamespaceCondition {
	return condition(c.failing, t)
}

func condition(list []corev1.NamespaceCondition, t corev1.NamespaceConditionType) *corev1.NamespaceCondition {
	for i := range list {
		if list[i].Type == t {
			return &list[i]
		}
	}
	return nil
}
