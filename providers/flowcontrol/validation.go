package flowcontrol

import (
	"context"
	"fmt"
	"slices"
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	flowcontrolv1beta3 "k8s.io/api/flowcontrol/v1beta3"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/validate"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/apiserver/pkg/util/shufflesharding"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/providers/internal/validation"
)

// FlowSchema and PriorityLevelConfiguration validation, as kube-apiserver
// v1.37 answers a flowcontrol.apiserver.k8s.io/v1 write.
//
// kube-apiserver validates its internal objects by hand, after the v1
// defaults (which this provider's Default funcs apply): every
// pointer they fill (nominalConcurrencyShares, lendablePercent) is set
// here, and a matchingPrecedence or a queuing field of 0 is its default
// already, so only a negative one is refused (the queuing fields are
// defaulted only in a queuing block given: a Queue limit response without
// one is refused). Creates and updates are checked alike (both
// strategies validate the whole object; no options).
//
// A priority level's spec is then validated declaratively too: the
// discriminated unions (type/limited/exempt, limitResponse.type/queuing)
// and the required types are beta, and DeclarativeValidationBeta is on by
// default, so those errors are enforced with their own bare messages
// ("Required value", "Forbidden"). They replace the hand-written errors
// marked as covered, come after all hand-written errors, and forbid a
// limited or exempt block (or queuing) under any other type, where the
// hand-written checks look at the known types only. (Declaratively an
// update does not check again a part it leaves as it was; an update
// of a stored, valid object cannot tell the difference.)

var (
	distinguisherMethods = []string{string(flowcontrolv1.FlowDistinguisherMethodByNamespaceType), string(flowcontrolv1.FlowDistinguisherMethodByUserType)}
	subjectKinds         = []string{string(flowcontrolv1.SubjectKindGroup), string(flowcontrolv1.SubjectKindServiceAccount), string(flowcontrolv1.SubjectKindUser)}
	enablements          = []string{string(flowcontrolv1.PriorityLevelEnablementExempt), string(flowcontrolv1.PriorityLevelEnablementLimited)}
	limitResponseTypes   = []string{string(flowcontrolv1.LimitResponseTypeQueue), string(flowcontrolv1.LimitResponseTypeReject)}
	// verbs are the verbs a rule may name.
	verbs = sets.New("get", "list", "create", "update", "delete", "deletecollection", "patch", "watch", "proxy")
)

// maxQueues is the most queues a priority level may have.
const maxQueues int32 = 10 * 1000 * 1000

// nsErrIntro prefixes the errors of a resource rule's namespaces.
const nsErrIntro = "each member of this list must be '*' or a DNS-1123 label; "

// The mandatory objects' specs, by name: kube-apiserver holds them fixed.
var (
	mandatoryLevels  = byName(bootstrap.MandatoryPriorityLevelConfigurations)
	mandatorySchemas = byName(bootstrap.MandatoryFlowSchemas)
)

func byName[T interface{ GetName() string }](objs []T) map[string]T {
	m := make(map[string]T, len(objs))
	for _, o := range objs {
		m[o.GetName()] = o
	}
	return m
}

// validateFlowSchema checks a flow schema (its metadata is checked
// already).
func validateFlowSchema(fs *flowcontrolv1.FlowSchema) field.ErrorList {
	p := field.NewPath("spec")
	errs := validateFlowSchemaSpec(fs.Name, &fs.Spec, p)
	if mand, ok := mandatorySchemas[fs.Name]; ok && !equality.Semantic.DeepEqual(fs.Spec, mand.Spec) {
		errs = append(errs, field.Invalid(p, validation.AsInternal(fs.Spec), fmt.Sprintf("spec of '%s' must equal the fixed value", fs.Name)))
	}
	errs = append(errs, validateFlowSchemaStatus(fs, nil)...)
	// Nothing of a flow schema is validated declaratively, but its
	// hand-written errors are deduplicated all the same.
	return withDeclarative(errs, nil)
}

