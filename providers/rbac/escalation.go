package rbac

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/component-helpers/auth/rbac/validation"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"
)

// preventEscalation wraps the four stores with kube-apiserver's escalation
// prevention: a user may write a role only with rules it holds itself (or
// with the escalate verb on it), and a binding only to a role whose rules
// it holds (or with the bind verb on it); system:masters may do anything.
// An aggregationRule needs escalate. The refusal is kube-apiserver's 403,
// listing the rules the user lacks.
func preventEscalation(cfg providers.Config, s map[string]rest.Storage) error {
	e := escalation{authz: cfg.Authorizer, rules: cfg.RuleResolver, storage: s}
	for resource, granted := range map[string]func(context.Context, runtime.Object) (grant, error){
		"roles": e.roleGrant, "clusterroles": e.roleGrant, "rolebindings": e.bindingGrant, "clusterrolebindings": e.bindingGrant,
	} {
		store, ok := s[resource].(*registry.Store)
		if !ok {
			return fmt.Errorf("rbac: %s storage is %T", resource, s[resource])
		}
		s[resource] = &escalatingStore{Store: store, check: e, granted: granted}
	}
	return nil
}

// grant is what writing an object grants, and the verb that allows it
// regardless.
type grant struct {
	rules []rbacv1.PolicyRule
	// verb ("escalate", "bind") on resource/name of the RBAC group allows
	// the write without holding the rules.
	verb, resource, name string
	// aggregation: a ClusterRole with an aggregationRule.
	aggregation bool
}

type escalation struct {
	authz   authorizer.Authorizer
	rules   authorizer.RuleResolver
	storage map[string]rest.Storage
}

func (e escalation) roleGrant(ctx context.Context, obj runtime.Object) (grant, error) {
	info, _ := genericapirequest.RequestInfoFrom(ctx)
	switch o := obj.(type) {
	case *rbacv1.Role:
		return grant{rules: o.Rules, verb: "escalate", resource: "roles", name: requestName(info, o.Name)}, nil
	case *rbacv1.ClusterRole:
		return grant{rules: o.Rules, verb: "escalate", resource: "clusterroles", name: requestName(info, o.Name), aggregation: o.AggregationRule != nil}, nil
	}
	return grant{}, fmt.Errorf("unexpected %T", obj)
}

func (e escalation) bindingGrant(ctx context.Context, obj runtime.Object) (grant, error) {
	var ref rbacv1.RoleRef
	ns := ""
	switch o := obj.(type) {
	case *rbacv1.RoleBinding:
		ref, ns = o.RoleRef, o.Namespace
	case *rbacv1.ClusterRoleBinding:
		ref = o.RoleRef
	default:
		return grant{}, fmt.Errorf("unexpected %T", obj)
	}
	g := grant{verb: "bind", resource: "clusterroles", name: ref.Name}
	role, err := e.get(ctx, ref, ns)
	switch r := role.(type) {
	case *rbacv1.Role:
		g.resource, g.rules = "roles", r.Rules
	case *rbacv1.ClusterRole:
		g.rules = r.Rules
	}
	return g, err
}

// get reads the role ref names from its store (not an informer: a role
// written just before counts).
func (e escalation) get(ctx context.Context, ref rbacv1.RoleRef, ns string) (runtime.Object, error) {
	resource := "clusterroles"
	if ref.Kind == "Role" {
		resource = "roles"
	} else {
		ns = ""
	}
	getter, ok := e.storage[resource].(rest.Getter)
	if !ok {
		return nil, fmt.Errorf("no %s storage", resource)
	}
	return getter.Get(genericapirequest.WithNamespace(ctx, ns), ref.Name, &metav1.GetOptions{})
}

func requestName(info *genericapirequest.RequestInfo, fallback string) string {
	if info != nil && info.Name != "" {
		return info.Name
	}
	return fallback
}

// confirm allows the write of obj, or returns kube-apiserver's 403.
func (e escalation) confirm(ctx context.Context, obj runtime.Object, g grant, resolveErr error) error {
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return errors.New("no user on context")
	}
	if slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) || e.verbAllowed(ctx, u, g) {
		return nil
	}
	gr := rbacv1.Resource(g.resource)
	objName := obj.(metav1.Object).GetName()
	if g.aggregation {
		return apierrors.NewForbidden(gr, objName, errors.New("must have cluster-admin privileges to use the aggregationRule"))
	}
	if err := e.covered(ctx, u, g.rules, resolveErr); err != nil {
		return apierrors.NewForbidden(rbacv1.Resource(resourceOf(obj)), objName, err)
	}
	return nil
}

func resourceOf(obj runtime.Object) string {
	switch obj.(type) {
	case *rbacv1.Role:
		return "roles"
	case *rbacv1.ClusterRole:
		return "clusterroles"
	case *rbacv1.RoleBinding:
		return "rolebindings"
	}
	return "clusterrolebindings"
}

// verbAllowed: the user may escalate (or bind) the role by name.
func (e escalation) verbAllowed(ctx context.Context, u user.Info, g grant) bool {
	if e.authz == nil {
		return false
	}
	ns, _ := genericapirequest.NamespaceFrom(ctx)
	d, _, err := e.authz.Authorize(ctx, authorizer.AttributesRecord{User: u, Verb: g.verb, APIGroup: rbacv1.GroupName, APIVersion: "*",
		Resource: g.resource, Name: g.name, Namespace: ns, ResourceRequest: true})
	return err == nil && d == authorizer.DecisionAllow
}

