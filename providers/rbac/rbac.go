// Package rbac serves rbac.authorization.k8s.io/v1 roles, cluster roles and
// their bindings: storage, defaults and validation, and kube-apiserver's
// bootstrap policy (the rbac/bootstrap-roles hook). Enforcement (the RBAC
// authorizer) is internal/rbac.
package rbac

import (
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"
)

// Provider serves rbac.authorization.k8s.io.
func Provider() providers.Provider { return group }

var group = registry.Group{
	GroupVersion: rbacv1.SchemeGroupVersion, AddToScheme: rbacv1.AddToScheme,
	Served: []registry.Served{roles, clusterRoles, roleBindings, clusterRoleBindings},
	Hooks: map[string]registry.Hook{
		"rbac/bootstrap-roles": bootstrapRoles,
	},
	Link: preventEscalation,
}

// defaultBinding applies rbac/v1's defaults: the roleRef's and users' and
// groups' API group.
func defaultBinding(ref *rbacv1.RoleRef, subjects []rbacv1.Subject) {
	if ref.APIGroup == "" {
		ref.APIGroup = rbacv1.GroupName
	}
	for i := range subjects {
		s := &subjects[i]
		if s.APIGroup == "" && (s.Kind == rbacv1.UserKind || s.Kind == rbacv1.GroupKind) {
			s.APIGroup = rbacv1.GroupName
		}
	}
}

// validateName is ValidateRBACName: any path segment ("system:..." is fine).
func validateName(name string, prefix bool) []string { return path.IsValidPathSegmentName(name) }