// validateFlowSchemaStatus checks a flow schema's status: what a write of
// /status checks.
func validateFlowSchemaStatus(fs, _ *flowcontrolv1.FlowSchema) field.ErrorList {
	types := make([]flowcontrolv1.FlowSchemaConditionType, len(fs.Status.Conditions))
	for i, c := range fs.Status.Conditions {
		types[i] = c.Type
	}
	return validateConditionTypes(types, field.NewPath("status", "conditions"))
}

// validatePriorityLevelStatus checks a priority level's status: what a
// write of /status checks.
func validatePriorityLevelStatus(pl, _ *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
	types := make([]flowcontrolv1.PriorityLevelConfigurationConditionType, len(pl.Status.Conditions))
	for i, c := range pl.Status.Conditions {
		types[i] = c.Type
	}
	return validateConditionTypes(types, field.NewPath("status", "conditions"))
}

// validateConditionTypes: each condition has a type, and no other
// condition before it the same.
func validateConditionTypes[T ~string](types []T, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[T]()
	for i, t := range types {
		if seen.Has(t) {
			errs = append(errs, field.Duplicate(p.Index(i).Child("type"), t))
		}
		seen.Insert(t)
		if t == "" {
			errs = append(errs, field.Required(p.Index(i).Child("type"), ""))
		}
	}
	return errs
}

func validateFlowSchemaSpec(name string, spec *flowcontrolv1.FlowSchemaSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	m := spec.MatchingPrecedence
	if m <= 0 {
		errs = append(errs, field.Invalid(p.Child("matchingPrecedence"), m, "must be a positive value"))
	}
	if m > flowcontrolv1.FlowSchemaMaxMatchingPrecedence {
		errs = append(errs, field.Invalid(p.Child("matchingPrecedence"), m, fmt.Sprintf("must not be greater than %v", flowcontrolv1.FlowSchemaMaxMatchingPrecedence)))
	}
	if m == 1 && name != flowcontrolv1.FlowSchemaNameExempt {
		errs = append(errs, field.Invalid(p.Child("matchingPrecedence"), m, "only the schema named 'exempt' may have matchingPrecedence 1"))
	}
	if d := spec.DistinguisherMethod; d != nil && !slices.Contains(distinguisherMethods, string(d.Type)) {
		errs = append(errs, field.NotSupported(p.Child("distinguisherMethod", "type"), validation.AsInternal(d), distinguisherMethods))
	}
	pl := p.Child("priorityLevelConfiguration", "name")
	if n := spec.PriorityLevelConfiguration.Name; n != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(n, false) {
			errs = append(errs, field.Invalid(pl, n, msg))
		}
	} else {
		errs = append(errs, field.Required(pl, "must reference a priority level"))
	}
	for i := range spec.Rules {
		errs = append(errs, validateRules(&spec.Rules[i], p.Child("rules").Index(i))...)
	}
	return errs
}

func validateRules(r *flowcontrolv1.PolicyRulesWithSubjects, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.Subjects) == 0 {
		errs = append(errs, field.Required(p.Child("subjects"), "subjects must contain at least one value"))
	}
	for i := range r.Subjects {
		errs = append(errs, validateSubject(&r.Subjects[i], p.Child("subjects").Index(i))...)
	}
	if len(r.ResourceRules) == 0 && len(r.NonResourceRules) == 0 {
		errs = append(errs, field.Required(p, "at least one of resourceRules and nonResourceRules has to be non-empty"))
	}
	for i := range r.ResourceRules {
		errs = append(errs, validateResourceRule(&r.ResourceRules[i], p.Child("resourceRules").Index(i))...)
	}
	for i := range r.NonResourceRules {
		errs = append(errs, validateNonResourceRule(&r.NonResourceRules[i], p.Child("nonResourceRules").Index(i))...)
	}
	return errs
}

