package autoscaling

import (
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeembed/apiserver/providers/internal/validation"
)

// HorizontalPodAutoscaler validation, as kube-apiserver v1.37 answers it.
//
// kube-apiserver validates the spec by hand and then declaratively; the
// declarative minReplicas and maxReplicas checks are beta and enforced
// (DeclarativeValidationBeta is on by default), so they replace the
// hand-written ones and come after every other error, with their own
// messages (maxReplicas 0 is a bare "Required value"), and the hand-written
// errors are deduplicated by text. On an update the
// declarative checks skip a field that did not change, where the
// hand-written one stays. HPAScaleToZero is on by default: minReplicas may
// be 0, and then needs an Object or External metric. HPAConfigurableTolerance
// is GA: tolerances are kept and validated.

const (
	maxPeriodSeconds              int32 = 1800
	maxStabilizationWindowSeconds int32 = 3600
)

var (
	metricSourceTypes = []string{string(autoscalingv2.ContainerResourceMetricSourceType), string(autoscalingv2.ExternalMetricSourceType),
		string(autoscalingv2.ObjectMetricSourceType), string(autoscalingv2.PodsMetricSourceType), string(autoscalingv2.ResourceMetricSourceType)}
	selectPolicies = []string{string(autoscalingv2.DisabledPolicySelect), string(autoscalingv2.MaxChangePolicySelect), string(autoscalingv2.MinChangePolicySelect)}
	policyTypes    = []string{string(autoscalingv2.PercentScalingPolicy), string(autoscalingv2.PodsScalingPolicy)}

	standardContainerResources = sets.New[corev1.ResourceName](corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage)
	standardResources          = sets.New[corev1.ResourceName](corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage,
		corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceRequestsEphemeralStorage,
		corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourceLimitsEphemeralStorage,
		corev1.ResourcePods, corev1.ResourceQuotas, corev1.ResourceServices, corev1.ResourceReplicationControllers,
		corev1.ResourceSecrets, corev1.ResourceConfigMaps, corev1.ResourcePersistentVolumeClaims, corev1.ResourceStorage,
		corev1.ResourceRequestsStorage, corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers)
)

// refOptions are how a CrossVersionObjectReference's apiVersion is checked.
type refOptions struct {
	allowInvalidAPIVersion, allowEmptyGroup bool
}

// specOptions are kube-apiserver's options for one write: the scale
// target's and the object metrics' references.
type specOptions struct {
	target, objectMetrics refOptions
}

// validate checks a new autoscaler.
func validate(h *autoscalingv2.HorizontalPodAutoscaler) field.ErrorList {
	return validateSpec(&h.Spec, nil)
}

// validateUpdate checks an autoscaler replacing old.
func validateUpdate(h, old *autoscalingv2.HorizontalPodAutoscaler) field.ErrorList {
	return validateSpec(&h.Spec, &old.Spec)
}

// optionsFor: an update keeping the target's apiVersion and kind does not
// check its apiVersion again; a ReplicationController target may name the
// core group; object metrics may name any group, and an update of an
// autoscaler whose object metrics already have a bad apiVersion does not
// check theirs.
func optionsFor(spec, old *autoscalingv2.HorizontalPodAutoscalerSpec) specOptions {
	opts := specOptions{objectMetrics: refOptions{allowEmptyGroup: true}}
	ref := spec.ScaleTargetRef
	switch {
	case old != nil && old.ScaleTargetRef.APIVersion == ref.APIVersion && old.ScaleTargetRef.Kind == ref.Kind:
		opts.target.allowInvalidAPIVersion = true
	case ref.Kind == "ReplicationController":
		opts.target.allowEmptyGroup = true
	}
	if old != nil {
		for _, m := range old.Metrics {
			if m.Type == autoscalingv2.ObjectMetricSourceType && m.Object != nil && apiVersionError(m.Object.DescribedObject, opts.objectMetrics) != nil {
				opts.objectMetrics.allowInvalidAPIVersion = true
				break
			}
		}
	}
	return opts
}

