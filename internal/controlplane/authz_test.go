package controlplane

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeembed/apiserver/internal/rbac"
	"github.com/kubeembed/apiserver/internal/writes"
)

// lagging is an RBAC authorizer whose informers have the binding of
// system:public-info-viewer but not (yet) the role it names, as right
// after the bootstrap policy was written.
type lagging struct {
	authz *rbac.Authorizer
	roles cache.Indexer
}

func newLagging(t *testing.T) lagging {
	t.Helper()
	index := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	roles, bindings := index(), index()
	err := bindings.Add(&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "public"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "public"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: user.AllUnauthenticated}}})
	assert.NoError(t, err)
	authz := rbac.New(rbaclisters.NewRoleLister(index()), rbaclisters.NewClusterRoleLister(roles),
		rbaclisters.NewRoleBindingLister(index()), rbaclisters.NewClusterRoleBindingLister(bindings))
	return lagging{authz: authz, roles: roles}
}

// arrive is the role arriving in the informer.
func (l lagging) arrive(t *testing.T) {
	t.Helper()
	assert.NoError(t, l.roles.Add(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "public"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/version"}}}}))
}

var anonymousVersion = authorizer.AttributesRecord{Verb: "get", Path: "/version",
	User: &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}}

type stage = func(map[schema.GroupResource]uint64) error

// Once the informers have caught up, the request is asked again without
// waiting for the aggregation controller (whose first pass over the
// bootstrap policy at readiness can take seconds on a loaded machine: CI
// once denied an anonymous /version so).
func TestFreshRBACAsksAgainWhenInformersCaughtUp(t *testing.T) {
	t.Parallel()
	l := newLagging(t)
	caughtUp := false
	informers := func(map[schema.GroupResource]uint64) error {
		if !caughtUp {
			l.arrive(t)
			caughtUp = true
			return errors.New("not yet")
		}
		return nil
	}
	aggregationAsked := 0
	aggregation := func(map[schema.GroupResource]uint64) error { aggregationAsked++; return errors.New("busy") }
	f := freshRBAC{Authorizer: l.authz, writes: &writes.Log{}, stages: []stage{informers, aggregation}}
	d, reason, err := f.Authorize(t.Context(), anonymousVersion)
	assert.NoError(t, err)
	assert.Equal(t, authorizer.DecisionAllow, d, reason)
	assert.Zero(t, aggregationAsked)
}

// A request whose wait ends unsettled is still asked again: the informers
// may have moved on meanwhile.
func TestFreshRBACAsksAgainPastTheDeadline(t *testing.T) {
	t.Parallel()
	l := newLagging(t)
	never := func(map[schema.GroupResource]uint64) error { return errors.New("never") }
	arrived := false
	informers := func(map[schema.GroupResource]uint64) error {
		if !arrived {
			l.arrive(t)
			arrived = true
		}
		return errors.New("still lagging")
	}
	f := freshRBAC{Authorizer: l.authz, writes: &writes.Log{}, stages: []stage{informers, never}}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	d, reason, err := f.Authorize(ctx, anonymousVersion)
	assert.NoError(t, err)
	assert.Equal(t, authorizer.DecisionAllow, d, reason)
}

// The informers can catch up between the first answer and the check of
// whether they have: the stage is settled when checked, and the request is
// asked again all the same (CI denied a node's CSR create so, once in ~300
// runs under load, right after its binding was written).
func TestFreshRBACAsksAgainWhenCaughtUpMeanwhile(t *testing.T) {
	t.Parallel()
	l := newLagging(t)
	informers := func(map[schema.GroupResource]uint64) error {
		l.arrive(t) // delivered just before the check
		return nil
	}
	settled := func(map[schema.GroupResource]uint64) error { return nil }
	f := freshRBAC{Authorizer: l.authz, writes: &writes.Log{}, stages: []stage{informers, settled}}
	d, reason, err := f.Authorize(t.Context(), anonymousVersion)
	assert.NoError(t, err)
	assert.Equal(t, authorizer.DecisionAllow, d, reason)
}

// A request RBAC denies once everything has settled is denied, with no
// wait.
func TestFreshRBACDeniesWhenSettled(t *testing.T) {
	t.Parallel()
	l := newLagging(t)
	settled := func(map[schema.GroupResource]uint64) error { return nil }
	f := freshRBAC{Authorizer: l.authz, writes: &writes.Log{}, stages: []stage{settled, settled}}
	d, reason, err := f.Authorize(t.Context(), anonymousVersion)
	assert.Equal(t, authorizer.DecisionNoOpinion, d)
	assert.Contains(t, reason, `clusterrole.rbac.authorization.k8s.io "public" not found`)
	assert.NoError(t, err)
}
