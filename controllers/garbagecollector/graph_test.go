package garbagecollector

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func ref(uid, name string, block bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: name, UID: types.UID(uid), BlockOwnerDeletion: &block}
}

// The event message quotes identities as kube-controller-manager does.
func TestIdentityString(t *testing.T) {
	t.Parallel()
	id := identity{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns1", Name: "web", UID: "u1"}
	assert.Equal(t, "[apps/v1/Deployment, namespace: ns1, name: web, uid: u1]", id.String())
}

func TestDiff(t *testing.T) {
	t.Parallel()
	added, removed, changed := diff([]metav1.OwnerReference{ref("a", "a", true), ref("b", "b", false)},
		[]metav1.OwnerReference{ref("a", "a", false), ref("c", "c", false)})
	assert.Equal(t, []metav1.OwnerReference{ref("c", "c", false)}, added)
	assert.Equal(t, []metav1.OwnerReference{ref("b", "b", false)}, removed)
	assert.Len(t, changed, 1)
	assert.True(t, isBlocking(changed[0][0]))
	assert.False(t, isBlocking(changed[0][1]))
}

// Linking creates virtual owners to check; a reference to an observed
// owner in another namespace is reported invalid, and the dependent checked.
func TestLink(t *testing.T) {
	t.Parallel()
	g := &graph{nodes: map[types.UID]*node{}}
	owner := &node{identity: identity{APIVersion: "v1", Kind: "ConfigMap", Namespace: "other", Name: "o", UID: "o"}, dependents: map[*node]struct{}{}}
	g.nodes["o"] = owner
	dep := &node{identity: identity{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "d", UID: "d"},
		owners: []metav1.OwnerReference{ref("o", "o", false), ref("missing", "m", false)}, dependents: map[*node]struct{}{}}
	check, invalid := g.insert(dep)
	assert.Equal(t, []types.UID{"o"}, invalid)
	assert.Len(t, check, 2, "the new virtual owner and the dependent")
	assert.True(t, g.nodes["missing"].virtual)
	assert.Equal(t, "ns", g.nodes["missing"].identity.Namespace, "a virtual owner is looked for in its dependent's namespace")
	g.remove(dep)
	assert.Empty(t, owner.dependents)
}
