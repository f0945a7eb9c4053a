// Package admissionregistration serves admissionregistration.k8s.io/v1:
// validating and mutating webhook configurations, validating and mutating
// admission policies and their bindings. They are stored and validated;
// kubeembed does not call webhooks nor evaluate policies yet.
package admissionregistration

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"
)

var gv = admissionv1.SchemeGroupVersion

// Provider serves admissionregistration.k8s.io.
func Provider() providers.Provider { return group }

var group = registry.Group{
	GroupVersion: gv, AddToScheme: admissionv1.AddToScheme,
	Served: []registry.Served{validatingWebhooks, mutatingWebhooks, validatingPolicies, validatingBindings, mutatingPolicies, mutatingBindings},
}

func defaultFailurePolicy(p **admissionv1.FailurePolicyType) {
	if *p == nil {
		*p = ptr.To(admissionv1.Fail)
	}
}

func defaultRules(rules []admissionv1.RuleWithOperations) {
	for i := range rules {
		if rules[i].Scope == nil {
			rules[i].Scope = ptr.To(admissionv1.AllScopes)
		}
	}
}

func defaultWebhook(cc *admissionv1.WebhookClientConfig, fp **admissionv1.FailurePolicyType, mp **admissionv1.MatchPolicyType, ns, objs **metav1.LabelSelector, timeout **int32, rules []admissionv1.RuleWithOperations) {
	if cc.Service != nil && cc.Service.Port == nil {
		cc.Service.Port = ptr.To[int32](443)
	}
	defaultFailurePolicy(fp)
	if *mp == nil {
		*mp = ptr.To(admissionv1.Equivalent)
	}
	if *ns == nil {
		*ns = &metav1.LabelSelector{}
	}
	if *objs == nil {
		*objs = &metav1.LabelSelector{}
	}
	if *timeout == nil {
		*timeout = ptr.To[int32](10)
	}
	defaultRules(rules)
}

func defaultMatchResources(m *admissionv1.MatchResources) {
	if m == nil {
		return
	}
	if m.MatchPolicy == nil {
		m.MatchPolicy = ptr.To(admissionv1.Equivalent)
	}
	if m.NamespaceSelector == nil {
		m.NamespaceSelector = &metav1.LabelSelector{}
	}
	if m.ObjectSelector == nil {
		m.ObjectSelector = &metav1.LabelSelector{}
	}
	for _, list := range [][]admissionv1.NamedRuleWithOperations{m.ResourceRules, m.ExcludeResourceRules} {
		for i := range list {
			if list[i].Scope == nil {
				list[i].Scope = ptr.To(admissionv1.AllScopes)
			}
		}
	}
}

var sideEffects = []string{string(admissionv1.SideEffectClassNone), string(admissionv1.SideEffectClassNoneOnDryRun)}

// validateWebhook checks what a webhook author most often gets wrong.
func validateWebhook(p *field.Path, w webhook, seen map[string]bool) field.ErrorList {
	name, cc, se, versions, timeout := w.name, w.client, w.effects, w.versions, w.timeout
	var errs field.ErrorList
	if len(strings.Split(name, ".")) < 3 {
		errs = append(errs, field.Invalid(p.Child("name"), name, "should be a domain with at least three segments separated by dots"))
	}
	if seen[name] {
		errs = append(errs, field.Duplicate(p.Child("name"), name))
	}
	seen[name] = true
	switch {
	case cc.URL == nil && cc.Service == nil:
		errs = append(errs, field.Required(p.Child("clientConfig"), "exactly one of url or service is required"))
	case cc.URL != nil && cc.Service != nil:
		errs = append(errs, field.Required(p.Child("clientConfig"), "exactly one of url or service is required"))
	case cc.URL != nil:
		u, err := url.Parse(*cc.URL)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(p.Child("clientConfig", "url"), *cc.URL, fmt.Sprintf("url must be a valid URL: %v", err)))
		case u.Scheme != "https":
			errs = append(errs, field.Invalid(p.Child("clientConfig", "url"), u.Scheme, "'https' is the only allowed URL scheme"))
		}
	}
	if se == nil {
		errs = append(errs, field.Required(p.Child("sideEffects"), fmt.Sprintf("must specify one of %v", strings.Join(sideEffects, ", "))))
	} else if !slices.Contains(sideEffects, string(*se)) {
		errs = append(errs, field.NotSupported(p.Child("sideEffects"), *se, sideEffects))
	}
	if len(versions) == 0 {
		errs = append(errs, field.Required(p.Child("admissionReviewVersions"), "must specify one of v1, v1beta1"))
	}
	if timeout != nil && (*timeout < 1 || *timeout > 30) {
		errs = append(errs, field.Invalid(p.Child("timeoutSeconds"), *timeout, "the timeout value must be between 1 and 30 seconds"))
	}
	return append(errs, validateMatchConditions(w.conditions, false, p.Child("matchConditions"))...)
}

