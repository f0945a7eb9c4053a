// Package networking serves networking.k8s.io/v1 ingresses (with status),
// ingressclasses and networkpolicies.
package networking

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"
)

// Provider serves networking.k8s.io.
func Provider() providers.Provider { return group }

var group = registry.Group{
	GroupVersion: networkingv1.SchemeGroupVersion, AddToScheme: networkingv1.AddToScheme,
	Served: []registry.Served{networkPolicies, ingressClasses, ingresses, serviceCIDRs, ipAddresses},
}

// defaultNetworkPolicy applies networking/v1's defaults: port protocol TCP,
// and policyTypes from which rules are present.
func defaultNetworkPolicy(np *networkingv1.NetworkPolicy) {
	for i := range np.Spec.Ingress {
		for j := range np.Spec.Ingress[i].Ports {
			if np.Spec.Ingress[i].Ports[j].Protocol == nil {
				np.Spec.Ingress[i].Ports[j].Protocol = ptr.To(corev1.ProtocolTCP)
			}
		}
	}
	for i := range np.Spec.Egress {
		for j := range np.Spec.Egress[i].Ports {
			if np.Spec.Egress[i].Ports[j].Protocol == nil {
				np.Spec.Egress[i].Ports[j].Protocol = ptr.To(corev1.ProtocolTCP)
			}
		}
	}
	if len(np.Spec.PolicyTypes) == 0 {
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		if len(np.Spec.Egress) > 0 {
			np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
		}
	}
}

func validateNetworkPolicy(np *networkingv1.NetworkPolicy) field.ErrorList {
	p := field.NewPath("spec")
	errs := metav1validation.ValidateLabelSelector(&np.Spec.PodSelector, metav1validation.LabelSelectorValidationOptions{}, p.Child("podSelector"))
	allowed := []string{string(networkingv1.PolicyTypeIngress), string(networkingv1.PolicyTypeEgress)}
	if len(np.Spec.PolicyTypes) > len(allowed) {
		errs = append(errs, field.Invalid(p.Child("policyTypes"), np.Spec.PolicyTypes, "may not specify more than two policyTypes"))
	}
	for i, t := range np.Spec.PolicyTypes {
		if t != networkingv1.PolicyTypeIngress && t != networkingv1.PolicyTypeEgress {
			errs = append(errs, field.NotSupported(p.Child("policyTypes").Index(i), t, allowed))
		}
	}
	checkPorts := func(ports []networkingv1.NetworkPolicyPort, pp *field.Path) {
		for i, port := range ports {
			if port.Protocol != nil && *port.Protocol != corev1.ProtocolTCP && *port.Protocol != corev1.ProtocolUDP && *port.Protocol != corev1.ProtocolSCTP {
				errs = append(errs, field.NotSupported(pp.Index(i).Child("protocol"), *port.Protocol, []string{"TCP", "UDP", "SCTP"}))
			}
			if port.Port != nil && port.Port.IntVal != 0 {
				for _, msg := range utilvalidation.IsValidPortNum(int(port.Port.IntVal)) {
					errs = append(errs, field.Invalid(pp.Index(i).Child("port"), port.Port.IntVal, msg))
				}
			}
		}
	}
	for i, r := range np.Spec.Ingress {
		checkPorts(r.Ports, p.Child("ingress").Index(i).Child("ports"))
	}
	for i, r := range np.Spec.Egress {
		checkPorts(r.Ports, p.Child("egress").Index(i).Child("ports"))
	}
	return errs
}

var pathTypes = []string{string(networkingv1.PathTypeExact), string(networkingv1.PathTypeImplementationSpecific), string(networkingv1.PathTypePrefix)}

