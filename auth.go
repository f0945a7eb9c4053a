package apiserver

// Authentication, authorization and admission of the server. RBAC will
// replace the authorizer here.

import (
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"

	noopoteltrace "go.opentelemetry.io/otel/trace/noop"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle"
	mutatingpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	validatingpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	webhookinit "k8s.io/apiserver/pkg/admission/plugin/webhook/initializer"
	mutatingwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook/mutating"
	validatingwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook/validating"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	basecompatibility "k8s.io/component-base/compatibility"

	kubeadmission "github.com/kubeembed/apiserver/internal/admission"
)

// tokenAuthenticator authenticates bearer tokens only: the requests' and
// TokenReview's.
func (s *Server) tokenAuthenticator() authenticator.Request {
	return bearertoken.New(tokenfile.New(map[string]*user.DefaultInfo{
		s.token: {Name: AdminUser, UID: AdminUser, Groups: []string{user.SystemPrivilegedGroup, user.AllAuthenticated}},
	}))
}

func (s *Server) authenticator() authenticator.Request {
	certs := x509request.New(x509.VerifyOptions{
		Roots:     s.ca.Pool(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, x509request.CommonNameUserConversion)
	// Anonymous requests are authenticated as system:anonymous and then
	// denied by authorization, as kube-apiserver does by default.
	// A request with credentials that fail is rejected (401), not
	// downgraded to anonymous.
	return union.NewFailOnError(union.New(s.tokenAuthenticator(), certs), anonymous.NewAuthenticator(nil))
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

// newAdmission returns the admission chain in kube-apiserver's order:
// namespace lifecycle (no objects in missing or terminating namespaces, no
// deleting the system namespaces), the pod plugins (service account,
// priority, default tolerations), mutating admission policies and webhooks,
// then validating admission policies and webhooks. Webhooks are called at
// their URL (a service reference resolves to its in-cluster DNS name, which
// a test process cannot reach: give webhooks a URL, as envtest does). The
// policy plugins run controllers until stop is closed.
func newAdmission(client kubernetes.Interface, dyn dynamic.Interface, factory informers.SharedInformerFactory,
	authz authorizer.Authorizer, version basecompatibility.EffectiveVersion, loopback *rest.Config, stop <-chan struct{}) (admission.Interface, error) {
	nsLifecycle, err := lifecycle.NewLifecycle(sets.New(metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic))
	if err != nil {
		return nil, err
	}
	mutatingHooks, err := mutatingwebhook.NewMutatingWebhook(nil)
	if err != nil {
		return nil, err
	}
	validatingHooks, err := validatingwebhook.NewValidatingAdmissionWebhook(nil)
	if err != nil {
		return nil, err
	}
	// Policies find the kinds of their parameters through discovery, which
	// is reset as CRDs come and go.
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery()))
	inits := admission.PluginInitializers{
		initializer.New(client, dyn, factory, authz, utilfeature.DefaultFeatureGate, version, stop, mapper),
		webhookinit.NewPluginInitializer(
			webhook.NewDefaultAuthenticationInfoResolverWrapper(nil, nil, loopback, noopoteltrace.NewTracerProvider()),
			webhook.NewDefaultServiceResolver()),
	}
	for _, p := range []admission.Interface{nsLifecycle, mutatingHooks, validatingHooks} {
		inits.Initialize(p)
		if err := admission.ValidateInitialization(p); err != nil {
			return nil, fmt.Errorf("admission plugin %T: %w", p, err)
		}
	}
	// The policy plugins are built when the first policy of their kind
	// exists (internal/admission.WhenAny); the informers they add then are
	// started with the factory's others.
	policyPlugin := func(newPlugin func() (admission.Interface, error)) func() (admission.Interface, error) {
		return func() (admission.Interface, error) {
			p, err := newPlugin()
			if err != nil {
				return nil, err
			}
			inits.Initialize(p)
			if err := admission.ValidateInitialization(p); err != nil {
				return nil, err
			}
			factory.Start(stop)
			return p, nil
		}
	}
	v1 := factory.Admissionregistration().V1()
	anyValidating := func() bool {
		l, err := v1.ValidatingAdmissionPolicies().Lister().List(labels.Everything())
		return err != nil || len(l) > 0
	}
	anyMutating := func() bool {
		l, err := v1.MutatingAdmissionPolicies().Lister().List(labels.Everything())
		return err != nil || len(l) > 0
	}
	return admission.NewChainHandler(nsLifecycle, kubeadmission.NewPods(client),
		kubeadmission.WhenAny(policyPlugin(func() (admission.Interface, error) { return mutatingpolicy.NewPlugin(nil) }), anyMutating), mutatingHooks,
		kubeadmission.WhenAny(policyPlugin(func() (admission.Interface, error) { return validatingpolicy.NewPlugin(nil) }), anyValidating), validatingHooks), nil
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
