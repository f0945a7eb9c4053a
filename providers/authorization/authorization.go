// Package authorization serves authorization.k8s.io/v1 SubjectAccessReview,
// SelfSubjectAccessReview, LocalSubjectAccessReview and
// SelfSubjectRulesReview, answered by the server's own authorizer.
package authorization

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"

	"github.com/kubeembed/apiserver/providers/internal/validation"
)

var gv = authorizationv1.SchemeGroupVersion

// Provider serves authorization.k8s.io.
func Provider() providers.Provider { return group }

// group's reviews are never stored: they ask the server's authorizer and
// rule resolver.
var group = registry.Group{
	GroupVersion: gv, AddToScheme: authorizationv1.AddToScheme,
	Served: []registry.Served{
		registry.Computed{Resource: "subjectaccessreviews", Build: func(cfg providers.Config) rest.Storage {
			return &registry.CreateOnly{NewFunc: func() runtime.Object { return &authorizationv1.SubjectAccessReview{} },
				Singular: "subjectaccessreview", CreateFunc: subjectAccessReview(cfg.Authorizer)}
		}},
		registry.Computed{Resource: "selfsubjectaccessreviews", Build: func(cfg providers.Config) rest.Storage {
			return &registry.CreateOnly{NewFunc: func() runtime.Object { return &authorizationv1.SelfSubjectAccessReview{} },
				Singular: "selfsubjectaccessreview", CreateFunc: selfSubjectAccessReview(cfg.Authorizer)}
		}},
		registry.Computed{Resource: "localsubjectaccessreviews", Build: func(cfg providers.Config) rest.Storage {
			return &registry.CreateOnly{NewFunc: func() runtime.Object { return &authorizationv1.LocalSubjectAccessReview{} },
				Singular: "localsubjectaccessreview", Namespaced: true, CreateFunc: localSubjectAccessReview(cfg.Authorizer)}
		}},
		registry.Computed{Resource: "selfsubjectrulesreviews", Build: func(cfg providers.Config) rest.Storage {
			return &registry.CreateOnly{NewFunc: func() runtime.Object { return &authorizationv1.SelfSubjectRulesReview{} },
				Singular: "selfsubjectrulesreview", CreateFunc: selfSubjectRulesReview(cfg.RuleResolver)}
		}},
	},
}

// createFunc answers a review (registry.CreateOnly.CreateFunc).
type createFunc = func(ctx context.Context, obj runtime.Object, validate func() error) (runtime.Object, error)

func subjectAccessReview(authz authorizer.Authorizer) createFunc {
	return func(ctx context.Context, obj runtime.Object, validate func() error) (runtime.Object, error) {
		sar := obj.(*authorizationv1.SubjectAccessReview)
		errs := validateSpec(sar.Spec, true)
		if !emptyMeta(sar.ObjectMeta) {
			errs = append(errs, field.Invalid(field.NewPath("metadata"), sar.ObjectMeta, "must be empty"))
		}
		if len(errs) > 0 {
			return nil, invalid(errs)
		}
		if err := validate(); err != nil {
			return nil, err
		}
		sar.Status = review(ctx, authz, subject(sar.Spec), sar.Spec.ResourceAttributes, sar.Spec.NonResourceAttributes)
		return sar, nil
	}
}

func selfSubjectAccessReview(authz authorizer.Authorizer) createFunc {
	return func(ctx context.Context, obj runtime.Object, validate func() error) (runtime.Object, error) {
		sar := obj.(*authorizationv1.SelfSubjectAccessReview)
		errs := validateSpec(authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: sar.Spec.ResourceAttributes,
			NonResourceAttributes: sar.Spec.NonResourceAttributes}, false)
		if !emptyMeta(sar.ObjectMeta) {
			errs = append(errs, field.Invalid(field.NewPath("metadata"), sar.ObjectMeta, "must be empty"))
		}
		if len(errs) > 0 {
			return nil, invalid(errs)
		}
		u, ok := genericapirequest.UserFrom(ctx)
		if !ok {
			return nil, apierrors.NewBadRequest("no user present on request")
		}
		if err := validate(); err != nil {
			return nil, err
		}
		sar.Status = review(ctx, authz, u, sar.Spec.ResourceAttributes, sar.Spec.NonResourceAttributes)
		return sar, nil
	}
}

func localSubjectAccessReview(authz authorizer.Authorizer) createFunc {
	return func(ctx context.Context, obj runtime.Object, validate func() error) (runtime.Object, error) {
		sar := obj.(*authorizationv1.LocalSubjectAccessReview)
		ns := genericapirequest.NamespaceValue(ctx)
		if sar.Namespace == "" {
			sar.Namespace = ns
		}
		errs := validateSpec(sar.Spec, true)
		meta := sar.ObjectMeta
		meta.Namespace = ""
		if !emptyMeta(meta) {
			errs = append(errs, field.Invalid(field.NewPath("metadata"), sar.ObjectMeta, "must be empty except for namespace"))
		}
		if ra := sar.Spec.ResourceAttributes; ra != nil && ra.Namespace != sar.Namespace {
			errs = append(errs, field.Invalid(field.NewPath("spec.resourceAttributes.namespace"), ra.Namespace, "must match metadata.namespace"))
		}
		if sar.Spec.NonResourceAttributes != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec.nonResourceAttributes"), sar.Spec.NonResourceAttributes, "disallowed on this kind of request"))
		}
		if len(errs) > 0 {
			return nil, invalid(errs)
		}
		if sar.Namespace != ns {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("spec.resourceAttributes.namespace must match namespace: %v", ns))
		}
		if err := validate(); err != nil {
			return nil, err
		}
		sar.Status = review(ctx, authz, subject(sar.Spec), sar.Spec.ResourceAttributes, nil)
		return sar, nil
	}
}