func validateBackend(b *networkingv1.IngressBackend, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case b.Service != nil && b.Resource != nil:
		errs = append(errs, field.Invalid(p, "", "cannot set both resource and service backends"))
	case b.Service != nil:
		if b.Service.Name == "" {
			errs = append(errs, field.Required(p.Child("service", "name"), ""))
		}
		if b.Service.Port.Name != "" && b.Service.Port.Number != 0 {
			errs = append(errs, field.Invalid(p.Child("service", "port"), b.Service.Port, "cannot set both port name & port number"))
		} else if b.Service.Port.Name == "" && b.Service.Port.Number == 0 {
			errs = append(errs, field.Required(p.Child("service", "port"), "port name or number is required"))
		}
	case b.Resource == nil:
		errs = append(errs, field.Invalid(p, "", "resource or service backend is required"))
	}
	return errs
}

func validateIngress(ing *networkingv1.Ingress) field.ErrorList {
	p := field.NewPath("spec")
	var errs field.ErrorList
	if ing.Spec.DefaultBackend != nil {
		errs = append(errs, validateBackend(ing.Spec.DefaultBackend, p.Child("defaultBackend"))...)
	}
	if len(ing.Spec.Rules) == 0 && ing.Spec.DefaultBackend == nil {
		errs = append(errs, field.Invalid(p, ing.Spec, "either `defaultBackend` or `rules` must be specified"))
	}
	for i, r := range ing.Spec.Rules {
		rp := p.Child("rules").Index(i)
		if r.Host != "" {
			host := strings.TrimPrefix(r.Host, "*.")
			for _, msg := range utilvalidation.IsDNS1123Subdomain(host) {
				errs = append(errs, field.Invalid(rp.Child("host"), r.Host, msg))
			}
		}
		if r.HTTP == nil {
			continue
		}
		if len(r.HTTP.Paths) == 0 {
			errs = append(errs, field.Required(rp.Child("http", "paths"), ""))
		}
		for j, path := range r.HTTP.Paths {
			pp := rp.Child("http", "paths").Index(j)
			if path.PathType == nil {
				errs = append(errs, field.Required(pp.Child("pathType"), "pathType must be specified"))
			} else if !slices.Contains(pathTypes, string(*path.PathType)) {
				errs = append(errs, field.NotSupported(pp.Child("pathType"), *path.PathType, pathTypes))
			} else if *path.PathType != networkingv1.PathTypeImplementationSpecific && !strings.HasPrefix(path.Path, "/") {
				errs = append(errs, field.Invalid(pp.Child("path"), path.Path, "must be an absolute path"))
			}
			errs = append(errs, validateBackend(&path.Backend, pp.Child("backend"))...)
		}
	}
	return errs
}

func validateIngressClass(ic *networkingv1.IngressClass) field.ErrorList {
	p := field.NewPath("spec", "controller")
	if ic.Spec.Controller == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	return utilvalidation.IsDomainPrefixedPath(p, ic.Spec.Controller)
}

// networkPolicies and ingressClasses count metadata.generation, as
// kube-apiserver does.
var networkPolicies = registry.Kind[*networkingv1.NetworkPolicy]{
	Default:      defaultNetworkPolicy,
	GroupVersion: networkingv1.SchemeGroupVersion, Resource: "networkpolicies", Singular: "networkpolicy",
	ShortNames: []string{"netpol"}, Namespaced: true, Generation: true,
	NewObj:   func() runtime.Object { return &networkingv1.NetworkPolicy{} },
	NewList:  func() runtime.Object { return &networkingv1.NetworkPolicyList{} },
	Validate: validateNetworkPolicy,
	Columns: []registry.Column{registry.ColumnOf("Pod-Selector", "string", networkingv1.NetworkPolicySpec{}.SwaggerDoc()["podSelector"], 0, func(n *networkingv1.NetworkPolicy) any {
		return metav1.FormatLabelSelector(&n.Spec.PodSelector)
	})},
}

