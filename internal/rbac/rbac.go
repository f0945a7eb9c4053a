// Package rbac is the RBAC authorizer, written here from kube-apiserver's
// behaviour (its code lives in k8s.io/kubernetes): a request is allowed
// when a rule of a role bound to its user allows it, through a
// ClusterRoleBinding (anywhere) or a RoleBinding of its namespace (to a
// Role of that namespace or to a ClusterRole). Subjects are users, groups
// and service accounts; rules match verbs, API groups, resources with
// subresources, resource names and non-resource URLs, with kube-apiserver's
// wildcards. Its reasons are kube-apiserver's: "RBAC: allowed by ..." and,
// when a binding names a role that does not exist, "RBAC: <the error>".
package rbac

import (
	"context"
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
)

// Authorizer authorizes by RBAC from listers of the four kinds.
type Authorizer struct {
	roles           rbaclisters.RoleLister
	clusterRoles    rbaclisters.ClusterRoleLister
	bindings        rbaclisters.RoleBindingLister
	clusterBindings rbaclisters.ClusterRoleBindingLister
}

var (
	_ authorizer.Authorizer   = (*Authorizer)(nil)
	_ authorizer.RuleResolver = (*Authorizer)(nil)
)

// New returns an authorizer reading roles and bindings from the listers.
func New(roles rbaclisters.RoleLister, clusterRoles rbaclisters.ClusterRoleLister, bindings rbaclisters.RoleBindingLister, clusterBindings rbaclisters.ClusterRoleBindingLister) *Authorizer {
	return &Authorizer{roles: roles, clusterRoles: clusterRoles, bindings: bindings, clusterBindings: clusterBindings}
}

// Authorize allows what a rule bound to the user allows; otherwise it has
// no opinion, with the errors met on the way as its reason.
func (a *Authorizer) Authorize(_ context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	var errs []error
	reason := ""
	a.visit(attrs.GetUser(), attrs.GetNamespace(), func(source fmt.Stringer, rule *rbacv1.PolicyRule, err error) bool {
		if rule != nil && Allows(attrs, rule) {
			reason = "RBAC: allowed by " + source.String()
			return false
		}
		if err != nil {
			errs = append(errs, err)
		}
		return true
	})
	if reason != "" {
		return authorizer.DecisionAllow, reason, nil
	}
	if len(errs) > 0 {
		reason = fmt.Sprintf("RBAC: %v", utilerrors.NewAggregate(errs))
	}
	return authorizer.DecisionNoOpinion, reason, nil
}

// ConditionsAwareAuthorize implements authorizer.Authorizer: RBAC has no
// conditional decisions.
func (a *Authorizer) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(a.Authorize(ctx, attrs))
}

// EvaluateConditions implements authorizer.Authorizer.
func (*Authorizer) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

// RulesFor lists the rules bound to u in namespace (SelfSubjectRulesReview);
// incomplete when a binding's role could not be read.
func (a *Authorizer) RulesFor(_ context.Context, u user.Info, namespace string) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo, bool, error) {
	var resources []authorizer.ResourceRuleInfo
	var nonResources []authorizer.NonResourceRuleInfo
	var errs []error
	a.visit(u, namespace, func(_ fmt.Stringer, rule *rbacv1.PolicyRule, err error) bool {
		if err != nil {
			errs = append(errs, err)
			return true
		}
		if len(rule.Resources) > 0 {
			resources = append(resources, &authorizer.DefaultResourceRuleInfo{Verbs: rule.Verbs, APIGroups: rule.APIGroups, Resources: rule.Resources, ResourceNames: rule.ResourceNames})
		}
		if len(rule.NonResourceURLs) > 0 {
			nonResources = append(nonResources, &authorizer.DefaultNonResourceRuleInfo{Verbs: rule.Verbs, NonResourceURLs: rule.NonResourceURLs})
		}
		return true
	})
	return resources, nonResources, len(errs) > 0, utilerrors.NewAggregate(errs)
}

// visit calls f with every rule bound to u: through ClusterRoleBindings,
// then the RoleBindings of namespace; f returns false to stop.
func (a *Authorizer) visit(u user.Info, namespace string, f func(source fmt.Stringer, rule *rbacv1.PolicyRule, err error) bool) {
	if u == nil {
		return
	}
	clusterBindings, err := a.clusterBindings.List(labels.Everything())
	if err != nil && !f(nil, nil, err) {
		return
	}
	for _, b := range clusterBindings {
		if i, ok := appliesTo(u, b.Subjects, ""); ok {
			source := describer{"ClusterRoleBinding", b.Name, b.RoleRef, b.Subjects[i], ""}
			if !a.visitRole(b.RoleRef, "", source, f) {
				return
			}
		}
	}
	if namespace == "" {
		return
	}
	bindings, err := a.bindings.RoleBindings(namespace).List(labels.Everything())
	if err != nil && !f(nil, nil, err) {
		return
	}
	for _, b := range bindings {
		if i, ok := appliesTo(u, b.Subjects, namespace); ok {
			source := describer{"RoleBinding", b.Name + "/" + b.Namespace, b.RoleRef, b.Subjects[i], b.Namespace}
			if !a.visitRole(b.RoleRef, namespace, source, f) {
				return
			}
		}
	}
}

