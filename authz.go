package apiserver

// Authorization of the server: system:masters, RBAC, the bootstrap grants.

import (
	"context"
	"maps"
	"slices"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	authzunion "k8s.io/apiserver/pkg/authorization/union"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeembed/apiserver/internal/controller"
	"github.com/kubeembed/apiserver/internal/rbac"
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
// then RBAC (internal/rbac) over the server's informers (freshRBAC), then
// what the bootstrap policy grants everyone (bootstrapGrants, until the
// policy's roles are served).
func (s *Server) authorizer() (authorizer.Authorizer, error) {
	seen, err := s.rbacSeen()
	if err != nil {
		return nil, err
	}
	return authzunion.New(
		authzunion.NamedAuthorizer{AuthorizerName: "privileged", Authorizer: authorizerFunc(privileged)},
		authzunion.NamedAuthorizer{AuthorizerName: "rbac", Authorizer: freshRBAC{s.rbac(), seen, s.writes}},
		authzunion.NamedAuthorizer{AuthorizerName: "bootstrap", Authorizer: authorizerFunc(bootstrapGrants)})
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

// freshRBAC is the RBAC authorizer with read-your-writes: before it has no
// opinion it waits (up to a second) until its informers hold every role and
// binding written before, then asks again. kube-apiserver's informers lag
// by milliseconds; a test that binds a role and then acts must not depend
// on them. Allowing never waits.
type freshRBAC struct {
	*rbac.Authorizer
	seen   *controller.Observer
	writes *controller.Writes
}

func (f freshRBAC) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	d, reason, err := f.Authorizer.Authorize(ctx, a)
	if d == authorizer.DecisionAllow {
		return d, reason, err
	}
	written := f.writes.Snapshot()
	if f.seen.CaughtUp(written) == nil {
		return d, reason, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if controller.Wait(ctx, func() error { return f.seen.CaughtUp(written) }) != nil {
		return d, reason, err
	}
	return f.Authorizer.Authorize(ctx, a)
}

func (f freshRBAC) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(f.Authorize(ctx, a))
}

// ruleResolver answers SelfSubjectRulesReview from the same chain.
func (s *Server) ruleResolver() authorizer.RuleResolver {
	return authzunion.NewRuleResolvers(rules{}, s.rbac())
}

// privileged allows system:masters everything.
func privileged(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if u := a.GetUser(); u != nil && slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// bootstrapGrants allows what the bootstrap policy's system:basic-user,
// system:discovery and system:public-info-viewer grant: authenticated users
// their self reviews and discovery, everyone the public information paths.
func bootstrapGrants(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	u := a.GetUser()
	authenticated := u != nil && slices.Contains(u.GetGroups(), user.AllAuthenticated)
	if authenticated && selfReview(a) {
		return authorizer.DecisionAllow, "", nil
	}
	if a.IsResourceRequest() || a.GetVerb() != "get" {
		return authorizer.DecisionNoOpinion, "", nil
	}
	rule := &rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: publicPaths}
	if authenticated {
		rule.NonResourceURLs = discoveryPaths
	}
	if rbac.Allows(a, rule) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// The bootstrap policy's non-resource URLs: system:public-info-viewer's
// (everyone) and system:discovery's (authenticated users).
var (
	publicPaths    = []string{"/healthz", "/livez", "/readyz", "/version", "/version/"}
	discoveryPaths = []string{"/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"}
)

// selfReviews are what the bootstrap policy's system:basic-user grants
// every authenticated user: asking who they are and what they may do.
var selfReviews = map[string]sets.Set[string]{
	"authentication.k8s.io": sets.New("selfsubjectreviews"),
	"authorization.k8s.io":  sets.New("selfsubjectaccessreviews", "selfsubjectrulesreviews"),
}

func selfReview(a authorizer.Attributes) bool {
	return a.IsResourceRequest() && a.GetVerb() == "create" && a.GetSubresource() == "" && selfReviews[a.GetAPIGroup()].Has(a.GetResource())
}

// rules answers SelfSubjectRulesReview for privileged and bootstrapGrants.
type rules struct{}

// RulesFor implements authorizer.RuleResolver.
func (rules) RulesFor(_ context.Context, u user.Info, _ string) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo, bool, error) {
	nonResource := []authorizer.NonResourceRuleInfo{&authorizer.DefaultNonResourceRuleInfo{Verbs: []string{"get"}, NonResourceURLs: publicPaths}}
	if slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		return []authorizer.ResourceRuleInfo{&authorizer.DefaultResourceRuleInfo{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}},
			append([]authorizer.NonResourceRuleInfo{&authorizer.DefaultNonResourceRuleInfo{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}}, nonResource...),
			false, nil
	}
	var resource []authorizer.ResourceRuleInfo
	if slices.Contains(u.GetGroups(), user.AllAuthenticated) {
		for _, group := range slices.Sorted(maps.Keys(selfReviews)) {
			resource = append(resource, &authorizer.DefaultResourceRuleInfo{Verbs: []string{"create"}, APIGroups: []string{group}, Resources: sets.List(selfReviews[group])})
		}
		nonResource = append(nonResource, &authorizer.DefaultNonResourceRuleInfo{Verbs: []string{"get"}, NonResourceURLs: discoveryPaths})
	}
	return resource, nonResource, false, nil
}