// validateSpec checks spec (old is nil on create), in kube-apiserver's
// order: minReplicas and maxReplicas, the scale target, metrics, behavior,
// then the declarative replica checks.
func validateSpec(spec, old *autoscalingv2.HorizontalPodAutoscalerSpec) field.ErrorList {
	p := field.NewPath("spec")
	opts := optionsFor(spec, old)
	// Declarative validation skips a field an update leaves as it was: the
	// hand-written check then stands, in its place.
	minRatcheted := old != nil && equalPtr(spec.MinReplicas, old.MinReplicas)
	maxRatcheted := old != nil && spec.MaxReplicas == old.MaxReplicas

	var errs, declarative field.ErrorList
	if m := spec.MinReplicas; m != nil && *m < 0 {
		e := field.Invalid(p.Child("minReplicas"), *m, "must be greater than or equal to 0")
		if minRatcheted {
			errs = append(errs, e)
		} else {
			declarative = append(declarative, e)
		}
	}
	switch {
	case spec.MaxReplicas == 0 && maxRatcheted:
		errs = append(errs, field.Required(p.Child("maxReplicas"), "must be set and greater than 0"))
	case spec.MaxReplicas == 0:
		declarative = append(declarative, field.Required(p.Child("maxReplicas"), ""))
	case spec.MaxReplicas < 0:
		e := field.Invalid(p.Child("maxReplicas"), spec.MaxReplicas, "must be greater than or equal to 1")
		if maxRatcheted {
			errs = append(errs, e)
		} else {
			declarative = append(declarative, e)
		}
	}
	if m := spec.MinReplicas; m != nil && spec.MaxReplicas < *m {
		errs = append(errs, field.Invalid(p.Child("maxReplicas"), spec.MaxReplicas, "must be greater than or equal to `minReplicas`"))
	}
	errs = append(errs, validateReference(spec.ScaleTargetRef, p.Child("scaleTargetRef"), opts.target)...)
	errs = append(errs, validateMetrics(spec.Metrics, p.Child("metrics"), spec.MinReplicas, opts.objectMetrics)...)
	if b := spec.Behavior; b != nil {
		errs = append(errs, validateRules(b.ScaleUp, p.Child("behavior", "scaleUp"))...)
		errs = append(errs, validateRules(b.ScaleDown, p.Child("behavior", "scaleDown"))...)
	}
	// Filtering the covered errors out deduplicates the hand-written ones
	// (a metric of an unknown type is reported unsupported once).
	return append(validation.Dedup(errs), declarative...)
}

func equalPtr(a, b *int32) bool {
	return a == b || (a != nil && b != nil && *a == *b)
}

// validateReference checks a CrossVersionObjectReference: kind and name
// are path segment names, the apiVersion parses and names a group.
func validateReference(ref autoscalingv2.CrossVersionObjectReference, p *field.Path, opts refOptions) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, pathSegment(ref.Kind, p.Child("kind"), "")...)
	errs = append(errs, pathSegment(ref.Name, p.Child("name"), "")...)
	if err := apiVersionError(ref, opts); err != nil {
		errs = append(errs, field.Invalid(p.Child("apiVersion"), ref.APIVersion, err.Error()))
	}
	return errs
}

// pathSegment requires s (with the detail given) and checks it is a path
// segment name.
func pathSegment(s string, p *field.Path, required string) field.ErrorList {
	if s == "" {
		return field.ErrorList{field.Required(p, required)}
	}
	var errs field.ErrorList
	for _, msg := range content.IsPathSegmentName(s) {
		errs = append(errs, field.Invalid(p, s, msg))
	}
	return errs
}

func apiVersionError(ref autoscalingv2.CrossVersionObjectReference, opts refOptions) error {
	if opts.allowInvalidAPIVersion {
		return nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return err
	}
	if !opts.allowEmptyGroup && gv.Group == "" {
		return fmt.Errorf("apiVersion must specify API group")
	}
	return nil
}

// validateRules checks one direction of the behavior.
func validateRules(r *autoscalingv2.HPAScalingRules, p *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	if w := r.StabilizationWindowSeconds; w != nil && *w < 0 {
		errs = append(errs, field.Invalid(p.Child("stabilizationWindowSeconds"), w, "must be greater than or equal to zero"))
	}
	if w := r.StabilizationWindowSeconds; w != nil && *w > maxStabilizationWindowSeconds {
		errs = append(errs, field.Invalid(p.Child("stabilizationWindowSeconds"), w, fmt.Sprintf("must be less than or equal to %v", maxStabilizationWindowSeconds)))
	}
	if s := r.SelectPolicy; s != nil && !sets.New(selectPolicies...).Has(string(*s)) {
		errs = append(errs, field.NotSupported(p.Child("selectPolicy"), s, selectPolicies))
	}
	if len(r.Policies) == 0 {
		errs = append(errs, field.Required(p.Child("policies"), "must specify at least one Policy"))
	}
	for i, policy := range r.Policies {
		errs = append(errs, validatePolicy(policy, p.Child("policies").Index(i))...)
	}
	if t := r.Tolerance; t != nil && t.Cmp(resource.Quantity{}) < 0 {
		errs = append(errs, field.Invalid(p.Child("tolerance"), t.String(), apivalidation.IsNegativeErrorMsg))
	}
	return errs
}

