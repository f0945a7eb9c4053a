// Package podspec holds what every kind with a pod template shares (pods,
// pod templates, replication controllers, the apps and batch workloads):
// kube-apiserver's defaults and validation of pod specs.
package podspec

import (
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/providers/internal/validation"
)

// Defaults kube-apiserver applies to pod specs (k8s.io/api/core/v1 names
// them where it can).
const (
	defaultTerminationGracePeriodSeconds = int64(corev1.DefaultTerminationGracePeriodSeconds)
	defaultSchedulerName                 = corev1.DefaultSchedulerName
	defaultVolumeMode                    = int32(0o644)
)

// DefaultTemplate applies the defaults kube-apiserver gives the pod
// template of a workload object (Deployment, ReplicaSet, StatefulSet, ...).
// Defaults of Pod objects themselves (such as requests from limits) are not
// applied to templates, as upstream.
func DefaultTemplate(t *corev1.PodTemplateSpec) { DefaultSpec(&t.Spec) }

// DefaultSpec applies kube-apiserver's pod spec defaults.
func DefaultSpec(s *corev1.PodSpec) {
	if s.DNSPolicy == "" {
		s.DNSPolicy = corev1.DNSClusterFirst
	}
	if s.RestartPolicy == "" {
		s.RestartPolicy = corev1.RestartPolicyAlways
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &corev1.PodSecurityContext{}
	}
	if s.TerminationGracePeriodSeconds == nil {
		s.TerminationGracePeriodSeconds = ptr.To(defaultTerminationGracePeriodSeconds)
	}
	if s.SchedulerName == "" {
		s.SchedulerName = defaultSchedulerName
	}
	for i := range s.InitContainers {
		defaultContainer(&s.InitContainers[i], s.HostNetwork)
	}
	for i := range s.Containers {
		defaultContainer(&s.Containers[i], s.HostNetwork)
	}
	for i := range s.EphemeralContainers {
		c := corev1.Container(s.EphemeralContainers[i].EphemeralContainerCommon)
		defaultContainer(&c, false)
		s.EphemeralContainers[i].EphemeralContainerCommon = corev1.EphemeralContainerCommon(c)
	}
	for i := range s.Volumes {
		defaultVolume(&s.Volumes[i])
	}
}

func defaultContainer(c *corev1.Container, hostNetwork bool) {
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = corev1.PullIfNotPresent
		if imageTag(c.Image) == "latest" {
			c.ImagePullPolicy = corev1.PullAlways
		}
	}
	for i := range c.Ports {
		p := &c.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if hostNetwork && p.HostPort == 0 {
			p.HostPort = p.ContainerPort
		}
	}
	for i := range c.Env {
		if f := c.Env[i].ValueFrom; f != nil && f.FieldRef != nil && f.FieldRef.APIVersion == "" {
			f.FieldRef.APIVersion = "v1"
		}
	}
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		defaultProbe(p)
	}
	if c.Lifecycle != nil {
		for _, h := range []*corev1.LifecycleHandler{c.Lifecycle.PostStart, c.Lifecycle.PreStop} {
			if h != nil {
				defaultHTTPGet(h.HTTPGet)
			}
		}
	}
}

// imageTag returns the tag of an image reference: "latest" when it has
// neither tag nor digest, "" when it has only a digest.
func imageTag(image string) string {
	name := image
	if i := strings.Index(name, "@"); i >= 0 {
		name = name[:i]
		if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
			return name[i+1:]
		}
		return ""
	}
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		return name[i+1:]
	}
	return "latest"
}

func defaultProbe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	defaultHTTPGet(p.HTTPGet)
	if g := p.GRPC; g != nil && g.Service == nil {
		g.Service = ptr.To("")
	}
}

func defaultHTTPGet(h *corev1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = corev1.URISchemeHTTP
	}
}

