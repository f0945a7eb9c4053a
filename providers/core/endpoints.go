package core

import (
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeembed/apiserver/providers/internal/endpointip"
	"github.com/kubeembed/apiserver/providers/internal/printers"
	"github.com/kubeembed/apiserver/providers/registry"
)

var endpoints = registry.Kind[*corev1.Endpoints]{
	Default:      defaultEndpoints,
	GroupVersion: corev1.SchemeGroupVersion,
	Resource:     "endpoints", Singular: "endpoints", ShortNames: []string{"ep"}, Namespaced: true,
	NewObj:  func() runtime.Object { return &corev1.Endpoints{} },
	NewList: func() runtime.Object { return &corev1.EndpointsList{} },
	Validate: func(e *corev1.Endpoints) field.ErrorList {
		var errs field.ErrorList
		for i, s := range e.Subsets {
			sp := field.NewPath("subsets").Index(i)
			for k, list := range [][]corev1.EndpointAddress{s.Addresses, s.NotReadyAddresses} {
				for j, a := range list {
					p := sp.Child([]string{"addresses", "notReadyAddresses"}[k]).Index(j).Child("ip")
					if ipErrs := utilvalidation.IsValidIP(p, a.IP); len(ipErrs) > 0 {
						errs = append(errs, ipErrs...)
						continue
					}
					errs = append(errs, endpointip.Validate(a.IP, p)...)
				}
			}
			for j, p := range s.Ports {
				for _, msg := range utilvalidation.IsValidPortNum(int(p.Port)) {
					errs = append(errs, field.Invalid(sp.Child("ports").Index(j).Child("port"), p.Port, msg))
				}
			}
		}
		return errs
	},
	Columns: []registry.Column{registry.ColumnOf("Endpoints", "string", corev1.Endpoints{}.SwaggerDoc()["subsets"], 0, endpointsString)},
}

// endpointsString is the ENDPOINTS cell of kubectl get endpoints: for each
// subset, each port's ready addresses in turn (a subset without ports
// lists its addresses alone), three at most. Not-ready addresses are left
// out, so subsets holding only those print nothing; <none> is for no
// subsets at all.
func endpointsString(e *corev1.Endpoints) any {
	if len(e.Subsets) == 0 {
		return "<none>"
	}
	var list []string
	for _, s := range e.Subsets {
		if len(s.Ports) == 0 {
			for _, a := range s.Addresses {
				list = append(list, a.IP)
			}
			continue
		}
		for _, p := range s.Ports {
			for _, a := range s.Addresses {
				list = append(list, net.JoinHostPort(a.IP, strconv.Itoa(int(p.Port))))
			}
		}
	}
	return printers.Abbreviated(list)
}

func defaultEndpoints(e *corev1.Endpoints) {
	for i := range e.Subsets {
		for j := range e.Subsets[i].Ports {
			if p := &e.Subsets[i].Ports[j]; p.Protocol == "" {
				p.Protocol = corev1.ProtocolTCP
			}
		}
	}
}