func validatePolicy(policy autoscalingv2.HPAScalingPolicy, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if policy.Type != autoscalingv2.PodsScalingPolicy && policy.Type != autoscalingv2.PercentScalingPolicy {
		errs = append(errs, field.NotSupported(p.Child("type"), policy.Type, policyTypes))
	}
	if policy.Value <= 0 {
		errs = append(errs, field.Invalid(p.Child("value"), policy.Value, "must be greater than zero"))
	}
	if policy.PeriodSeconds <= 0 {
		errs = append(errs, field.Invalid(p.Child("periodSeconds"), policy.PeriodSeconds, "must be greater than zero"))
	}
	if policy.PeriodSeconds > maxPeriodSeconds {
		errs = append(errs, field.Invalid(p.Child("periodSeconds"), policy.PeriodSeconds, fmt.Sprintf("must be less than or equal to %v", maxPeriodSeconds)))
	}
	return errs
}

// validateContainerResourceName is kube-apiserver's check of a resource
// name a container may use.
func validateContainerResourceName(name corev1.ResourceName, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsQualifiedName(string(name)) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	hugePages := strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
	unqualified := !strings.Contains(string(name), "/")
	if len(errs) == 0 && unqualified && !standardResources.Has(name) && !hugePages && !strings.HasPrefix(string(name), "requests."+corev1.ResourceHugePagesPrefix) {
		errs = append(errs, field.Invalid(p, name, "must be a standard resource type or fully qualified"))
	}
	switch {
	case unqualified:
		if !standardContainerResources.Has(name) && !hugePages {
			errs = append(errs, field.Invalid(p, name, "must be a standard resource for containers"))
		}
	case !strings.Contains(string(name), corev1.ResourceDefaultNamespacePrefix) && !extendedResource(name):
		errs = append(errs, field.Invalid(p, name, "doesn't follow extended resource name standard"))
	}
	return errs
}

// extendedResource: a qualified name outside kubernetes.io, not
// requests.*, that is still a qualified name as requests.<name>.
func extendedResource(name corev1.ResourceName) bool {
	s := string(name)
	if strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(utilvalidation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+s)) == 0
}

// validateMetrics checks every metric; scaling to zero needs an Object or
// External metric.
func validateMetrics(metrics []autoscalingv2.MetricSpec, p *field.Path, minReplicas *int32, opts refOptions) field.ErrorList {
	var errs field.ErrorList
	external := false
	for i, m := range metrics {
		errs = append(errs, validateMetric(m, p.Index(i), opts)...)
		if m.Type == autoscalingv2.ObjectMetricSourceType || m.Type == autoscalingv2.ExternalMetricSourceType {
			external = true
		}
	}
	if minReplicas != nil && *minReplicas == 0 && !external {
		errs = append(errs, field.Forbidden(p, "must specify at least one Object or External metric to support scaling to zero replicas"))
	}
	return errs
}

// metricSource is one of a MetricSpec's sources: its field name, whether
// it is set and its checks.
type metricSource struct {
	name     string
	set      bool
	validate func(p *field.Path) field.ErrorList
}

// validateMetric checks a metric's type, the first source set (in
// kube-apiserver's order), that the type's source is set and that no
// other is.
func validateMetric(m autoscalingv2.MetricSpec, p *field.Path, opts refOptions) field.ErrorList {
	var errs field.ErrorList
	if m.Type == "" {
		errs = append(errs, field.Required(p.Child("type"), "must specify a metric source type"))
	}
	if !sets.New(metricSourceTypes...).Has(string(m.Type)) {
		errs = append(errs, field.NotSupported(p.Child("type"), m.Type, metricSourceTypes))
	}
	sources := []metricSource{
		{"object", m.Object != nil, func(p *field.Path) field.ErrorList { return validateObjectSource(m.Object, p, opts) }},
		{"external", m.External != nil, func(p *field.Path) field.ErrorList { return validateExternalSource(m.External, p) }},
		{"pods", m.Pods != nil, func(p *field.Path) field.ErrorList { return validatePodsSource(m.Pods, p) }},
		{"resource", m.Resource != nil, func(p *field.Path) field.ErrorList { return validateResourceSource(m.Resource, p) }},
		{"containerResource", m.ContainerResource != nil, func(p *field.Path) field.ErrorList {
			return validateContainerResourceSource(m.ContainerResource, p)
		}},
	}
	var present []string
	for _, s := range sources {
		if !s.set {
			continue
		}
		if present = append(present, s.name); len(present) == 1 {
			errs = append(errs, s.validate(p.Child(s.name))...)
		}
	}
	expected := ""
	switch m.Type {
	case autoscalingv2.ObjectMetricSourceType, autoscalingv2.PodsMetricSourceType, autoscalingv2.ResourceMetricSourceType,
		autoscalingv2.ExternalMetricSourceType, autoscalingv2.ContainerResourceMetricSourceType:
		expected = strings.ToLower(string(m.Type[:1])) + string(m.Type[1:])
		for _, s := range sources {
			if s.name == expected && !s.set {
				errs = append(errs, field.Required(p.Child(expected), "must populate information for the given metric source"))
			}
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), m.Type, metricSourceTypes))
	}
	if len(present) != 1 {
		for _, name := range present {
			if name != expected {
				errs = append(errs, field.Forbidden(p.Child(name), "must populate the given metric source only"))
			}
		}
	}
	return errs
}

