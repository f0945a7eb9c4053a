package apiserver

// Authentication and authorization of the server. RBAC will replace the
// authorizer here.

import (
	"context"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// tokenAuthenticator authenticates bearer tokens only: the requests' and
// TokenReview's.
func (s *Server) tokenAuthenticator() authenticator.Request {
	return bearertoken.New(tokenfile.New(map[string]*user.DefaultInfo{
		s.opts.token: {Name: AdminUser, UID: AdminUser, Groups: []string{user.SystemPrivilegedGroup, user.AllAuthenticated}},
	}))
}

// authenticator authenticates bearer tokens, and everyone else as
// system:anonymous, then denied by authorization, as kube-apiserver does by
// default. A request with credentials that fail is rejected (401), not
// downgraded to anonymous. (Client certificates come with per-server CAs
// and identities, a later issue.)
func (s *Server) authenticator() authenticator.Request {
	return union.NewFailOnError(s.tokenAuthenticator(), anonymous.NewAuthenticator(nil))
}

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

// publicPaths are readable by everyone, as the system:public-info-viewer
// cluster role grants on a real cluster.
var publicPaths = sets.New("/healthz", "/livez", "/readyz", "/version", "/version/")

// authorize allows system:masters everything and everyone the public
// information paths; RBAC comes later.
func authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if u := a.GetUser(); u != nil {
		for _, g := range u.GetGroups() {
			if g == user.SystemPrivilegedGroup {
				return authorizer.DecisionAllow, "", nil
			}
		}
	}
	if !a.IsResourceRequest() && a.GetVerb() == "get" {
		p := a.GetPath()
		if publicPaths.Has(p) || strings.HasPrefix(p, "/healthz/") || strings.HasPrefix(p, "/livez/") || strings.HasPrefix(p, "/readyz/") {
			return authorizer.DecisionAllow, "", nil
		}
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// rules answers SelfSubjectRulesReview for the authorizer above.
type rules struct{}

// RulesFor implements authorizer.RuleResolver.
func (rules) RulesFor(_ context.Context, u user.Info, _ string) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo, bool, error) {
	nonResource := []authorizer.NonResourceRuleInfo{&authorizer.DefaultNonResourceRuleInfo{Verbs: []string{"get"}, NonResourceURLs: sets.List(publicPaths)}}
	if slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		return []authorizer.ResourceRuleInfo{&authorizer.DefaultResourceRuleInfo{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}},
			append([]authorizer.NonResourceRuleInfo{&authorizer.DefaultNonResourceRuleInfo{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}}, nonResource...),
			false, nil
	}
	return nil, nonResource, false, nil
}