// validateSubject checks the member the kind names and forbids the
// others.
func validateSubject(s *flowcontrolv1.Subject, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch s.Kind {
	case flowcontrolv1.SubjectKindServiceAccount:
		errs = validateServiceAccountSubject(s.ServiceAccount, p.Child("serviceAccount"))
	case flowcontrolv1.SubjectKindUser:
		errs = validateNamedSubject(s.User == nil, ptr.Deref(s.User, flowcontrolv1.UserSubject{}).Name, "user", "User", p)
	case flowcontrolv1.SubjectKindGroup:
		errs = validateNamedSubject(s.Group == nil, ptr.Deref(s.Group, flowcontrolv1.GroupSubject{}).Name, "group", "Group", p)
	default:
		return field.ErrorList{field.NotSupported(p.Child("kind"), s.Kind, subjectKinds)}
	}
	// The members of the other kinds, in the order of the kinds.
	others := []struct {
		set        bool
		name, kind string
	}{
		{s.ServiceAccount != nil, "serviceAccount", string(flowcontrolv1.SubjectKindServiceAccount)},
		{s.User != nil, "user", string(flowcontrolv1.SubjectKindUser)},
		{s.Group != nil, "group", string(flowcontrolv1.SubjectKindGroup)},
	}
	for _, o := range others {
		if o.set && o.kind != string(s.Kind) {
			errs = append(errs, field.Forbidden(p.Child(o.name), fmt.Sprintf("%s is forbidden when subject kind is not '%s'", o.name, o.kind)))
		}
	}
	return errs
}

func validateServiceAccountSubject(sa *flowcontrolv1.ServiceAccountSubject, p *field.Path) field.ErrorList {
	if sa == nil {
		return field.ErrorList{field.Required(p, "serviceAccount is required when subject kind is 'ServiceAccount'")}
	}
	var errs field.ErrorList
	if sa.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else if sa.Name != flowcontrolv1.NameAll {
		for _, msg := range apivalidation.ValidateServiceAccountName(sa.Name, false) {
			errs = append(errs, field.Invalid(p.Child("name"), sa.Name, msg))
		}
	}
	if sa.Namespace == "" {
		return append(errs, field.Required(p.Child("namespace"), "must specify namespace for service account"))
	}
	for _, msg := range apivalidation.ValidateNamespaceName(sa.Namespace, false) {
		errs = append(errs, field.Invalid(p.Child("namespace"), sa.Namespace, msg))
	}
	return errs
}

// validateNamedSubject checks a user or group subject (member, of kind).
func validateNamedSubject(missing bool, name, member, kind string, p *field.Path) field.ErrorList {
	if missing {
		return field.ErrorList{field.Required(p.Child(member), fmt.Sprintf("%s is required when subject kind is '%s'", member, kind))}
	}
	if name == "" {
		return field.ErrorList{field.Required(p.Child(member, "name"), "")}
	}
	return nil
}

// validateVerbs checks the verbs of a resource or non-resource rule.
func validateVerbs(vs []string, p *field.Path) field.ErrorList {
	switch {
	case len(vs) == 0:
		return field.ErrorList{field.Required(p, "verbs must contain at least one value")}
	case slices.Contains(vs, flowcontrolv1.VerbAll):
		if len(vs) > 1 {
			return field.ErrorList{field.Invalid(p, vs, "if '*' is present, must not specify other verbs")}
		}
	case !verbs.HasAll(vs...):
		return field.ErrorList{field.NotSupported(p, vs, sets.List(verbs))}
	}
	return nil
}

// validateList checks a list of a resource rule that must not be empty,
// and names "*" alone if at all.
func validateList(list []string, p *field.Path, required, plural string) field.ErrorList {
	if len(list) == 0 {
		return field.ErrorList{field.Required(p, required)}
	}
	if len(list) > 1 && slices.Contains(list, "*") {
		return field.ErrorList{field.Invalid(p, list, "if '*' is present, must not specify other "+plural)}
	}
	return nil
}

