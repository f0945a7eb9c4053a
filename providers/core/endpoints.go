package core

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeembed/apiserver/providers/internal/endpointip"
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
	Columns: []registry.Column{registry.ColumnOf("Endpoints", "string", corev1.Endpoints{}.SwaggerDoc()["subsets"], 0, func(e *corev1.Endpoints) any {
		var list []string
		for _, s := range e.Subsets {
			for _, a := range s.Addresses {
				if len(s.Ports) == 0 {
					list = append(list, a.IP)
				}
				for _, p := range s.Ports {
					list = append(list, fmt.Sprintf("%s:%d", a.IP, p.Port))
				}
			}
		}
		switch {
		case len(list) == 0:
			return "<none>"
		case len(list) > 3:
			return strings.Join(list[:3], ",") + fmt.Sprintf(" + %d more...", len(list)-3)
		}
		return strings.Join(list, ",")
	})},
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