// visitRole visits the rules of the role ref names (a Role of namespace or
// a ClusterRole); false when f stopped.
func (a *Authorizer) visitRole(ref rbacv1.RoleRef, namespace string, source describer, f func(fmt.Stringer, *rbacv1.PolicyRule, error) bool) bool {
	var rules []rbacv1.PolicyRule
	switch ref.Kind {
	case "Role":
		role, err := a.roles.Roles(namespace).Get(ref.Name)
		if err != nil {
			return f(nil, nil, err)
		}
		rules = role.Rules
	case "ClusterRole":
		role, err := a.clusterRoles.Get(ref.Name)
		if err != nil {
			return f(nil, nil, err)
		}
		rules = role.Rules
	default:
		return f(nil, nil, fmt.Errorf("unsupported role reference kind: %q", ref.Kind))
	}
	for i := range rules {
		if !f(source, &rules[i], nil) {
			return false
		}
	}
	return true
}

// appliesTo returns the first subject that is u.
func appliesTo(u user.Info, subjects []rbacv1.Subject, namespace string) (int, bool) {
	for i, s := range subjects {
		if subjectIs(u, s, namespace) {
			return i, true
		}
	}
	return 0, false
}

func subjectIs(u user.Info, s rbacv1.Subject, namespace string) bool {
	switch s.Kind {
	case rbacv1.UserKind:
		return u.GetName() == s.Name
	case rbacv1.GroupKind:
		for _, g := range u.GetGroups() {
			if g == s.Name {
				return true
			}
		}
	case rbacv1.ServiceAccountKind:
		// A RoleBinding's service accounts default to its namespace.
		ns := namespace
		if s.Namespace != "" {
			ns = s.Namespace
		}
		return ns != "" && serviceaccount.MatchesUsername(ns, s.Name, u.GetName())
	}
	return false
}

// describer names where an allowing rule came from, as kube-apiserver's
// reasons do.
type describer struct {
	kind, name string
	ref        rbacv1.RoleRef
	subject    rbacv1.Subject
	namespace  string
}

func (d describer) String() string {
	subject := fmt.Sprintf("%s %q", d.subject.Kind, d.subject.Name)
	if d.subject.Kind == rbacv1.ServiceAccountKind {
		ns := d.subject.Namespace
		if ns == "" {
			ns = d.namespace
		}
		subject = fmt.Sprintf("%s %q", d.subject.Kind, d.subject.Name+"/"+ns)
	}
	return fmt.Sprintf("%s %q of %s %q to %s", d.kind, d.name, d.ref.Kind, d.ref.Name, subject)
}

// Allows reports whether rule allows the request.
func Allows(attrs authorizer.Attributes, rule *rbacv1.PolicyRule) bool {
	if !matches(rule.Verbs, attrs.GetVerb(), rbacv1.VerbAll) {
		return false
	}
	if !attrs.IsResourceRequest() {
		return urlMatches(rule.NonResourceURLs, attrs.GetPath())
	}
	resource := attrs.GetResource()
	if sub := attrs.GetSubresource(); sub != "" {
		resource += "/" + sub
	}
	return matches(rule.APIGroups, attrs.GetAPIGroup(), rbacv1.APIGroupAll) &&
		resourceMatches(rule.Resources, resource, attrs.GetSubresource()) &&
		(len(rule.ResourceNames) == 0 || matches(rule.ResourceNames, attrs.GetName(), ""))
}

// matches: want is in list, or list holds the wildcard (when not empty).
func matches(list []string, want, wildcard string) bool {
	for _, v := range list {
		if v == want || wildcard != "" && v == wildcard {
			return true
		}
	}
	return false
}

// resourceMatches: "*", the resource (with "/subresource"), or "*/sub".
func resourceMatches(rules []string, resource, subresource string) bool {
	for _, r := range rules {
		if r == rbacv1.ResourceAll || r == resource || subresource != "" && r == "*/"+subresource {
			return true
		}
	}
	return false
}

// urlMatches: "*", the path, or a prefix ending in "*".
func urlMatches(rules []string, path string) bool {
	for _, r := range rules {
		if r == rbacv1.NonResourceAll || r == path || strings.HasSuffix(r, "*") && strings.HasPrefix(path, strings.TrimRight(r, "*")) {
			return true
		}
	}
	return false
}
