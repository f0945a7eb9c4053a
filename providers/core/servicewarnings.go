package core

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// serviceWarnings are the warnings kube-apiserver answers a write of a
// Service with (its pkg/api/service GetWarningsForService), those about
// fields it ignores or deprecates. Not given: the warnings about IPs and
// CIDRs written in a non-canonical form (kubeembed's validation refuses
// what kube-apiserver would warn about there).
func serviceWarnings(s, _ *corev1.Service) []string {
	var w []string
	if _, ok := s.Annotations[corev1.DeprecatedAnnotationTopologyAwareHints]; ok {
		w = append(w, fmt.Sprintf("annotation %s is deprecated, please use %s instead",
			corev1.DeprecatedAnnotationTopologyAwareHints, corev1.AnnotationTopologyMode))
	}
	headless := s.Spec.Type == corev1.ServiceTypeClusterIP && s.Spec.ClusterIP == corev1.ClusterIPNone
	if headless {
		if s.Spec.LoadBalancerIP != "" {
			w = append(w, "spec.loadBalancerIP is ignored for headless services")
		}
		if len(s.Spec.ExternalIPs) > 0 {
			w = append(w, "spec.externalIPs is ignored for headless services")
		}
		if s.Spec.SessionAffinity != corev1.ServiceAffinityNone {
			w = append(w, "spec.SessionAffinity is ignored for headless services")
		}
	}
	if len(s.Spec.ExternalIPs) > 0 && !headless && s.Spec.Type != corev1.ServiceTypeExternalName {
		w = append(w, "spec.externalIPs is deprecated and may no longer be implemented in some clusters")
	}
	if s.Spec.Type == corev1.ServiceTypeExternalName && len(s.Spec.ExternalIPs) > 0 {
		w = append(w, fmt.Sprintf("spec.externalIPs is ignored when spec.type is %q", corev1.ServiceTypeExternalName))
	}
	if s.Spec.Type != corev1.ServiceTypeExternalName && s.Spec.ExternalName != "" {
		w = append(w, fmt.Sprintf("spec.externalName is ignored when spec.type is not %q", corev1.ServiceTypeExternalName))
	}
	if d := s.Spec.TrafficDistribution; d != nil && *d == corev1.ServiceTrafficDistributionPreferClose {
		w = append(w, fmt.Sprintf("spec.trafficDistribution: %q is deprecated; use %q",
			corev1.ServiceTrafficDistributionPreferClose, corev1.ServiceTrafficDistributionPreferSameZone))
	}
	return w
}