func validateRules(rules []rbacv1.PolicyRule, namespaced bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, r := range rules {
		rp := p.Index(i)
		if len(r.Verbs) == 0 {
			errs = append(errs, field.Required(rp.Child("verbs"), ""))
		}
		if len(r.NonResourceURLs) > 0 {
			if namespaced {
				errs = append(errs, field.Invalid(rp.Child("nonResourceURLs"), r.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
			}
			if len(r.APIGroups) > 0 || len(r.Resources) > 0 || len(r.ResourceNames) > 0 {
				errs = append(errs, field.Invalid(rp.Child("nonResourceURLs"), r.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
			}
			continue
		}
		if len(r.APIGroups) == 0 {
			errs = append(errs, field.Required(rp.Child("apiGroups"), "resource rules must supply at least one api group"))
		}
		if len(r.Resources) == 0 {
			errs = append(errs, field.Required(rp.Child("resources"), "resource rules must supply at least one resource"))
		}
	}
	return errs
}

func validateBinding(ref rbacv1.RoleRef, subjects []rbacv1.Subject, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	rp := field.NewPath("roleRef")
	if ref.APIGroup != rbacv1.GroupName {
		errs = append(errs, field.NotSupported(rp.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	kinds := []string{"ClusterRole"}
	if namespaced {
		kinds = []string{"Role", "ClusterRole"}
	}
	if !slices.Contains(kinds, ref.Kind) {
		errs = append(errs, field.NotSupported(rp.Child("kind"), ref.Kind, kinds))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(rp.Child("name"), ""))
	} else {
		for _, msg := range validateName(ref.Name, false) {
			errs = append(errs, field.Invalid(rp.Child("name"), ref.Name, msg))
		}
	}
	for i, s := range subjects {
		errs = append(errs, validateSubject(s, namespaced, field.NewPath("subjects").Index(i))...)
	}
	return errs
}

func validateSubject(s rbacv1.Subject, namespaced bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		if s.Name != "" {
			for _, msg := range apivalidation.NameIsDNSSubdomain(s.Name, false) {
				errs = append(errs, field.Invalid(p.Child("name"), s.Name, msg))
			}
		}
		if s.APIGroup != "" {
			errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{""}))
		}
		if !namespaced && s.Namespace == "" {
			errs = append(errs, field.Required(p.Child("namespace"), ""))
		}
	case rbacv1.UserKind, rbacv1.GroupKind:
		if s.APIGroup != rbacv1.GroupName {
			errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{rbacv1.GroupName}))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("kind"), s.Kind, []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
	}
	return errs
}

// bindingColumns are ROLE, AGE and the wide USERS, GROUPS, SERVICEACCOUNTS.
// kind names the binding in descriptions ("roleBinding"), refDoc describes
// its roleRef.
func bindingColumns[T any](kind, refDoc string, ref func(T) rbacv1.RoleRef, subjects func(T) []rbacv1.Subject) []registry.Column {
	col := func(name string, priority int32, f func(T) any) registry.Column {
		// kube-apiserver documents its internal type, which does not say
		// the field is immutable.
		desc := strings.TrimSuffix(refDoc, " This field is immutable.")
		if name != "Role" {
			desc = name + " in the " + kind
		}
		return registry.Column{TableColumnDefinition: metav1.TableColumnDefinition{Name: name, Type: "string", Priority: priority, Description: desc},
			Value: func(o runtime.Object) any { return f(any(o).(T)) }}
	}
	of := func(kind string) func(T) any {
		return func(b T) any {
			var names []string
			for _, s := range subjects(b) {
				if s.Kind != kind {
					continue
				}
				if kind == rbacv1.ServiceAccountKind {
					names = append(names, s.Namespace+"/"+s.Name)
				} else {
					names = append(names, s.Name)
				}
			}
			return strings.Join(names, ", ")
		}
	}
	return []registry.Column{
		col("Role", 0, func(b T) any { r := ref(b); return r.Kind + "/" + r.Name }),
		registry.AgeColumn(),
		col("Users", 1, of(rbacv1.UserKind)),
		col("Groups", 1, of(rbacv1.GroupKind)),
		col("ServiceAccounts", 1, of(rbacv1.ServiceAccountKind)),
	}
}

func immutableRoleRef(ref, old rbacv1.RoleRef) field.ErrorList {
	if ref != old {
		return field.ErrorList{field.Invalid(field.NewPath("roleRef"), ref, "cannot change roleRef")}
	}
	return nil
}

var roles = registry.Kind[*rbacv1.Role]{GroupVersion: rbacv1.SchemeGroupVersion, NameValidation: validateName, NoAge: true,
	Resource: "roles", Singular: "role", Namespaced: true,
	NewObj: func() runtime.Object { return &rbacv1.Role{} }, NewList: func() runtime.Object { return &rbacv1.RoleList{} },
	Validate: func(r *rbacv1.Role) field.ErrorList { return validateRules(r.Rules, true, field.NewPath("rules")) },
	Columns:  []registry.Column{registry.CreatedAtColumn()}}
var clusterRoles = registry.Kind[*rbacv1.ClusterRole]{GroupVersion: rbacv1.SchemeGroupVersion, NameValidation: validateName, NoAge: true,
	Resource: "clusterroles", Singular: "clusterrole",
	NewObj:  func() runtime.Object { return &rbacv1.ClusterRole{} },
	NewList: func() runtime.Object { return &rbacv1.ClusterRoleList{} },
	Validate: func(r *rbacv1.ClusterRole) field.ErrorList {
		errs := validateRules(r.Rules, false, field.NewPath("rules"))
		if a := r.AggregationRule; a != nil {
			if len(a.ClusterRoleSelectors) == 0 {
				errs = append(errs, field.Required(field.NewPath("aggregationRule", "clusterRoleSelectors"), "at least one clusterRoleSelector required if aggregationRule is non-nil"))
			}
			for i, s := range a.ClusterRoleSelectors {
				errs = append(errs, metav1validation.ValidateLabelSelector(&s, metav1validation.LabelSelectorValidationOptions{},
					field.NewPath("aggregationRule", "clusterRoleSelectors").Index(i))...)
			}
		}
		return errs
	},
	Columns: []registry.Column{registry.CreatedAtColumn()}}
var roleBindings = registry.Kind[*rbacv1.RoleBinding]{
	Default: func(b *rbacv1.RoleBinding) {
		defaultBinding(&b.RoleRef, b.Subjects)
	},
	GroupVersion: rbacv1.SchemeGroupVersion, NameValidation: validateName, NoAge: true,
	Resource: "rolebindings", Singular: "rolebinding", Namespaced: true,
	NewObj:  func() runtime.Object { return &rbacv1.RoleBinding{} },
	NewList: func() runtime.Object { return &rbacv1.RoleBindingList{} },
	Validate: func(b *rbacv1.RoleBinding) field.ErrorList {
		return validateBinding(b.RoleRef, b.Subjects, true)
	},
	ValidateUpdate: func(b, old *rbacv1.RoleBinding) field.ErrorList { return immutableRoleRef(b.RoleRef, old.RoleRef) },
	Columns: bindingColumns("roleBinding", rbacv1.RoleBinding{}.SwaggerDoc()["roleRef"], func(b *rbacv1.RoleBinding) rbacv1.RoleRef { return b.RoleRef },
		func(b *rbacv1.RoleBinding) []rbacv1.Subject { return b.Subjects })}
var clusterRoleBindings = registry.Kind[*rbacv1.ClusterRoleBinding]{
	Default: func(b *rbacv1.ClusterRoleBinding) {
		defaultBinding(&b.RoleRef, b.Subjects)
	},
	GroupVersion: rbacv1.SchemeGroupVersion, NameValidation: validateName, NoAge: true,
	Resource: "clusterrolebindings", Singular: "clusterrolebinding",
	NewObj:  func() runtime.Object { return &rbacv1.ClusterRoleBinding{} },
	NewList: func() runtime.Object { return &rbacv1.ClusterRoleBindingList{} },
	Validate: func(b *rbacv1.ClusterRoleBinding) field.ErrorList {
		return validateBinding(b.RoleRef, b.Subjects, false)
	},
	ValidateUpdate: func(b, old *rbacv1.ClusterRoleBinding) field.ErrorList {
		return immutableRoleRef(b.RoleRef, old.RoleRef)
	},
	Columns: bindingColumns("clusterRoleBinding", rbacv1.ClusterRoleBinding{}.SwaggerDoc()["roleRef"], func(b *rbacv1.ClusterRoleBinding) rbacv1.RoleRef { return b.RoleRef },
		func(b *rbacv1.ClusterRoleBinding) []rbacv1.Subject { return b.Subjects })}
