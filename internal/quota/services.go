package quota

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
)

var serviceResources = []corev1.ResourceName{
	generic.ObjectCountQuotaResourceNameFor(corev1.Resource("services")),
	corev1.ResourceServices, corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers,
}

// services evaluates services: a count, node ports and load balancers.
type services struct{ list generic.ListFuncByNamespace }

var _ quota.Evaluator = &services{}

func (*services) GroupResource() schema.GroupResource { return corev1.Resource("services") }

func (*services) Constraints([]corev1.ResourceName, runtime.Object) error { return nil }

func (*services) Handles(a admission.Attributes) bool {
	return a.GetSubresource() == "" && (a.GetOperation() == admission.Create || a.GetOperation() == admission.Update)
}

func (s *services) Matches(q *corev1.ResourceQuota, item runtime.Object) (bool, error) {
	return generic.Matches(q, item, s.MatchingResources, generic.MatchesNoScopeFunc)
}

func (*services) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	return quota.Intersection(input, serviceResources)
}

func (*services) MatchingScopes(runtime.Object, []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return []corev1.ScopedResourceSelectorRequirement{}, nil
}

func (*services) UncoveredQuotaScopes(_, _ []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return []corev1.ScopedResourceSelectorRequirement{}, nil
}

// Usage: a NodePort service uses a node port per port; a LoadBalancer one
// a load balancer and a node port per port (per port that has one when it
// does not allocate them).
func (*services) Usage(item runtime.Object) (corev1.ResourceList, error) {
	svc, ok := item.(*corev1.Service)
	if !ok {
		return corev1.ResourceList{}, fmt.Errorf("expect *api.Service or *v1.Service, got %T", item)
	}
	count := func(n int) resource.Quantity { return *resource.NewQuantity(int64(n), resource.DecimalSI) }
	out := corev1.ResourceList{
		serviceResources[0]: count(1), corev1.ResourceServices: count(1),
		corev1.ResourceServicesLoadBalancers: {Format: resource.DecimalSI},
		corev1.ResourceServicesNodePorts:     {Format: resource.DecimalSI},
	}
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort:
		out[corev1.ResourceServicesNodePorts] = count(len(svc.Spec.Ports))
	case corev1.ServiceTypeLoadBalancer:
		ports := len(svc.Spec.Ports)
		if svc.Spec.AllocateLoadBalancerNodePorts != nil && !*svc.Spec.AllocateLoadBalancerNodePorts {
			ports = 0
			for _, p := range svc.Spec.Ports {
				if p.NodePort != 0 {
					ports++
				}
			}
		}
		out[corev1.ResourceServicesNodePorts] = count(ports)
		out[corev1.ResourceServicesLoadBalancers] = count(1)
	}
	return out, nil
}

func (s *services) UsageStats(options quota.UsageStatsOptions) (quota.UsageStats, error) {
	return generic.CalculateUsageStats(options, s.list, generic.MatchesNoScopeFunc, s.Usage)
}

// serviceQuotaType is what of a service's type quota tells apart.
func serviceQuotaType(svc *corev1.Service) corev1.ServiceType {
	if svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		return svc.Spec.Type
	}
	return ""
}