func count[T any](name, desc string, f func(T) int) registry.Column {
	return registry.ColumnOf(name, "integer", desc, 0, func(o T) any { return int64(f(o)) })
}

var validatingWebhooks = webhookConfigurations("validatingwebhookconfigurations",
	func() runtime.Object { return &admissionv1.ValidatingWebhookConfiguration{} },
	func() runtime.Object { return &admissionv1.ValidatingWebhookConfigurationList{} },
	func(c *admissionv1.ValidatingWebhookConfiguration) []webhook {
		out := make([]webhook, len(c.Webhooks))
		for i, w := range c.Webhooks {
			out[i] = webhook{w.Name, w.ClientConfig, w.SideEffects, w.AdmissionReviewVersions, w.TimeoutSeconds, w.MatchConditions}
		}
		return out
	},
	func(c *admissionv1.ValidatingWebhookConfiguration) {
		for i := range c.Webhooks {
			w := &c.Webhooks[i]
			defaultWebhook(&w.ClientConfig, &w.FailurePolicy, &w.MatchPolicy, &w.NamespaceSelector, &w.ObjectSelector, &w.TimeoutSeconds, w.Rules)
		}
	})

var mutatingWebhooks = webhookConfigurations("mutatingwebhookconfigurations",
	func() runtime.Object { return &admissionv1.MutatingWebhookConfiguration{} },
	func() runtime.Object { return &admissionv1.MutatingWebhookConfigurationList{} },
	func(c *admissionv1.MutatingWebhookConfiguration) []webhook {
		out := make([]webhook, len(c.Webhooks))
		for i, w := range c.Webhooks {
			out[i] = webhook{w.Name, w.ClientConfig, w.SideEffects, w.AdmissionReviewVersions, w.TimeoutSeconds, w.MatchConditions}
		}
		return out
	},
	func(c *admissionv1.MutatingWebhookConfiguration) {
		for i := range c.Webhooks {
			w := &c.Webhooks[i]
			defaultWebhook(&w.ClientConfig, &w.FailurePolicy, &w.MatchPolicy, &w.NamespaceSelector, &w.ObjectSelector, &w.TimeoutSeconds, w.Rules)
			if w.ReinvocationPolicy == nil {
				w.ReinvocationPolicy = ptr.To(admissionv1.NeverReinvocationPolicy)
			}
		}
	})

// webhook is what the validating and mutating webhook types share.
type webhook struct {
	name       string
	client     admissionv1.WebhookClientConfig
	effects    *admissionv1.SideEffectClass
	versions   []string
	timeout    *int32
	conditions []admissionv1.MatchCondition
}

// webhookConfigurations declares a webhook configuration kind, C, whose
// webhooks are read by webhooks.
func webhookConfigurations[C runtime.Object](resource string, newObj, newList func() runtime.Object, webhooks func(C) []webhook, defaults func(C)) registry.Kind[C] {
	return registry.Kind[C]{
		GroupVersion: gv, Resource: resource, Singular: strings.TrimSuffix(resource, "s"), Default: defaults,
		Generation: true, Categories: []string{"api-extensions"},
		NewObj: newObj, NewList: newList,
		Validate: func(c C) field.ErrorList {
			var errs field.ErrorList
			seen := map[string]bool{}
			for i, w := range webhooks(c) {
				errs = append(errs, validateWebhook(field.NewPath("webhooks").Index(i), w, seen)...)
			}
			return errs
		},
		Columns: []registry.Column{count("Webhooks", "Webhooks indicates the number of webhooks registered in this configuration",
			func(c C) int { return len(webhooks(c)) })},
	}
}

