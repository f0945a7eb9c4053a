package apiserver

// Authorization of the server: system:masters, then RBAC.

import (
	"context"
	"slices"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	authzunion "k8s.io/apiserver/pkg/authorization/union"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeembed/apiserver/internal/controller"
	"github.com/kubeembed/apiserver/internal/rbac"
	"github.com/kubeembed/apiserver/providers"
)

// authorizerFunc is an authorizer without conditional decisions.
type authorizerFunc func(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error)

func (f authorizerFunc) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	return f(ctx, a)
}

// ConditionsAwareAuthorize implements authorizer.Authorizer: this authorizer
// has no conditional decisions.
func (f authorizerFunc) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(f(ctx, a))
}

// EvaluateConditions implements authorizer.Authorizer.
func (f authorizerFunc) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

// authorizer is kube-apiserver's chain: system:masters may do anything,
// then RBAC (internal/rbac) over the server's informers (freshRBAC), with
// kube-apiserver's bootstrap policy (providers/rbac) for what everyone,
// every authenticated user and the system's components may do.
func (s *Server) authorizer() (authorizer.Authorizer, error) {
	chain := []authzunion.NamedAuthorizer{{AuthorizerName: "privileged", Authorizer: authorizerFunc(privileged)}}
	if s.servesRBAC() {
		seen, err := s.rbacSeen()
		if err != nil {
			return nil, err
		}
		chain = append(chain, authzunion.NamedAuthorizer{AuthorizerName: "rbac", Authorizer: freshRBAC{s.rbac(), s.writes, s.rbacSettled(seen)}})
	}
	return authzunion.New(chain...)
}

// servesRBAC: the server serves rbac.authorization.k8s.io (a server of
// chosen providers may not; then only system:masters may act).
func (s *Server) servesRBAC() bool {
	return slices.ContainsFunc(s.opts.providers, func(p providers.Provider) bool { return p.GroupName() == rbacv1.GroupName })
}

func (s *Server) rbac() *rbac.Authorizer {
	if s.rbacAuthz == nil {
		v1 := s.informers.kube.Rbac().V1()
		s.informers.need(v1.Roles().Informer().HasSynced, v1.ClusterRoles().Informer().HasSynced,
			v1.RoleBindings().Informer().HasSynced, v1.ClusterRoleBindings().Informer().HasSynced)
		s.rbacAuthz = rbac.New(v1.Roles().Lister(), v1.ClusterRoles().Lister(), v1.RoleBindings().Lister(), v1.ClusterRoleBindings().Lister())
	}
	return s.rbacAuthz
}

// rbacSeen notes the revisions the RBAC informers have delivered, so that a
// request denied while a role or binding written before it is still on its
// way waits for it (freshRBAC).
func (s *Server) rbacSeen() (*controller.Observer, error) {
	obs := controller.NewObserver(s.writes)
	v1 := s.informers.kube.Rbac().V1()
	for _, r := range []struct {
		resource string
		informer cache.SharedIndexInformer
	}{
		{"roles", v1.Roles().Informer()}, {"clusterroles", v1.ClusterRoles().Informer()},
		{"rolebindings", v1.RoleBindings().Informer()}, {"clusterrolebindings", v1.ClusterRoleBindings().Informer()},
	} {
		if err := obs.Watch(rbacv1.Resource(r.resource), r.informer, cache.ResourceEventHandlerFuncs{}); err != nil {
			return nil, err
		}
	}
	return obs, nil
}

// rbacSettled: the RBAC informers have seen the writes, and the ClusterRole
// aggregation controller (when it runs) has aggregated them.
func (s *Server) rbacSettled(seen *controller.Observer) func(map[schema.GroupResource]uint64) error {
	return func(written map[schema.GroupResource]uint64) error {
		if err := seen.CaughtUp(written); err != nil {
			return err
		}
		if a := s.controllers.aggregation; a != nil {
			select {
			case <-s.controllers.ready:
				return a.Idle(written)
			default: // it starts with the server's readiness
			}
		}
		return nil
	}
}

// freshRBAC is the RBAC authorizer with read-your-writes: before it has no
// opinion it waits (up to a second) until its informers hold every role and
// binding written before, aggregated, then asks again. kube-apiserver's informers lag
// by milliseconds; a test that binds a role and then acts must not depend
// on them. Allowing never waits.
type freshRBAC struct {
	*rbac.Authorizer
	writes *controller.Writes
	// settled reports whether the roles and bindings written are all in
	// the authorizer's informers, and aggregated.
	settled func(written map[schema.GroupResource]uint64) error
}

func (f freshRBAC) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	d, reason, err := f.Authorizer.Authorize(ctx, a)
	if d == authorizer.DecisionAllow {
		return d, reason, err
	}
	written := f.writes.Snapshot()
	if f.settled(written) == nil {
		return d, reason, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if controller.Wait(ctx, func() error { return f.settled(written) }) != nil {
		return d, reason, err
	}
	return f.Authorizer.Authorize(ctx, a)
}

func (f freshRBAC) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(f.Authorize(ctx, a))
}

// ruleResolver answers SelfSubjectRulesReview: RBAC's rules (system:masters
// get theirs from cluster-admin's binding).
func (s *Server) ruleResolver() authorizer.RuleResolver {
	if !s.servesRBAC() {
		return authzunion.NewRuleResolvers()
	}
	return s.rbac()
}

// privileged allows system:masters everything.
func privileged(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if u := a.GetUser(); u != nil && slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}
