package controlplane

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
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
	"github.com/kubeembed/apiserver/internal/rbac"
	"github.com/kubeembed/apiserver/internal/writes"
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

// newAuthorizer is kube-apiserver's chain: system:masters may do anything,
// then RBAC (internal/rbac) over the server's informers (freshRBAC), with
// kube-apiserver's bootstrap policy (providers/rbac) for what everyone,
// every authenticated user and the system's components may do. It also
// returns the rule resolver of SelfSubjectRulesReview (system:masters get
// theirs from cluster-admin's binding) and the informers RBAC needs synced.
// A server that does not serve rbac.authorization.k8s.io (chosen
// providers) lets only system:masters act. aggregation, when it runs, is the
// ClusterRole aggregation controller a denied request waits for.
func newAuthorizer(all []providers.Provider, inf informers.SharedInformerFactory, log *writes.Log,
	aggregation controllers.Controller) (authorizer.Authorizer, authorizer.RuleResolver, []cache.InformerSynced, error) {
	chain := []authzunion.NamedAuthorizer{{AuthorizerName: "privileged", Authorizer: authorizerFunc(privileged)}}
	if !slices.ContainsFunc(all, func(p providers.Provider) bool { return p.GroupName() == rbacv1.GroupName }) {
		authz, err := authzunion.New(chain...)
		return authz, authzunion.NewRuleResolvers(), nil, err
	}
	v1 := inf.Rbac().V1()
	watched := map[string]cache.SharedIndexInformer{
		"roles": v1.Roles().Informer(), "clusterroles": v1.ClusterRoles().Informer(),
		"rolebindings": v1.RoleBindings().Informer(), "clusterrolebindings": v1.ClusterRoleBindings().Informer(),
	}
	seen := controller.NewObserver(log)
	var synced []cache.InformerSynced
	for resource, informer := range watched {
		if err := seen.Watch(rbacv1.Resource(resource), informer, cache.ResourceEventHandlerFuncs{}); err != nil {
			return nil, nil, nil, err
		}
		synced = append(synced, informer.HasSynced)
	}
	rbacAuthz := rbac.New(v1.Roles().Lister(), v1.ClusterRoles().Lister(), v1.RoleBindings().Lister(), v1.ClusterRoleBindings().Lister())
	chain = append(chain, authzunion.NamedAuthorizer{AuthorizerName: "rbac", Authorizer: freshRBAC{rbacAuthz, log, rbacStages(seen, aggregation)}})
	authz, err := authzunion.New(chain...)
	return authz, rbacAuthz, synced, err
}

// rbacStages are what the RBAC authorizer's view of the writes waits for,
// in order: its informers have seen them (seen notes the revisions they
// delivered), then the ClusterRole aggregation controller (when it runs,
// and once the server is ready: it starts then) has aggregated them.
func rbacStages(seen *controller.Observer, aggregation controllers.Controller) []func(map[schema.GroupResource]uint64) error {
	stages := []func(map[schema.GroupResource]uint64) error{seen.CaughtUp}
	if aggregation != nil {
		stages = append(stages, aggregation.Idle)
	}
	return stages
}

// settleTimeout bounds how long a request RBAC would deny waits for the
// writes before it. A healthy server settles in milliseconds; the bound is
// for a loaded machine (two cores running many servers under the race
// detector, where the aggregation controller's first pass over the
// bootstrap policy at readiness took over a second).
const settleTimeout = 5 * time.Second

// freshRBAC is the RBAC authorizer with read-your-writes: before it has no
// opinion it waits until its informers hold every role and binding written
// before, and asks again; then until they are aggregated, and asks again.
// kube-apiserver's informers lag by milliseconds; a test that binds a role
// and then acts must not depend on them. Allowing never waits.
type freshRBAC struct {
	*rbac.Authorizer
	writes *writes.Log
	// stages report, in order, whether the roles and bindings written are
	// all in the authorizer's informers, and aggregated.
	stages []func(written map[schema.GroupResource]uint64) error
}

func (f freshRBAC) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	d, reason, err := f.Authorizer.Authorize(ctx, a)
	if d == authorizer.DecisionAllow {
		return d, reason, err
	}
	written := f.writes.Snapshot()
	wait, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	for _, settled := range f.stages {
		// Past the deadline, the informers may still have moved on.
		_ = controller.Wait(wait, func() error { return settled(written) })
		// Asked again even if the stage had settled already: it may have
		// settled after the first answer (the informers delivered the
		// binding between the two).
		if d, reason, err = f.Authorizer.Authorize(ctx, a); d == authorizer.DecisionAllow {
			break
		}
	}
	return d, reason, err
}

func (f freshRBAC) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(f.Authorize(ctx, a))
}

// privileged allows system:masters everything.
func privileged(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if u := a.GetUser(); u != nil && slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}