func validateResourceRule(r *flowcontrolv1.ResourcePolicyRule, p *field.Path) field.ErrorList {
	errs := validateVerbs(r.Verbs, p.Child("verbs"))
	errs = append(errs, validateList(r.APIGroups, p.Child("apiGroups"), "resource rules must supply at least one api group", "api groups")...)
	errs = append(errs, validateList(r.Resources, p.Child("resources"), "resource rules must supply at least one resource", "resources")...)
	ns := p.Child("namespaces")
	switch {
	case len(r.Namespaces) == 0 && !r.ClusterScope:
		errs = append(errs, field.Required(ns, "resource rules that are not cluster scoped must supply at least one namespace"))
	case slices.Contains(r.Namespaces, flowcontrolv1.NamespaceEvery):
		if len(r.Namespaces) > 1 {
			errs = append(errs, field.Invalid(ns, r.Namespaces, "if '*' is present, must not specify other namespaces"))
		}
	default:
		for i, n := range r.Namespaces {
			for _, msg := range apivalidation.ValidateNamespaceName(n, false) {
				errs = append(errs, field.Invalid(ns.Index(i), n, nsErrIntro+msg))
			}
		}
	}
	return errs
}

func validateNonResourceRule(r *flowcontrolv1.NonResourcePolicyRule, p *field.Path) field.ErrorList {
	errs := validateVerbs(r.Verbs, p.Child("verbs"))
	urls := p.Child("nonResourceURLs")
	switch {
	case len(r.NonResourceURLs) == 0:
		errs = append(errs, field.Required(urls, "nonResourceURLs must contain at least one value"))
	case slices.Contains(r.NonResourceURLs, flowcontrolv1.NonResourceAll):
		if len(r.NonResourceURLs) > 1 {
			errs = append(errs, field.Invalid(urls, r.NonResourceURLs, "if '*' is present, must not specify other non-resource URLs"))
		}
	default:
		for i, u := range r.NonResourceURLs {
			if msg := nonResourceURLError(u); msg != "" {
				errs = append(errs, field.Invalid(urls.Index(i), u, msg))
			}
		}
	}
	return errs
}

// nonResourceURLError is what is wrong with a non-resource URL path, if
// anything: it starts with a slash, has no white space and no double
// slash, and a wildcard only as its last segment.
func nonResourceURLError(path string) string {
	switch {
	case path == "":
		return "must not be empty"
	case path == "/":
		return ""
	case !strings.HasPrefix(path, "/"):
		return "must start with slash"
	case strings.Contains(path, " "):
		return "must not contain white-space"
	case strings.Contains(path, "//"):
		return "must not contain double slash"
	}
	if n := strings.Count(path, "*"); n > 1 || (n == 1 && !strings.HasSuffix(path, "/*")) {
		return "wildcard can only do suffix matching"
	}
	return ""
}

// validatePriorityLevel checks a priority level (its metadata is checked
// already): by hand, then declaratively.
func validatePriorityLevel(pl *flowcontrolv1.PriorityLevelConfiguration) field.ErrorList {
	var errs field.ErrorList
	if _, ok := pl.Annotations[flowcontrolv1beta3.PriorityLevelPreserveZeroConcurrencySharesKey]; ok {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "annotations"),
			fmt.Sprintf("annotation '%s' is forbidden", flowcontrolv1beta3.PriorityLevelPreserveZeroConcurrencySharesKey)))
	}
	p := field.NewPath("spec")
	errs = append(errs, validatePriorityLevelSpec(pl.Name, &pl.Spec, p)...)
	errs = append(errs, validateMandatoryLevel(pl, p)...)
	errs = append(errs, validatePriorityLevelStatus(pl, nil)...)
	return withDeclarative(errs, declarativePriorityLevelSpec(&pl.Spec, p))
}

// withDeclarative merges the enforced (beta) declarative errors into the
// hand-written ones, as kube-apiserver does: a hand-written error covered
// by a declarative one of its type and field gives way to it (and the
// hand-written errors left are deduplicated), and the declarative errors
// come last.
func withDeclarative(handwritten, declarative field.ErrorList) field.ErrorList {
	declarative = declarative.MarkBeta()
	return append(validate.FilterCoveredHandwrittenErrors(context.Background(), handwritten, declarative, true), declarative...)
}