func paramKind(k *admissionv1.ParamKind) any {
	if k == nil {
		return "<unset>"
	}
	return k.APIVersion + "/" + k.Kind
}

// paramRef is a binding's PARAMREF column as kube-apiserver prints it: the
// param's "namespace/name" ("*/name" without a namespace), else its
// selector in Go syntax, else "<unset>".
func paramRef(r *admissionv1.ParamRef) any {
	switch {
	case r == nil:
		return "<unset>"
	case r.Name != "" && r.Namespace != "":
		return r.Namespace + "/" + r.Name
	case r.Name != "":
		return "*/" + r.Name
	case r.Selector != nil:
		return r.Selector.String()
	}
	return "<unset>"
}

var failurePolicies = []string{string(admissionv1.Ignore), string(admissionv1.Fail)}

func validateFailurePolicy(p *admissionv1.FailurePolicyType) field.ErrorList {
	if p != nil && !slices.Contains(failurePolicies, string(*p)) {
		return field.ErrorList{field.NotSupported(field.NewPath("spec", "failurePolicy"), *p, failurePolicies)}
	}
	return nil
}

var validatingPolicies = registry.Kind[*admissionv1.ValidatingAdmissionPolicy]{
	Default: func(o *admissionv1.ValidatingAdmissionPolicy) {
		s := &o.Spec
		defaultFailurePolicy(&s.FailurePolicy)
		defaultMatchResources(s.MatchConstraints)
	},
	GroupVersion: gv, Resource: "validatingadmissionpolicies", Singular: "validatingadmissionpolicy",
	Generation: true, Status: true, Categories: []string{"api-extensions"},
	NewObj:  func() runtime.Object { return &admissionv1.ValidatingAdmissionPolicy{} },
	NewList: func() runtime.Object { return &admissionv1.ValidatingAdmissionPolicyList{} },
	Validate: func(p *admissionv1.ValidatingAdmissionPolicy) field.ErrorList {
		errs := validateFailurePolicy(p.Spec.FailurePolicy)
		switch {
		case p.Spec.MatchConstraints == nil:
			errs = append(errs, field.Required(field.NewPath("spec", "matchConstraints"), ""))
		case len(p.Spec.MatchConstraints.ResourceRules) == 0:
			errs = append(errs, field.Required(field.NewPath("spec", "matchConstraints", "resourceRules"), ""))
		}
		return append(errs, validatePolicyCEL(p)...)
	},
	Columns: []registry.Column{
		count("Validations", "Validations indicates the number of validation rules defined in this configuration",
			func(p *admissionv1.ValidatingAdmissionPolicy) int { return len(p.Spec.Validations) }),
		registry.ColumnOf("ParamKind", "string", "ParamKind specifies the kind of resources used to parameterize this policy", 0,
			func(p *admissionv1.ValidatingAdmissionPolicy) any { return paramKind(p.Spec.ParamKind) }),
	},
}

var validationActions = []string{string(admissionv1.Deny), string(admissionv1.Warn), string(admissionv1.Audit)}