// covered checks that the user's own rules (in the request's namespace)
// cover rules, listing the missing ones as kube-apiserver does.
func (e escalation) covered(ctx context.Context, u user.Info, rules []rbacv1.PolicyRule, resolveErr error) error {
	var errs []error
	if resolveErr != nil {
		errs = append(errs, resolveErr)
	}
	ns, _ := genericapirequest.NamespaceFrom(ctx)
	var owned []rbacv1.PolicyRule
	if e.rules != nil {
		res, nonRes, _, err := e.rules.RulesFor(ctx, u, ns)
		if err != nil {
			errs = append(errs, err)
		}
		for _, r := range res {
			owned = append(owned, rbacv1.PolicyRule{Verbs: r.GetVerbs(), APIGroups: r.GetAPIGroups(), Resources: r.GetResources(), ResourceNames: r.GetResourceNames()})
		}
		for _, r := range nonRes {
			owned = append(owned, rbacv1.PolicyRule{Verbs: r.GetVerbs(), NonResourceURLs: r.GetNonResourceURLs()})
		}
	}
	ok, missing := validation.Covers(owned, rules)
	if ok {
		return nil
	}
	descriptions := sets.New[string]()
	for _, m := range compact(missing) {
		descriptions.Insert(compactString(m))
	}
	msg := fmt.Sprintf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s", u.GetName(), u.GetGroups(), strings.Join(sets.List(descriptions), "\n"))
	if len(errs) > 0 {
		msg += fmt.Sprintf("; resolution errors: %v", errs)
	}
	return errors.New(msg)
}

// compact merges the verbs of rules about one resource of one group (and at
// most one name), as kube-apiserver lists what is missing.
func compact(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	type simple struct{ group, resource, name string }
	merged := map[simple]*rbacv1.PolicyRule{}
	var out []rbacv1.PolicyRule
	for _, r := range rules {
		if len(r.ResourceNames) > 1 || len(r.NonResourceURLs) > 0 || len(r.APIGroups) != 1 || len(r.Resources) != 1 {
			out = append(out, r)
			continue
		}
		k := simple{r.APIGroups[0], r.Resources[0], strings.Join(r.ResourceNames, "")}
		if m, ok := merged[k]; ok {
			m.Verbs = append(m.Verbs, r.Verbs...)
			continue
		}
		merged[k] = r.DeepCopy()
	}
	for _, r := range merged {
		out = append(out, *r)
	}
	return out
}

// compactString is kube-apiserver's rendering of a rule in that list.
func compactString(r rbacv1.PolicyRule) string {
	var parts []string
	add := func(name string, v []string) {
		if len(v) > 0 {
			parts = append(parts, fmt.Sprintf("%s:%q", name, v))
		}
	}
	add("APIGroups", r.APIGroups)
	add("Resources", r.Resources)
	add("NonResourceURLs", r.NonResourceURLs)
	add("ResourceNames", r.ResourceNames)
	add("Verbs", r.Verbs)
	return "{" + strings.Join(parts, ", ") + "}"
}

// escalatingStore checks creates and updates before the store.
type escalatingStore struct {
	*registry.Store
	check   escalation
	granted func(context.Context, runtime.Object) (grant, error)
}

func (s *escalatingStore) Create(ctx context.Context, obj runtime.Object, v rest.ValidateObjectFunc, opts *metav1.CreateOptions) (runtime.Object, error) {
	g, err := s.granted(ctx, obj)
	if err := s.check.confirm(ctx, obj, g, err); err != nil {
		return nil, err
	}
	return s.Store.Create(ctx, obj, v, opts)
}

func (s *escalatingStore) Update(ctx context.Context, name string, info rest.UpdatedObjectInfo, cv rest.ValidateObjectFunc, uv rest.ValidateObjectUpdateFunc, force bool, opts *metav1.UpdateOptions) (runtime.Object, bool, error) {
	checked := rest.WrapUpdatedObjectInfo(info, func(ctx context.Context, obj, old runtime.Object) (runtime.Object, error) {
		if onlyGCFields(obj, old) {
			return obj, nil
		}
		g, err := s.granted(ctx, obj)
		if err := s.check.confirm(ctx, obj, g, err); err != nil {
			return nil, err
		}
		return obj, nil
	})
	return s.Store.Update(ctx, name, checked, cv, uv, force, opts)
}

// onlyGCFields: the update changes only what the garbage collector writes
// (owner references, finalizers), which needs no escalation check.
func onlyGCFields(obj, old runtime.Object) bool {
	if old == nil {
		return false
	}
	copied := obj.DeepCopyObject()
	c, err1 := meta.Accessor(copied)
	o, err2 := meta.Accessor(old)
	if err1 != nil || err2 != nil {
		return false
	}
	c.SetOwnerReferences(o.GetOwnerReferences())
	c.SetFinalizers(o.GetFinalizers())
	c.SetManagedFields(o.GetManagedFields())
	return equality.Semantic.DeepEqual(copied, old)
}
