// Package discovery serves discovery.k8s.io/v1 endpoint slices.
package discovery

import (
	"net/netip"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/internal/endpointip"
	"github.com/kubeembed/apiserver/providers/internal/printers"
	"github.com/kubeembed/apiserver/providers/registry"
)

const maxEndpoints, maxPorts = 1000, 100

var addressTypes = []string{string(discoveryv1.AddressTypeIPv4), string(discoveryv1.AddressTypeIPv6), string(discoveryv1.AddressTypeFQDN)}

// Provider serves discovery.k8s.io.
func Provider() providers.Provider { return group }

var group = registry.Group{
	GroupVersion: discoveryv1.SchemeGroupVersion, AddToScheme: discoveryv1.AddToScheme,
	Served: []registry.Served{registry.Kind[*discoveryv1.EndpointSlice]{
		Default: func(o *discoveryv1.EndpointSlice) {
			for i := range o.Ports {
				p := &o.Ports[i]
				if p.Name == nil {
					p.Name = new(string)
				}
				if p.Protocol == nil {
					p.Protocol = ptr.To(corev1.ProtocolTCP)
				}
			}
		},

		GroupVersion: discoveryv1.SchemeGroupVersion, Resource: "endpointslices", Singular: "endpointslice",
		Namespaced: true,
		// kube-apiserver counts a slice's generation on its endpoints,
		// ports and labels (which say what service it belongs to).
		GenerationOf: func(s *discoveryv1.EndpointSlice) any {
			return []any{s.AddressType, s.Endpoints, s.Ports, s.Labels}
		},
		NewObj:   func() runtime.Object { return &discoveryv1.EndpointSlice{} },
		NewList:  func() runtime.Object { return &discoveryv1.EndpointSliceList{} },
		Validate: validate,
		ValidateUpdate: func(s, old *discoveryv1.EndpointSlice) field.ErrorList {
			// The address type may only change from the deprecated IP.
			if old.AddressType == "IP" {
				return nil
			}
			return apivalidation.ValidateImmutableField(s.AddressType, old.AddressType, field.NewPath("addressType"))
		},
		Columns: []registry.Column{
			registry.ColumnOf("AddressType", "string", discoveryv1.EndpointSlice{}.SwaggerDoc()["addressType"], 0, func(s *discoveryv1.EndpointSlice) any { return string(s.AddressType) }),
			registry.ColumnOf("Ports", "string", discoveryv1.EndpointSlice{}.SwaggerDoc()["ports"], 0, ports),
			registry.ColumnOf("Endpoints", "string", discoveryv1.EndpointSlice{}.SwaggerDoc()["endpoints"], 0, endpoints),
		},
		Fields:     func(s *discoveryv1.EndpointSlice) fields.Set { return fields.Set{"addressType": string(s.AddressType)} },
		FieldNames: []string{"addressType"},
	}},
}

func validate(s *discoveryv1.EndpointSlice) field.ErrorList {
	var errs field.ErrorList
	switch {
	case s.AddressType == "":
		errs = append(errs, field.Required(field.NewPath("addressType"), ""))
	case !slices.Contains(addressTypes, string(s.AddressType)):
		errs = append(errs, field.NotSupported(field.NewPath("addressType"), s.AddressType, addressTypes))
	}
	ep := field.NewPath("endpoints")
	if len(s.Endpoints) > maxEndpoints {
		errs = append(errs, field.TooMany(ep, len(s.Endpoints), maxEndpoints))
	}
	for i, e := range s.Endpoints {
		p := ep.Index(i).Child("addresses")
		if len(e.Addresses) == 0 {
			errs = append(errs, field.Required(p, "must contain at least 1 address"))
		} else if len(e.Addresses) > 100 {
			errs = append(errs, field.TooMany(p, len(e.Addresses), 100))
		}
		for j, a := range e.Addresses {
			errs = append(errs, validateAddress(s.AddressType, a, p.Index(j))...)
		}
	}
	pp := field.NewPath("ports")
	if len(s.Ports) > maxPorts {
		errs = append(errs, field.TooMany(pp, len(s.Ports), maxPorts))
	}
	names := map[string]bool{}
	for i, port := range s.Ports {
		p := pp.Index(i)
		if port.Name != nil && *port.Name != "" {
			for _, msg := range validation.IsDNS1123Label(*port.Name) {
				errs = append(errs, field.Invalid(p.Child("name"), *port.Name, msg))
			}
		}
		name := ""
		if port.Name != nil {
			name = *port.Name
		}
		if names[name] {
			errs = append(errs, field.Duplicate(p.Child("name"), name))
		}
		names[name] = true
		if port.Port != nil {
			for _, msg := range validation.IsValidPortNum(int(*port.Port)) {
				errs = append(errs, field.Invalid(p.Child("port"), *port.Port, msg))
			}
		}
	}
	return errs
}

func validateAddress(t discoveryv1.AddressType, a string, p *field.Path) field.ErrorList {
	var msgs []string
	switch t {
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6:
		ip, err := netip.ParseAddr(a)
		switch {
		case err != nil:
			msgs = []string{"must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"}
		case t == discoveryv1.AddressTypeIPv4 && !ip.Is4():
			msgs = []string{"must be an IPv4 address"}
		case t == discoveryv1.AddressTypeIPv6 && !ip.Is6():
			msgs = []string{"must be an IPv6 address"}
		default:
			return endpointip.Validate(a, p)
		}
	case discoveryv1.AddressTypeFQDN:
		return validation.IsFullyQualifiedDomainName(p, a)
	}
	var errs field.ErrorList
	for _, m := range msgs {
		errs = append(errs, field.Invalid(p, a, m))
	}
	return errs
}

// ports is the PORTS cell of kubectl get endpointslices: each port's
// number, or its name if it has none ("*" for neither), three at most.
func ports(s *discoveryv1.EndpointSlice) any {
	var list []string
	for _, p := range s.Ports {
		switch {
		case p.Port != nil:
			list = append(list, strconv.Itoa(int(*p.Port)))
		case p.Name != nil:
			list = append(list, *p.Name)
		default:
			list = append(list, "*")
		}
	}
	return orUnset(list)
}

// endpoints is the ENDPOINTS cell: the endpoints' addresses, three at most.
func endpoints(s *discoveryv1.EndpointSlice) any {
	var addrs []string
	for _, e := range s.Endpoints {
		addrs = append(addrs, e.Addresses...)
	}
	return orUnset(addrs)
}

// orUnset abbreviates list, or is <unset> if that prints nothing (as for
// one port without a number whose name is empty).
func orUnset(list []string) string {
	if s := printers.Abbreviated(list); s != "" {
		return s
	}
	return "<unset>"
}
