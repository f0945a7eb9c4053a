package core

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"
)

// simple describes a core/v1 kind without a status subresource.
type simple[T runtime.Object] struct {
	resource, singular string
	shortNames         []string
	namespaced         bool
	newObj, newList    func() runtime.Object
	meta               func(T) *metav1.ObjectMeta
	validate           func(T) field.ErrorList
	columns            []registry.Column
	generation         bool // see registry.Strategy.Generation
}

func (k simple[T]) storage(ctx providers.Context) (map[string]rest.Storage, error) {
	st := strategy(ctx.Scheme, k.namespaced)
	st.Generation = k.generation
	check := func(o T) field.ErrorList {
		errs := validateMeta(k.meta(o), k.namespaced, apivalidation.NameIsDNSSubdomain)
		if k.validate != nil {
			errs = append(errs, k.validate(o)...)
		}
		return errs
	}
	st.ValidateCreate = func(_ context.Context, obj runtime.Object) field.ErrorList { return check(obj.(T)) }
	st.ValidateOnUpdate = func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		return append(validateMetaUpdate(k.meta(obj.(T)), k.meta(old.(T))), check(obj.(T))...)
	}
	store, err := registry.NewStore(ctx, registry.StoreConfig{
		Resource: corev1.Resource(k.resource), Singular: k.singular,
		NewFunc: k.newObj, NewList: k.newList, Strategy: st, ShortNames: k.shortNames,
		Table:    registry.Table(append(append([]registry.Column{registry.NameColumn()}, k.columns...), registry.AgeColumn())...),
		AttrFunc: registry.AttrFunc[T](k.namespaced, nil),
	})
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{k.resource: store}, nil
}

var endpoints = simple[*corev1.Endpoints]{
	resource: "endpoints", singular: "endpoints", shortNames: []string{"ep"}, namespaced: true,
	newObj:  func() runtime.Object { return &corev1.Endpoints{} },
	newList: func() runtime.Object { return &corev1.EndpointsList{} },
	meta:    func(e *corev1.Endpoints) *metav1.ObjectMeta { return &e.ObjectMeta },
	validate: func(e *corev1.Endpoints) field.ErrorList {
		var errs field.ErrorList
		for i, s := range e.Subsets {
			sp := field.NewPath("subsets").Index(i)
			for j, a := range append(append([]corev1.EndpointAddress{}, s.Addresses...), s.NotReadyAddresses...) {
				for _, msg := range utilvalidation.IsValidIP(sp.Child("addresses").Index(j).Child("ip"), a.IP) {
					errs = append(errs, msg)
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
	columns: []registry.Column{registry.ColumnOf("Endpoints", "string", "Endpoints of the service", 0, func(e *corev1.Endpoints) any {
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

var podTemplates = simple[*corev1.PodTemplate]{
	resource: "podtemplates", singular: "podtemplate", namespaced: true, generation: true,
	newObj:  func() runtime.Object { return &corev1.PodTemplate{} },
	newList: func() runtime.Object { return &corev1.PodTemplateList{} },
	meta:    func(t *corev1.PodTemplate) *metav1.ObjectMeta { return &t.ObjectMeta },
	validate: func(t *corev1.PodTemplate) field.ErrorList {
		return ValidatePodTemplateSpec(&t.Template, field.NewPath("template"))
	},
}

var limitRanges = simple[*corev1.LimitRange]{
	resource: "limitranges", singular: "limitrange", shortNames: []string{"limits"}, namespaced: true,
	newObj:  func() runtime.Object { return &corev1.LimitRange{} },
	newList: func() runtime.Object { return &corev1.LimitRangeList{} },
	meta:    func(l *corev1.LimitRange) *metav1.ObjectMeta { return &l.ObjectMeta },
	validate: func(l *corev1.LimitRange) field.ErrorList {
		var errs field.ErrorList
		types := []string{string(corev1.LimitTypePod), string(corev1.LimitTypeContainer), string(corev1.LimitTypePersistentVolumeClaim)}
		for i, item := range l.Spec.Limits {
			if !slices.Contains(types, string(item.Type)) {
				errs = append(errs, field.NotSupported(field.NewPath("spec", "limits").Index(i).Child("type"), item.Type, types))
			}
		}
		return errs
	},
}

func defaultPV(p *corev1.PersistentVolume) {
	if p.Spec.PersistentVolumeReclaimPolicy == "" {
		p.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	}
	if p.Spec.VolumeMode == nil {
		fs := corev1.PersistentVolumeFilesystem
		p.Spec.VolumeMode = &fs
	}
	if p.Status.Phase == "" {
		p.Status.Phase = corev1.VolumePending
	}
	if h := p.Spec.HostPath; h != nil && h.Type == nil {
		t := corev1.HostPathUnset
		h.Type = &t
	}
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

// defaultLimitRange fills a container limit's default from its max, and its
// default request from the default, then from the min.
func defaultLimitRange(l *corev1.LimitRange) {
	for i := range l.Spec.Limits {
		item := &l.Spec.Limits[i]
		if item.Type != corev1.LimitTypeContainer {
			continue
		}
		fill := func(dst *corev1.ResourceList, src corev1.ResourceList) {
			for name, v := range src {
				if _, ok := (*dst)[name]; !ok {
					if *dst == nil {
						*dst = corev1.ResourceList{}
					}
					(*dst)[name] = v.DeepCopy()
				}
			}
		}
		fill(&item.Default, item.Max)
		fill(&item.DefaultRequest, item.Default)
		fill(&item.DefaultRequest, item.Min)
	}
}
