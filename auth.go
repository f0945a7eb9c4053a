package apiserver

// Authentication and authorization of the server. RBAC will replace the
// authorizer here.

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	tokenunion "k8s.io/apiserver/pkg/authentication/token/union"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"

	"github.com/kubeembed/apiserver/internal/satoken"
)

// tokenAuthenticator authenticates bearer tokens only: the requests' and
// TokenReview's.
func (s *Server) tokenAuthenticator() authenticator.Request {
	admin := tokenfile.New(map[string]*user.DefaultInfo{
		s.opts.token: {Name: AdminUser, UID: AdminUser, Groups: []string{user.SystemPrivilegedGroup, user.AllAuthenticated}},
	})
	// Everyone authenticated is in system:authenticated, as kube-apiserver's
	// authenticators are wrapped (TokenReview's answers show it).
	return group.NewAuthenticatedGroupAdder(bearertoken.New(tokenunion.New(admin, s.tokens.Authenticator(s.boundObjects()))))
}

// boundObjects looks up what service account tokens name: service accounts
// in the shared informer's cache, then live (a token issued for an account
// created a moment ago); pods, secrets and nodes live.
func (s *Server) boundObjects() satoken.Getter {
	return boundObjects{accounts: s.informers.kube.Core().V1().ServiceAccounts().Lister(), client: s.informers.client}
}

type boundObjects struct {
	accounts corev1listers.ServiceAccountLister
	client   kubernetes.Interface
}

func (b boundObjects) ServiceAccount(ctx context.Context, ns, name string) (*corev1.ServiceAccount, error) {
	if sa, err := b.accounts.ServiceAccounts(ns).Get(name); err == nil {
		return sa, nil
	}
	return b.client.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
}

func (b boundObjects) Pod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	return b.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
}

func (b boundObjects) Secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	return b.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
}

func (b boundObjects) Node(ctx context.Context, name string) (*corev1.Node, error) {
	return b.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

// authenticator authenticates client certificates the server's CA signed
// (common name the user, organizations the groups), then bearer tokens, and
// everyone else as system:anonymous, then denied by authorization, as
// kube-apiserver does by default. A request with credentials that fail is
// rejected (401), not downgraded to anonymous: a certificate of another
// server's CA too.
func (s *Server) authenticator() authenticator.Request {
	opts := x509request.DefaultVerifyOptions()
	opts.Roots = s.ca.Pool()
	certs := group.NewAuthenticatedGroupAdder(x509request.New(opts, x509request.CommonNameUserConversion))
	return union.NewFailOnError(certs, s.tokenAuthenticator(), anonymous.NewAuthenticator(nil))
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

// authorize allows system:masters everything, authenticated users the self
// reviews and everyone the public information paths, as the bootstrap
// policy does; RBAC comes later.
func authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if u := a.GetUser(); u != nil {
		for _, g := range u.GetGroups() {
			if g == user.SystemPrivilegedGroup {
				return authorizer.DecisionAllow, "", nil
			}
		}
	}
	if basicUser(a) {
		return authorizer.DecisionAllow, "", nil
	}
	if !a.IsResourceRequest() && a.GetVerb() == "get" {
		p := a.GetPath()
		if publicPaths.Has(p) || strings.HasPrefix(p, "/healthz/") || strings.HasPrefix(p, "/livez/") || strings.HasPrefix(p, "/readyz/") {
			return authorizer.DecisionAllow, "", nil
		}
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// selfReviews are what the bootstrap policy's system:basic-user grants
// every authenticated user: asking who they are and what they may do.
var selfReviews = map[string]sets.Set[string]{
	"authentication.k8s.io": sets.New("selfsubjectreviews"),
	"authorization.k8s.io":  sets.New("selfsubjectaccessreviews", "selfsubjectrulesreviews"),
}

func basicUser(a authorizer.Attributes) bool {
	u := a.GetUser()
	return u != nil && slices.Contains(u.GetGroups(), user.AllAuthenticated) && a.IsResourceRequest() &&
		a.GetVerb() == "create" && a.GetSubresource() == "" && selfReviews[a.GetAPIGroup()].Has(a.GetResource())
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
	var resource []authorizer.ResourceRuleInfo
	if slices.Contains(u.GetGroups(), user.AllAuthenticated) {
		for group, resources := range selfReviews {
			resource = append(resource, &authorizer.DefaultResourceRuleInfo{Verbs: []string{"create"}, APIGroups: []string{group}, Resources: sets.List(resources)})
		}
	}
	return resource, nonResource, false, nil
}
