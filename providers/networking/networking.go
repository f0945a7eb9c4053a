// Package networking serves networking.k8s.io/v1 ingresses (with status),
// ingressclasses and networkpolicies.
package networking

import (
	"context"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"
)

// Provider serves networking.k8s.io.
type Provider struct{}

var _ providers.Provider = Provider{}

// GroupName implements providers.Provider.
func (Provider) GroupName() string { return networkingv1.GroupName }

// Install implements providers.Provider.
func (Provider) Install(scheme *runtime.Scheme) error {
	if err := providers.InstallGroupVersion(scheme, networkingv1.SchemeGroupVersion, networkingv1.AddToScheme); err != nil {
		return err
	}
	scheme.AddTypeDefaultingFunc(&networkingv1.NetworkPolicy{}, func(obj any) { defaultNetworkPolicy(obj.(*networkingv1.NetworkPolicy)) })
	for _, k := range []registry.Served{serviceCIDRs, ipAddresses} {
		if err := k.FieldLabels(scheme); err != nil {
			return err
		}
	}
	for kind, namespaced := range map[string]bool{"Ingress": true, "IngressClass": false, "NetworkPolicy": true} {
		if err := registry.FieldLabelConversion(scheme, networkingv1.SchemeGroupVersion.WithKind(kind), namespaced); err != nil {
			return err
		}
	}
	return nil
}