func validateObjectSource(src *autoscalingv2.ObjectMetricSource, p *field.Path, opts refOptions) field.ErrorList {
	errs := validateReference(src.DescribedObject, p.Child("describedObject"), opts)
	errs = append(errs, validateMetricName(src.Metric, p.Child("metric"))...)
	errs = append(errs, validateTarget(src.Target, p.Child("target"))...)
	if src.Target.Value == nil && src.Target.AverageValue == nil {
		errs = append(errs, field.Required(p.Child("target", "averageValue"), "must set either a target value or averageValue"))
	}
	return errs
}

func validateExternalSource(src *autoscalingv2.ExternalMetricSource, p *field.Path) field.ErrorList {
	errs := validateMetricName(src.Metric, p.Child("metric"))
	errs = append(errs, validateTarget(src.Target, p.Child("target"))...)
	if src.Target.Value == nil && src.Target.AverageValue == nil {
		errs = append(errs, field.Required(p.Child("target", "averageValue"), "must set either a target value for metric or a per-pod target"))
	}
	if src.Target.Value != nil && src.Target.AverageValue != nil {
		errs = append(errs, field.Forbidden(p.Child("target", "value"), "may not set both a target value for metric and a per-pod target"))
	}
	return errs
}

func validatePodsSource(src *autoscalingv2.PodsMetricSource, p *field.Path) field.ErrorList {
	errs := validateMetricName(src.Metric, p.Child("metric"))
	errs = append(errs, validateTarget(src.Target, p.Child("target"))...)
	if src.Target.AverageValue == nil {
		errs = append(errs, field.Required(p.Child("target", "averageValue"), "must specify a positive target averageValue"))
	}
	return errs
}

func validateResourceSource(src *autoscalingv2.ResourceMetricSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if src.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), "must specify a resource name"))
	}
	errs = append(errs, validateTarget(src.Target, p.Child("target"))...)
	return append(errs, utilizationOrValue(src.Target, p.Child("target"))...)
}

func validateContainerResourceSource(src *autoscalingv2.ContainerResourceMetricSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if src.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), "must specify a resource name"))
	} else {
		errs = append(errs, validateContainerResourceName(src.Name, p.Child("name"))...)
	}
	if src.Container == "" {
		errs = append(errs, field.Required(p.Child("container"), "must specify a container"))
	} else {
		for _, msg := range utilvalidation.IsDNS1123Label(src.Container) {
			errs = append(errs, field.Invalid(p.Child("container"), src.Container, msg))
		}
	}
	errs = append(errs, validateTarget(src.Target, p.Child("target"))...)
	return append(errs, utilizationOrValue(src.Target, p.Child("target"))...)
}

// utilizationOrValue: a resource target is a utilization or a raw value,
// one of them.
func utilizationOrValue(t autoscalingv2.MetricTarget, p *field.Path) field.ErrorList {
	if t.AverageUtilization == nil && t.AverageValue == nil {
		return field.ErrorList{field.Required(p.Child("averageUtilization"), "must set either a target raw value or a target utilization")}
	}
	if t.AverageUtilization != nil && t.AverageValue != nil {
		return field.ErrorList{field.Forbidden(p.Child("averageValue"), "may not set both a target raw value and a target utilization")}
	}
	return nil
}

func validateTarget(t autoscalingv2.MetricTarget, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Type == "" {
		errs = append(errs, field.Required(p.Child("type"), "must specify a metric target type"))
	}
	if t.Type != autoscalingv2.UtilizationMetricType && t.Type != autoscalingv2.ValueMetricType && t.Type != autoscalingv2.AverageValueMetricType {
		errs = append(errs, field.Invalid(p.Child("type"), t.Type, "must be either Utilization, Value, or AverageValue"))
	}
	if t.Value != nil && t.Value.Sign() != 1 {
		errs = append(errs, field.Invalid(p.Child("value"), t.Value, "must be positive"))
	}
	if t.AverageValue != nil && t.AverageValue.Sign() != 1 {
		errs = append(errs, field.Invalid(p.Child("averageValue"), t.AverageValue, "must be positive"))
	}
	if t.AverageUtilization != nil && *t.AverageUtilization < 1 {
		errs = append(errs, field.Invalid(p.Child("averageUtilization"), t.AverageUtilization, "must be greater than 0"))
	}
	return errs
}

func validateMetricName(id autoscalingv2.MetricIdentifier, p *field.Path) field.ErrorList {
	return pathSegment(id.Name, p.Child("name"), "must specify a metric name")
}