// validateMandatoryLevel holds a mandatory level's spec fixed, but for
// the exempt level's spec.exempt, which an administrator may change.
func validateMandatoryLevel(pl *flowcontrolv1.PriorityLevelConfiguration, p *field.Path) field.ErrorList {
	mand, ok := mandatoryLevels[pl.Name]
	if !ok {
		return nil
	}
	have, msg := pl.Spec.DeepCopy(), fmt.Sprintf("spec of '%s' must equal the fixed value", pl.Name)
	if pl.Name == flowcontrolv1.PriorityLevelConfigurationNameExempt {
		have.Exempt = mand.Spec.Exempt
		msg = fmt.Sprintf("spec of '%s' except the 'spec.exempt' field must equal the fixed value", pl.Name)
	}
	if equality.Semantic.DeepEqual(&mand.Spec, have) {
		return nil
	}
	return field.ErrorList{field.Invalid(p, validation.AsInternal(pl.Spec), msg)}
}

func validatePriorityLevelSpec(name string, spec *flowcontrolv1.PriorityLevelConfigurationSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if (name == flowcontrolv1.PriorityLevelConfigurationNameExempt) != (spec.Type == flowcontrolv1.PriorityLevelEnablementExempt) {
		errs = append(errs, field.Invalid(p.Child("type"), spec.Type, "must be 'Exempt' if and only if `name` is 'exempt'"))
	}
	switch spec.Type {
	case flowcontrolv1.PriorityLevelEnablementExempt:
		if spec.Limited != nil {
			errs = append(errs, field.Forbidden(p.Child("limited"), "must be nil if the type is not Limited").MarkCoveredByDeclarative())
		}
		if e := spec.Exempt; e != nil {
			errs = append(errs, validateShares(e.NominalConcurrencyShares, e.LendablePercent, p.Child("exempt"))...)
		}
	case flowcontrolv1.PriorityLevelEnablementLimited:
		if spec.Exempt != nil {
			errs = append(errs, field.Forbidden(p.Child("exempt"), "must be nil if the type is Limited").MarkCoveredByDeclarative())
		}
		if spec.Limited == nil {
			errs = append(errs, field.Required(p.Child("limited"), "must not be empty when type is Limited").MarkCoveredByDeclarative())
		} else {
			errs = append(errs, validateLimited(spec.Limited, p.Child("limited"))...)
		}
	case "":
		errs = append(errs, field.Required(p.Child("type"), "").MarkCoveredByDeclarative())
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), spec.Type, enablements))
	}
	return errs
}

// validateShares checks the nominal concurrency shares and lendable
// percent of a level (set by the defaults, unless a test bypasses them).
func validateShares(shares, lendable *int32, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if shares != nil && *shares < 0 {
		errs = append(errs, field.Invalid(p.Child("nominalConcurrencyShares"), *shares, "must be a non-negative integer"))
	}
	if lendable != nil && (*lendable < 0 || *lendable > 100) {
		errs = append(errs, field.Invalid(p.Child("lendablePercent"), *lendable, "must be between 0 and 100, inclusive"))
	}
	return errs
}

func validateLimited(l *flowcontrolv1.LimitedPriorityLevelConfiguration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s := ptr.Deref(l.NominalConcurrencyShares, 0); s < 0 {
		errs = append(errs, field.Invalid(p.Child("nominalConcurrencyShares"), s, "must be a non-negative integer"))
	}
	errs = append(errs, validateLimitResponse(&l.LimitResponse, p.Child("limitResponse"))...)
	errs = append(errs, validateShares(nil, l.LendablePercent, p)...)
	if b := l.BorrowingLimitPercent; b != nil && *b < 0 {
		errs = append(errs, field.Invalid(p.Child("borrowingLimitPercent"), *b, "if specified, must be a non-negative integer"))
	}
	return errs
}