func defaultVolume(v *corev1.Volume) {
	mode := func(m **int32) {
		if *m == nil {
			*m = ptr.To(defaultVolumeMode)
		}
	}
	src := &v.VolumeSource
	switch {
	case src.Secret != nil:
		mode(&src.Secret.DefaultMode)
	case src.ConfigMap != nil:
		mode(&src.ConfigMap.DefaultMode)
	case src.DownwardAPI != nil:
		mode(&src.DownwardAPI.DefaultMode)
	case src.Projected != nil:
		mode(&src.Projected.DefaultMode)
		for i := range src.Projected.Sources {
			if t := src.Projected.Sources[i].ServiceAccountToken; t != nil && t.ExpirationSeconds == nil {
				t.ExpirationSeconds = ptr.To[int64](3600)
			}
		}
	case src.HostPath != nil:
		if src.HostPath.Type == nil {
			src.HostPath.Type = ptr.To(corev1.HostPathUnset)
		}
	case src.Ephemeral != nil:
		// The claim template's spec is defaulted as a claim's.
		if t := src.Ephemeral.VolumeClaimTemplate; t != nil && t.Spec.VolumeMode == nil {
			t.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
		}
	case *src == corev1.VolumeSource{}:
		src.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
}

// ValidateTemplate checks the parts of a pod template that
// controller authors most often get wrong: labels, containers (names,
// images, ports, enum fields), restart and DNS policies, volumes' names.
// It is a subset of kube-apiserver's pod validation.
func ValidateTemplate(t *corev1.PodTemplateSpec, p *field.Path) field.ErrorList {
	errs := metav1validation.ValidateLabels(t.Labels, p.Child("metadata", "labels"))
	errs = append(errs, apivalidation.ValidateAnnotations(t.Annotations, p.Child("metadata", "annotations"))...)
	return append(errs, ValidateSpec(&t.Spec, p.Child("spec"))...)
}

var (
	restartPolicies = sets.New(string(corev1.RestartPolicyAlways), string(corev1.RestartPolicyOnFailure), string(corev1.RestartPolicyNever))
	dnsPolicies     = sets.New(string(corev1.DNSClusterFirst), string(corev1.DNSClusterFirstWithHostNet), string(corev1.DNSDefault), string(corev1.DNSNone))
	pullPolicies    = sets.New(string(corev1.PullAlways), string(corev1.PullIfNotPresent), string(corev1.PullNever))
	messagePolicies = sets.New(string(corev1.TerminationMessageReadFile), string(corev1.TerminationMessageFallbackToLogsOnError))
	protocols       = sets.New(string(corev1.ProtocolTCP), string(corev1.ProtocolUDP), string(corev1.ProtocolSCTP))
)

// Protocols are the port protocols of containers and services.
func Protocols() sets.Set[string] { return protocols.Clone() }

// ValidateSpec validates a pod spec at p (a pod's, or a template's for
// ValidateTemplate): volumes' names, init and regular containers, restart
// and DNS policies and the termination grace period, a subset of
// kube-apiserver's pod spec validation.
func ValidateSpec(s *corev1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	volumes := sets.New[string]()
	for i, v := range s.Volumes {
		vp := p.Child("volumes").Index(i)
		for _, msg := range utilvalidation.IsDNS1123Label(v.Name) {
			errs = append(errs, field.Invalid(vp.Child("name"), v.Name, msg))
		}
		if volumes.Has(v.Name) {
			errs = append(errs, field.Duplicate(vp.Child("name"), v.Name))
		}
		volumes.Insert(v.Name)
	}
	if len(s.Containers) == 0 {
		errs = append(errs, field.Required(p.Child("containers"), ""))
	}
	names, claims := sets.New[string](), podClaimNames(s)
	// Regular containers first, as kube-apiserver: an init container
	// named as a regular one is the duplicate.
	for i := range s.Containers {
		errs = append(errs, validateContainer(&s.Containers[i], p.Child("containers").Index(i), names, volumes, claims)...)
	}
	for i := range s.InitContainers {
		errs = append(errs, validateContainer(&s.InitContainers[i], p.Child("initContainers").Index(i), names, volumes, claims)...)
	}
	errs = append(errs, validatePodLevel(s, claims, p)...)
	if !restartPolicies.Has(string(s.RestartPolicy)) {
		errs = append(errs, field.NotSupported(p.Child("restartPolicy"), s.RestartPolicy,
			[]string{string(corev1.RestartPolicyAlways), string(corev1.RestartPolicyOnFailure), string(corev1.RestartPolicyNever)}))
	}
	if !dnsPolicies.Has(string(s.DNSPolicy)) {
		errs = append(errs, field.NotSupported(p.Child("dnsPolicy"), s.DNSPolicy, sets.List(dnsPolicies)))
	}
	if g := s.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *g, "must be greater than or equal to 0"))
	}
	errs = append(errs, validateHostUsers(s, p)...)
	if d := s.ActiveDeadlineSeconds; d != nil && (*d < 1 || *d > math.MaxInt32) {
		errs = append(errs, field.Invalid(p.Child("activeDeadlineSeconds"), *d, utilvalidation.InclusiveRangeError(1, math.MaxInt32)))
	}
	return validation.Dedup(errs)
}