// defaultNetworkPolicy applies networking/v1's defaults: port protocol TCP,
// and policyTypes from which rules are present.
func defaultNetworkPolicy(np *networkingv1.NetworkPolicy) {
	tcp := corev1.ProtocolTCP
	for i := range np.Spec.Ingress {
		for j := range np.Spec.Ingress[i].Ports {
			if np.Spec.Ingress[i].Ports[j].Protocol == nil {
				np.Spec.Ingress[i].Ports[j].Protocol = &tcp
			}
		}
	}
	for i := range np.Spec.Egress {
		for j := range np.Spec.Egress[i].Ports {
			if np.Spec.Egress[i].Ports[j].Protocol == nil {
				np.Spec.Egress[i].Ports[j].Protocol = &tcp
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

// withGeneration counts metadata.generation, as kube-apiserver does for
// network policies and ingress classes.
func withGeneration(st *registry.Strategy) *registry.Strategy {
	st.Generation = true
	return st
}

func strategy(ctx providers.Config, namespaced bool, validate func(runtime.Object) field.ErrorList, meta func(runtime.Object) *metav1.ObjectMeta) *registry.Strategy {
	st := &registry.Strategy{ObjectTyper: ctx.Scheme, NameGenerator: names.SimpleNameGenerator, Namespaced: namespaced}
	st.ValidateCreate = func(_ context.Context, obj runtime.Object) field.ErrorList {
		errs := apivalidation.ValidateObjectMeta(meta(obj), namespaced, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
		return append(errs, validate(obj)...)
	}
	st.ValidateOnUpdate = func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		return validate(obj)
	}
	return st
}

func validateNetworkPolicy(obj runtime.Object) field.ErrorList {
	np := obj.(*networkingv1.NetworkPolicy)
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

func validateIngress(obj runtime.Object) field.ErrorList {
	ing := obj.(*networkingv1.Ingress)
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

func validateIngressClass(obj runtime.Object) field.ErrorList {
	ic := obj.(*networkingv1.IngressClass)
	p := field.NewPath("spec", "controller")
	if ic.Spec.Controller == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	return utilvalidation.IsDomainPrefixedPath(p, ic.Spec.Controller)
}

// Storage implements providers.Provider.
func (Provider) Storage(ctx providers.Config) (map[string]map[string]rest.Storage, error) {
	out := map[string]rest.Storage{}
	np, err := registry.NewStore(ctx, registry.StoreConfig{
		Resource: networkingv1.Resource("networkpolicies"), Singular: "networkpolicy",
		NewFunc: func() runtime.Object { return &networkingv1.NetworkPolicy{} },
		NewList: func() runtime.Object { return &networkingv1.NetworkPolicyList{} },
		Strategy: withGeneration(strategy(ctx, true, validateNetworkPolicy, func(o runtime.Object) *metav1.ObjectMeta {
			return &o.(*networkingv1.NetworkPolicy).ObjectMeta
		})),
		ShortNames: []string{"netpol"},
		Table: registry.Table(registry.NameColumn(),
			registry.ColumnOf("Pod-Selector", "string", networkingv1.NetworkPolicySpec{}.SwaggerDoc()["podSelector"], 0, func(n *networkingv1.NetworkPolicy) any {
				s := metav1.FormatLabelSelector(&n.Spec.PodSelector)
				if s == "<none>" {
					return "<none>"
				}
				return s
			}),
			registry.AgeColumn()),
		AttrFunc: registry.AttrFunc[*networkingv1.NetworkPolicy](true, nil),
	})
	if err != nil {
		return nil, err
	}
	out["networkpolicies"] = np

	ic, err := registry.NewStore(ctx, registry.StoreConfig{
		Resource: networkingv1.Resource("ingressclasses"), Singular: "ingressclass",
		NewFunc: func() runtime.Object { return &networkingv1.IngressClass{} },
		NewList: func() runtime.Object { return &networkingv1.IngressClassList{} },
		Strategy: withGeneration(strategy(ctx, false, validateIngressClass, func(o runtime.Object) *metav1.ObjectMeta {
			return &o.(*networkingv1.IngressClass).ObjectMeta
		})),
		Table: registry.Table(registry.NameColumn(),
			registry.ColumnOf("Controller", "string", "Controller that is responsible for handling this class", 0, func(c *networkingv1.IngressClass) any { return c.Spec.Controller }),
			registry.ColumnOf("Parameters", "string", "A reference to a resource with additional parameters", 0, func(c *networkingv1.IngressClass) any {
				if c.Spec.Parameters == nil {
					return "<none>"
				}
				return c.Spec.Parameters.Kind + "/" + c.Spec.Parameters.Name
			}),
			registry.AgeColumn()),
		AttrFunc: registry.AttrFunc[*networkingv1.IngressClass](false, nil),
	})
	if err != nil {
		return nil, err
	}
	out["ingressclasses"] = ic

	ingresses := registry.Workload[*networkingv1.Ingress]{
		GroupVersion: networkingv1.SchemeGroupVersion,
		Resource:     "ingresses", Singular: "ingress", ShortNames: []string{"ing"},
		NewObj:  func() runtime.Object { return &networkingv1.Ingress{} },
		NewList: func() runtime.Object { return &networkingv1.IngressList{} },
		Meta:    func(i *networkingv1.Ingress) *metav1.ObjectMeta { return &i.ObjectMeta },
		Spec:    func(i *networkingv1.Ingress) any { return i.Spec },
		ResetStatus: func(i, old *networkingv1.Ingress) {
			i.Status = networkingv1.IngressStatus{}
			if old != nil {
				i.Status = old.Status
			}
		},
		ResetSpec: func(i, old *networkingv1.Ingress) { i.Spec = old.Spec },
		Validate:  func(i *networkingv1.Ingress) field.ErrorList { return validateIngress(i) },
		Columns: []registry.Column{
			registry.ColumnOf("Class", "string", "The name of the IngressClass resource that should be used for additional configuration", 0, func(i *networkingv1.Ingress) any {
				if i.Spec.IngressClassName == nil {
					return "<none>"
				}
				return *i.Spec.IngressClassName
			}),
			registry.ColumnOf("Hosts", "string", "Hosts that incoming requests are matched against before the ingress rule", 0, func(i *networkingv1.Ingress) any {
				var hosts []string
				for _, r := range i.Spec.Rules {
					if r.Host != "" {
						hosts = append(hosts, r.Host)
					}
				}
				if len(hosts) == 0 {
					return "*"
				}
				return strings.Join(hosts, ",")
			}),
			registry.ColumnOf("Address", "string", "Address is a list containing ingress points for the load-balancer", 0, func(i *networkingv1.Ingress) any {
				var addrs []string
				for _, lb := range i.Status.LoadBalancer.Ingress {
					if lb.IP != "" {
						addrs = append(addrs, lb.IP)
					} else if lb.Hostname != "" {
						addrs = append(addrs, lb.Hostname)
					}
				}
				return strings.Join(addrs, ",")
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
	s, err := ingresses.Storage(ctx)
	if err != nil {
		return nil, err
	}
	for k, v := range s {
		out[k] = v
	}
	for _, k := range []registry.Served{serviceCIDRs, ipAddresses} {
		m, err := k.Storage(ctx)
		if err != nil {
			return nil, err
		}
		maps.Copy(out, m)
	}
	return map[string]map[string]rest.Storage{"v1": out}, nil
}