func validateLimitResponse(lr *flowcontrolv1.LimitResponse, p *field.Path) field.ErrorList {
	switch lr.Type {
	case flowcontrolv1.LimitResponseTypeReject:
		if lr.Queuing != nil {
			return field.ErrorList{field.Forbidden(p.Child("queuing"), "must be nil if limited.limitResponse.type is not Limited").MarkCoveredByDeclarative()}
		}
	case flowcontrolv1.LimitResponseTypeQueue:
		if lr.Queuing == nil {
			return field.ErrorList{field.Required(p.Child("queuing"), "must not be empty if limited.limitResponse.type is Limited").MarkCoveredByDeclarative()}
		}
		return validateQueuing(lr.Queuing, p.Child("queuing"))
	case "":
		return field.ErrorList{field.Required(p.Child("type"), "").MarkCoveredByDeclarative()}
	default:
		return field.ErrorList{field.NotSupported(p.Child("type"), lr.Type, limitResponseTypes)}
	}
	return nil
}

// validateQueuing checks a queuing configuration, and that shuffle
// sharding can deal its hands.
func validateQueuing(q *flowcontrolv1.QueuingConfiguration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if q.QueueLengthLimit <= 0 {
		errs = append(errs, field.Invalid(p.Child("queueLengthLimit"), q.QueueLengthLimit, "must be positive"))
	}
	if q.Queues <= 0 {
		errs = append(errs, field.Invalid(p.Child("queues"), q.Queues, "must be positive"))
	} else if q.Queues > maxQueues {
		errs = append(errs, field.Invalid(p.Child("queues"), q.Queues, fmt.Sprintf("must not be greater than %d", maxQueues)))
	}
	hand := p.Child("handSize")
	switch {
	case q.HandSize <= 0:
		errs = append(errs, field.Invalid(hand, q.HandSize, "must be positive"))
	case q.HandSize > q.Queues:
		errs = append(errs, field.Invalid(hand, q.HandSize, fmt.Sprintf("should not be greater than queues (%d)", q.Queues)))
	case shufflesharding.RequiredEntropyBits(int(q.Queues), int(q.HandSize)) > shufflesharding.MaxHashBits:
		errs = append(errs, field.Invalid(hand, q.HandSize, fmt.Sprintf("required entropy bits of deckSize %d and handSize %d should not be greater than %d",
			q.Queues, q.HandSize, shufflesharding.MaxHashBits)))
	}
	return errs
}

// declarativePriorityLevelSpec is the declarative validation of a level's
// spec: the exempt and limited members of the type union, the type, then
// the limited member's limit response (whatever the type).
func declarativePriorityLevelSpec(spec *flowcontrolv1.PriorityLevelConfigurationSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.Exempt != nil && spec.Type != flowcontrolv1.PriorityLevelEnablementExempt {
		errs = append(errs, field.Forbidden(p.Child("exempt"), ""))
	}
	errs = append(errs, unionMember(spec.Limited != nil, spec.Type == flowcontrolv1.PriorityLevelEnablementLimited, p.Child("limited"))...)
	if spec.Type == "" {
		errs = append(errs, field.Required(p.Child("type"), ""))
	}
	if l := spec.Limited; l != nil {
		lr := p.Child("limited", "limitResponse")
		errs = append(errs, unionMember(l.LimitResponse.Queuing != nil, l.LimitResponse.Type == flowcontrolv1.LimitResponseTypeQueue, lr.Child("queuing"))...)
		if l.LimitResponse.Type == "" {
			errs = append(errs, field.Required(lr.Child("type"), ""))
		}
	}
	return errs
}

// unionMember: a member is required when the discriminator selects it,
// and forbidden when it does not.
func unionMember(set, selected bool, p *field.Path) field.ErrorList {
	switch {
	case selected && !set:
		return field.ErrorList{field.Required(p, "")}
	case !selected && set:
		return field.ErrorList{field.Forbidden(p, "")}
	}
	return nil
}