// podClaimNames are the names of s's resource claims.
func podClaimNames(s *corev1.PodSpec) sets.Set[string] {
	names := sets.New[string]()
	for _, c := range s.ResourceClaims {
		if c.Name != "" {
			names.Insert(c.Name)
		}
	}
	return names
}

// ValidatePodContainers is what kube-apiserver checks of a Pod's containers
// and init containers beside its spec (not a template's): an image without
// leading or trailing whitespace.
func ValidatePodContainers(s *corev1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, part := range []struct {
		name string
		list []corev1.Container
	}{{"containers", s.Containers}, {"initContainers", s.InitContainers}} {
		for i, c := range part.list {
			if len(c.Image) != len(strings.TrimSpace(c.Image)) {
				errs = append(errs, field.Invalid(p.Child(part.name).Index(i).Child("image"), c.Image, "must not have leading or trailing whitespace"))
			}
		}
	}
	return errs
}

func validateContainer(c *corev1.Container, p *field.Path, names, volumes, claims sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	if c.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		for _, msg := range utilvalidation.IsDNS1123Label(c.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), c.Name, msg))
		}
	}
	// Only an empty image: a Pod's is also checked for whitespace
	// (ValidatePodContainers), a template's is not, as upstream's.
	if c.Image == "" {
		errs = append(errs, field.Required(p.Child("image"), ""))
	}
	if !messagePolicies.Has(string(c.TerminationMessagePolicy)) {
		errs = append(errs, field.NotSupported(p.Child("terminationMessagePolicy"), c.TerminationMessagePolicy, sets.List(messagePolicies)))
	}
	errs = append(errs, validatePorts(c.Ports, p.Child("ports"))...)
	for i, e := range c.Env {
		if e.Name == "" {
			errs = append(errs, field.Required(p.Child("env").Index(i).Child("name"), ""))
		}
	}
	for i, m := range c.VolumeMounts {
		if !volumes.Has(m.Name) {
			errs = append(errs, field.NotFound(p.Child("volumeMounts").Index(i).Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(p.Child("volumeMounts").Index(i).Child("mountPath"), ""))
		}
	}
	if !pullPolicies.Has(string(c.ImagePullPolicy)) {
		errs = append(errs, field.NotSupported(p.Child("imagePullPolicy"), c.ImagePullPolicy, sets.List(pullPolicies)))
	}
	errs = append(errs, validateRequirements(&c.Resources, containerResourceName, p.Child("resources"))...)
	errs = append(errs, validateClaimNames(c.Resources.Claims, claims, p.Child("resources", "claims"))...)
	// A duplicate name comes after the checks common to all containers,
	// as kube-apiserver's.
	if names.Has(c.Name) {
		errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
	}
	names.Insert(c.Name)
	return errs
}

// validatePorts checks a container's ports: numbers, protocols, unique
// names.
func validatePorts(ports []corev1.ContainerPort, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, port := range ports {
		pp := p.Index(i)
		for _, msg := range utilvalidation.IsValidPortNum(int(port.ContainerPort)) {
			errs = append(errs, field.Invalid(pp.Child("containerPort"), port.ContainerPort, msg))
		}
		if port.HostPort != 0 {
			for _, msg := range utilvalidation.IsValidPortNum(int(port.HostPort)) {
				errs = append(errs, field.Invalid(pp.Child("hostPort"), port.HostPort, msg))
			}
		}
		if !protocols.Has(string(port.Protocol)) {
			errs = append(errs, field.NotSupported(pp.Child("protocol"), port.Protocol, sets.List(protocols)))
		}
		if port.Name != "" {
			for _, msg := range utilvalidation.IsValidPortName(port.Name) {
				errs = append(errs, field.Invalid(pp.Child("name"), port.Name, msg))
			}
			if names.Has(port.Name) {
				errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
			}
			names.Insert(port.Name)
		}
	}
	return errs
}