func selfSubjectRulesReview(rules authorizer.RuleResolver) createFunc {
	return func(ctx context.Context, obj runtime.Object, validate func() error) (runtime.Object, error) {
		srr := obj.(*authorizationv1.SelfSubjectRulesReview)
		u, ok := genericapirequest.UserFrom(ctx)
		if !ok {
			return nil, apierrors.NewBadRequest("no user present on request")
		}
		if srr.Spec.Namespace == "" {
			return nil, apierrors.NewBadRequest("no namespace on request")
		}
		if err := validate(); err != nil {
			return nil, err
		}
		out := &authorizationv1.SelfSubjectRulesReview{}
		if rules == nil {
			out.Status.Incomplete = true
			return out, nil
		}
		res, nonRes, incomplete, err := rules.RulesFor(ctx, u, srr.Spec.Namespace)
		out.Status = authorizationv1.SubjectRulesReviewStatus{
			ResourceRules: []authorizationv1.ResourceRule{}, NonResourceRules: []authorizationv1.NonResourceRule{}, Incomplete: incomplete}
		for _, r := range res {
			out.Status.ResourceRules = append(out.Status.ResourceRules, authorizationv1.ResourceRule{
				Verbs: r.GetVerbs(), APIGroups: r.GetAPIGroups(), Resources: r.GetResources(), ResourceNames: r.GetResourceNames()})
		}
		for _, r := range nonRes {
			out.Status.NonResourceRules = append(out.Status.NonResourceRules, authorizationv1.NonResourceRule{
				Verbs: r.GetVerbs(), NonResourceURLs: r.GetNonResourceURLs()})
		}
		if err != nil {
			out.Status.EvaluationError = err.Error()
		}
		return out, nil
	}
}

// invalid is kube-apiserver's error for an invalid review: it names the
// kind from the decoded object's TypeMeta, which its internal types leave
// empty, so the message reads `"" is invalid`.
func invalid(errs field.ErrorList) error {
	return apierrors.NewInvalid(schema.GroupKind{Group: authorizationv1.GroupName}, "", errs)
}

func emptyMeta(m metav1.ObjectMeta) bool {
	m.ManagedFields = nil // set by the server itself
	return m.Name == "" && m.GenerateName == "" && m.Namespace == "" && m.UID == "" && len(m.Labels) == 0 &&
		len(m.Annotations) == 0 && len(m.Finalizers) == 0 && len(m.OwnerReferences) == 0 && m.ResourceVersion == ""
}

// validateSpec is kube-apiserver's check of an access review's spec;
// subjectRequired for the reviews that name a subject.
func validateSpec(spec authorizationv1.SubjectAccessReviewSpec, subjectRequired bool) field.ErrorList {
	p := field.NewPath("spec")
	var errs field.ErrorList
	if (spec.ResourceAttributes != nil) == (spec.NonResourceAttributes != nil) {
		errs = append(errs, field.Invalid(p, validation.AsInternal(spec.NonResourceAttributes), "exactly one of nonResourceAttributes or resourceAttributes must be specified"))
	}
	if subjectRequired && spec.User == "" && len(spec.Groups) == 0 {
		errs = append(errs, field.Invalid(p.Child("user"), spec.User, "at least one of user or group must be specified"))
	}
	return errs
}

func subject(spec authorizationv1.SubjectAccessReviewSpec) user.Info {
	extra := map[string][]string{}
	for k, v := range spec.Extra {
		extra[k] = v
	}
	return &user.DefaultInfo{Name: spec.User, UID: spec.UID, Groups: spec.Groups, Extra: extra}
}

// review asks the authorizer about the attributes as u.
func review(ctx context.Context, authz authorizer.Authorizer, u user.Info, ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) authorizationv1.SubjectAccessReviewStatus {
	attrs := authorizer.AttributesRecord{User: u}
	if ra != nil {
		version := ra.Version
		if version == "" {
			version = "*"
		}
		attrs.Verb, attrs.Namespace, attrs.APIGroup, attrs.APIVersion = ra.Verb, ra.Namespace, ra.Group, version
		attrs.Resource, attrs.Subresource, attrs.Name, attrs.ResourceRequest = ra.Resource, ra.Subresource, ra.Name, true
	} else {
		attrs.Verb, attrs.Path = nra.Verb, nra.Path
	}
	if authz == nil {
		return authorizationv1.SubjectAccessReviewStatus{EvaluationError: "no authorizer"}
	}
	decision, reason, err := authz.Authorize(ctx, attrs)
	status := authorizationv1.SubjectAccessReviewStatus{
		Allowed: decision == authorizer.DecisionAllow, Denied: decision == authorizer.DecisionDeny, Reason: reason}
	if err != nil {
		status.EvaluationError = err.Error()
	}
	return status
}