var ingressClasses = registry.Kind[*networkingv1.IngressClass]{
	GroupVersion: networkingv1.SchemeGroupVersion, Resource: "ingressclasses", Singular: "ingressclass", Generation: true,
	NewObj:   func() runtime.Object { return &networkingv1.IngressClass{} },
	NewList:  func() runtime.Object { return &networkingv1.IngressClassList{} },
	Validate: validateIngressClass,
	Table: []registry.Column{
		ingressClassName(),
		registry.ColumnOf("Controller", "string", "Controller that is responsible for handling this class", 0, func(c *networkingv1.IngressClass) any { return c.Spec.Controller }),
		registry.ColumnOf("Parameters", "string", "A reference to a resource with additional parameters", 0, ingressClassParameters),
		registry.AgeColumn(),
	},
}

// ingressClassName is the NAME column of ingress classes: the default
// class is marked, whether listed or not.
func ingressClassName() registry.Column {
	c := registry.NameColumn()
	c.Value = func(obj runtime.Object) any {
		ic := obj.(*networkingv1.IngressClass)
		if ic.Annotations[networkingv1.AnnotationIsDefaultIngressClass] == "true" {
			return ic.Name + " (default)"
		}
		return ic.Name
	}
	return c
}

// ingressClassParameters is the PARAMETERS column: "Kind[.apiGroup]/name".
func ingressClassParameters(c *networkingv1.IngressClass) any {
	p := c.Spec.Parameters
	if p == nil {
		return "<none>"
	}
	kind := p.Kind
	if p.APIGroup != nil {
		kind += "." + *p.APIGroup
	}
	return kind + "/" + p.Name
}

var ingresses = registry.Kind[*networkingv1.Ingress]{
	Status: true, NoAge: true, Namespaced: true,
	GroupVersion: networkingv1.SchemeGroupVersion,
	Resource:     "ingresses", Singular: "ingress", ShortNames: []string{"ing"},
	NewObj:       func() runtime.Object { return &networkingv1.Ingress{} },
	NewList:      func() runtime.Object { return &networkingv1.IngressList{} },
	GenerationOf: func(i *networkingv1.Ingress) any { return i.Spec },
	Validate:     validateIngress,
	Columns: []registry.Column{
		registry.ColumnOf("Class", "string", "The name of the IngressClass resource that should be used for additional configuration", 0, func(i *networkingv1.Ingress) any {
			if i.Spec.IngressClassName == nil {
				return "<none>"
			}
			return *i.Spec.IngressClassName
		}),
		registry.ColumnOf("Hosts", "string", "Hosts that incoming requests are matched against before the ingress rule", 0, ingressHosts),
		registry.ColumnOf("Address", "string", "Address is a list containing ingress points for the load-balancer", 0, func(i *networkingv1.Ingress) any {
			var addrs []string
			for _, lb := range i.Status.LoadBalancer.Ingress {
				if lb.IP != "" {
					addrs = append(addrs, lb.IP)
				} else if lb.Hostname != "" {
					addrs = append(addrs, lb.Hostname)
				}
			}
			slices.Sort(addrs)
			return strings.Join(slices.Compact(addrs), ",")
		}),
		registry.ColumnOf("Ports", "string", "Ports of TLS configurations that open", 0, func(i *networkingv1.Ingress) any {
			if len(i.Spec.TLS) > 0 {
				return "80, 443"
			}
			return "80"
		}),
		registry.AgeColumn(),
	},
}

// maxHosts is how many hosts kube-apiserver prints of an ingress.
const maxHosts = 3

// ingressHosts is the HOSTS column as kube-apiserver prints it: the first
// three hosts, then " + N more..." where N counts every further rule, with
// a host or not; "*" without hosts.
func ingressHosts(i *networkingv1.Ingress) any {
	var hosts []string
	more := false
	for _, r := range i.Spec.Rules {
		if len(hosts) == maxHosts {
			more = true
			break
		}
		if r.Host != "" {
			hosts = append(hosts, r.Host)
		}
	}
	if len(hosts) == 0 {
		return "*"
	}
	if more {
		return fmt.Sprintf("%s + %d more...", strings.Join(hosts, ","), len(i.Spec.Rules)-maxHosts)
	}
	return strings.Join(hosts, ",")
}
