package networking

import (
	"fmt"
	"net/netip"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeembed/apiserver/providers/registry"
)

// serviceCIDRs are the ranges service IPs come from. kubeembed's services
// allocate from the "kubernetes" one, created at start-up; others are
// stored (and validated) but not allocated from.
var serviceCIDRs = registry.Kind[*networkingv1.ServiceCIDR]{
	GroupVersion: networkingv1.SchemeGroupVersion, Resource: "servicecidrs", Singular: "servicecidr", Status: true,
	NewObj:  func() runtime.Object { return &networkingv1.ServiceCIDR{} },
	NewList: func() runtime.Object { return &networkingv1.ServiceCIDRList{} },
	Validate: func(c *networkingv1.ServiceCIDR) field.ErrorList {
		p := field.NewPath("spec", "cidrs")
		var errs field.ErrorList
		switch n := len(c.Spec.CIDRs); {
		case n == 0:
			errs = append(errs, field.Required(p, "at least one CIDR required"))
		case n > 2:
			errs = append(errs, field.TooMany(p, n, 2))
		}
		var v4, v6 int
		for i, cidr := range c.Spec.CIDRs {
			prefix, err := netip.ParsePrefix(cidr)
			switch {
			case err != nil:
				errs = append(errs, field.Invalid(p.Index(i), cidr, "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"))
				continue
			case prefix.Masked() != prefix:
				errs = append(errs, field.Invalid(p.Index(i), cidr, "must not have bits set beyond the prefix length"))
				continue
			}
			if prefix.Addr().Is4() {
				v4++
			} else {
				v6++
			}
		}
		if v4 > 1 || v6 > 1 {
			errs = append(errs, field.Invalid(p, c.Spec.CIDRs, "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64"))
		}
		return errs
	},
	ValidateUpdate: func(c, old *networkingv1.ServiceCIDR) field.ErrorList {
		// A single-stack range may only gain the other family.
		if len(old.Spec.CIDRs) == 1 && len(c.Spec.CIDRs) == 2 && c.Spec.CIDRs[0] == old.Spec.CIDRs[0] {
			return nil
		}
		if !apiequality.Semantic.DeepEqual(c.Spec.CIDRs, old.Spec.CIDRs) {
			return field.ErrorList{field.Invalid(field.NewPath("spec", "cidrs"), c.Spec.CIDRs, "field is immutable")}
		}
		return nil
	},
	Columns: []registry.Column{
		registry.ColumnOf("CIDRs", "string", networkingv1.ServiceCIDRSpec{}.SwaggerDoc()["cidrs"], 0, func(c *networkingv1.ServiceCIDR) any {
			return strings.Join(c.Spec.CIDRs, ",")
		}),
	},
	ReturnDeleted: true,
}

// ipAddresses record which object holds an IP: the service allocator
// writes one per cluster IP, named by the address.
var ipAddresses = registry.Kind[*networkingv1.IPAddress]{
	GroupVersion: networkingv1.SchemeGroupVersion, Resource: "ipaddresses", Singular: "ipaddress", ShortNames: []string{"ip"},
	NewObj:  func() runtime.Object { return &networkingv1.IPAddress{} },
	NewList: func() runtime.Object { return &networkingv1.IPAddressList{} },
	// The name is the canonical address, checked below.
	NameValidation: registry.PathSegmentName,
	Validate: func(ip *networkingv1.IPAddress) field.ErrorList {
		var errs field.ErrorList
		if addr, err := netip.ParseAddr(ip.Name); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), ip.Name, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"))
		} else if addr.String() != ip.Name {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), ip.Name, fmt.Sprintf("must be in canonical form (%q)", addr.String())))
		}
		p := field.NewPath("spec", "parentRef")
		if ip.Spec.ParentRef == nil {
			return append(errs, field.Required(p, ""))
		}
		if ip.Spec.ParentRef.Resource == "" {
			errs = append(errs, field.Required(p.Child("resource"), ""))
		}
		if ip.Spec.ParentRef.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		}
		return errs
	},
	ValidateUpdate: func(ip, old *networkingv1.IPAddress) field.ErrorList {
		if !apiequality.Semantic.DeepEqual(ip.Spec.ParentRef, old.Spec.ParentRef) {
			return field.ErrorList{field.Invalid(field.NewPath("spec", "parentRef"), ip.Spec.ParentRef, "field is immutable")}
		}
		return nil
	},
	Columns: []registry.Column{
		registry.ColumnOf("ParentRef", "string", networkingv1.IPAddressSpec{}.SwaggerDoc()["parentRef"], 0, func(ip *networkingv1.IPAddress) any {
			r := ip.Spec.ParentRef
			if r == nil {
				return "<none>"
			}
			ref := strings.ToLower(schema.GroupResource{Group: r.Group, Resource: r.Resource}.String())
			if r.Namespace != "" {
				ref += "/" + r.Namespace
			}
			return ref + "/" + r.Name
		}),
		func() registry.Column { c := registry.AgeColumn(); c.CellOnly = true; return c }(),
	},
	NoAge: true,
}