var validatingBindings = registry.Kind[*admissionv1.ValidatingAdmissionPolicyBinding]{
	Default: func(o *admissionv1.ValidatingAdmissionPolicyBinding) {
		defaultMatchResources(o.Spec.MatchResources)
	},
	GroupVersion: gv, Resource: "validatingadmissionpolicybindings", Singular: "validatingadmissionpolicybinding",
	Generation: true, Categories: []string{"api-extensions"},
	NewObj:  func() runtime.Object { return &admissionv1.ValidatingAdmissionPolicyBinding{} },
	NewList: func() runtime.Object { return &admissionv1.ValidatingAdmissionPolicyBindingList{} },
	Validate: func(b *admissionv1.ValidatingAdmissionPolicyBinding) field.ErrorList {
		p := field.NewPath("spec")
		var errs field.ErrorList
		if b.Spec.PolicyName == "" {
			errs = append(errs, field.Required(p.Child("policyName"), ""))
		}
		if len(b.Spec.ValidationActions) == 0 {
			errs = append(errs, field.Required(p.Child("validationActions"), "at least one validation action is required"))
		}
		seen := map[admissionv1.ValidationAction]bool{}
		for i, a := range b.Spec.ValidationActions {
			switch {
			case !slices.Contains(validationActions, string(a)):
				errs = append(errs, field.NotSupported(p.Child("validationActions").Index(i), a, validationActions))
			case seen[a]:
				errs = append(errs, field.Duplicate(p.Child("validationActions").Index(i), a))
			}
			seen[a] = true
		}
		return errs
	},
	Columns: []registry.Column{
		registry.ColumnOf("PolicyName", "string", "PolicyName indicates the policy definition which the policy binding binded to", 0,
			func(b *admissionv1.ValidatingAdmissionPolicyBinding) any { return b.Spec.PolicyName }),
		registry.ColumnOf("ParamRef", "string", "ParamRef indicates the param resource which sets the configuration param", 0,
			func(b *admissionv1.ValidatingAdmissionPolicyBinding) any { return paramRef(b.Spec.ParamRef) }),
	},
}

var mutatingPolicies = registry.Kind[*admissionv1.MutatingAdmissionPolicy]{
	Default: func(o *admissionv1.MutatingAdmissionPolicy) {
		s := &o.Spec
		defaultFailurePolicy(&s.FailurePolicy)
		defaultMatchResources(s.MatchConstraints)
	},
	GroupVersion: gv, Resource: "mutatingadmissionpolicies", Singular: "mutatingadmissionpolicy",
	Generation: true, Categories: []string{"api-extensions"},
	NewObj:  func() runtime.Object { return &admissionv1.MutatingAdmissionPolicy{} },
	NewList: func() runtime.Object { return &admissionv1.MutatingAdmissionPolicyList{} },
	Validate: func(p *admissionv1.MutatingAdmissionPolicy) field.ErrorList {
		errs := validateFailurePolicy(p.Spec.FailurePolicy)
		if len(p.Spec.Mutations) == 0 {
			errs = append(errs, field.Required(field.NewPath("spec", "mutations"), "mutations must contain at least one item"))
		}
		return errs
	},
	Columns: []registry.Column{
		count("Mutations", "Mutation indicates the number of mutations rules defined in this configuration",
			func(p *admissionv1.MutatingAdmissionPolicy) int { return len(p.Spec.Mutations) }),
		registry.ColumnOf("ParamKind", "string", "ParamKind specifies the kind of resources used to parameterize this policy", 0,
			func(p *admissionv1.MutatingAdmissionPolicy) any { return paramKind(p.Spec.ParamKind) }),
	},
}

var mutatingBindings = registry.Kind[*admissionv1.MutatingAdmissionPolicyBinding]{
	Default: func(o *admissionv1.MutatingAdmissionPolicyBinding) {
		defaultMatchResources(o.Spec.MatchResources)
	},
	GroupVersion: gv, Resource: "mutatingadmissionpolicybindings", Singular: "mutatingadmissionpolicybinding",
	Generation: true, Categories: []string{"api-extensions"},
	NewObj:  func() runtime.Object { return &admissionv1.MutatingAdmissionPolicyBinding{} },
	NewList: func() runtime.Object { return &admissionv1.MutatingAdmissionPolicyBindingList{} },
	Validate: func(b *admissionv1.MutatingAdmissionPolicyBinding) field.ErrorList {
		if b.Spec.PolicyName == "" {
			return field.ErrorList{field.Required(field.NewPath("spec", "policyName"), "")}
		}
		return nil
	},
	Columns: []registry.Column{
		registry.ColumnOf("PolicyName", "string", "PolicyName indicates the policy definition which the policy binding binded to", 0,
			func(b *admissionv1.MutatingAdmissionPolicyBinding) any { return b.Spec.PolicyName }),
		registry.ColumnOf("ParamRef", "string", "ParamRef indicates the param resource which sets the configuration param", 0,
			func(b *admissionv1.MutatingAdmissionPolicyBinding) any { return paramRef(b.Spec.ParamRef) }),
	},
}
