package namespace

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// The five conditions, healthy unless failing, with kube-controller-
// manager's reasons and messages; applying the same pass twice changes
// nothing.
func TestConditions(t *testing.T) {
	t.Parallel()
	var status corev1.NamespaceStatus
	var c conditions
	c.discoveryFailed(&discovery.ErrGroupDiscoveryFailed{Groups: map[schema.GroupVersion]error{{Group: "metrics.k8s.io", Version: "v1beta1"}: errors.New("unavailable")}})
	c.contentFailed(errors.New("b failed"))
	c.contentFailed(errors.New("a failed"))
	c.contentTotals(map[schema.GroupVersionResource]int{{Version: "v1", Resource: "pods"}: 2, {Group: "example.com", Version: "v1", Resource: "widgets"}: 1},
		map[string]int{"example.com/hold": 3})
	require.True(t, c.apply(&status))
	require.Len(t, status.Conditions, 5)
	got := map[corev1.NamespaceConditionType]corev1.NamespaceCondition{}
	for _, cond := range status.Conditions {
		got[cond.Type] = cond
	}
	assert.Equal(t, "DiscoveryFailed", got[corev1.NamespaceDeletionDiscoveryFailure].Reason)
	assert.Equal(t, "Discovery failed for some groups, 1 failing: unable to retrieve the complete list of server APIs: metrics.k8s.io/v1beta1: unavailable",
		got[corev1.NamespaceDeletionDiscoveryFailure].Message)
	assert.Equal(t, corev1.ConditionFalse, got[corev1.NamespaceDeletionGVParsingFailure].Status)
	assert.Equal(t, "All legacy kube types successfully parsed", got[corev1.NamespaceDeletionGVParsingFailure].Message)
	assert.Equal(t, "Failed to delete all resource types, 2 remaining: a failed, b failed", got[corev1.NamespaceDeletionContentFailure].Message)
	assert.Equal(t, "Some resources are remaining: pods. has 2 resource instances, widgets.example.com has 1 resource instances",
		got[corev1.NamespaceContentRemaining].Message)
	assert.Equal(t, "Some content in the namespace has finalizers remaining: example.com/hold in 3 resource instances",
		got[corev1.NamespaceFinalizersRemaining].Message)

	var healthy conditions
	require.True(t, healthy.apply(&status), "back to healthy")
	for _, cond := range status.Conditions {
		assert.Equal(t, corev1.ConditionFalse, cond.Status, cond.Type)
	}
	assert.False(t, healthy.apply(&status), "no change")
}
