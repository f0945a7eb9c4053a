package core

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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
	returnDeleted      bool // see registry.Kind.ReturnDeleted
	noAge              bool // no AGE column
}

func (k simple[T]) storage(ctx providers.Config) (map[string]rest.Storage, error) {
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
	st.ValidateOnUpdate = func(_ context.Context, obj, _ runtime.Object) field.ErrorList { return check(obj.(T)) }
	store, err := registry.NewStore(ctx, registry.StoreConfig{
		Resource: corev1.Resource(k.resource), Singular: k.singular,
		NewFunc: k.newObj, NewList: k.newList, Strategy: st, ShortNames: k.shortNames,
		Table:    registry.Table(k.table()...),
		AttrFunc: registry.AttrFunc[T](k.namespaced, nil),
	})
	if err != nil {
		return nil, err
	}
	store.Store.ReturnDeletedObject = k.returnDeleted
	return map[string]rest.Storage{k.resource: store}, nil
}

func (k simple[T]) table() []registry.Column {
	cols := append([]registry.Column{registry.NameColumn()}, k.columns...)
	if k.noAge {
		return cols
	}
	return append(cols, registry.AgeColumn())
}

// createdAt is the CREATED AT column some kinds have instead of AGE.
func createdAt[T runtime.Object]() registry.Column {
	return registry.ColumnOf("Created At", "date", metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"], 0, func(o T) any {
		m, _ := meta.Accessor(o)
		return m.GetCreationTimestamp().UTC().Format(time.RFC3339)
	})
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
				errs = append(errs, utilvalidation.IsValidIP(sp.Child("addresses").Index(j).Child("ip"), a.IP)...)
			}
			for j, p := range s.Ports {
				for _, msg := range utilvalidation.IsValidPortNum(int(p.Port)) {
					errs = append(errs, field.Invalid(sp.Child("ports").Index(j).Child("port"), p.Port, msg))
				}
			}
		}
		return errs
	},
	columns: []registry.Column{registry.ColumnOf("Endpoints", "string", corev1.Endpoints{}.SwaggerDoc()["subsets"], 0, func(e *corev1.Endpoints) any {
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
	resource: "podtemplates", singular: "podtemplate", namespaced: true, generation: true, returnDeleted: true,
	newObj:  func() runtime.Object { return &corev1.PodTemplate{} },
	newList: func() runtime.Object { return &corev1.PodTemplateList{} },
	meta:    func(t *corev1.PodTemplate) *metav1.ObjectMeta { return &t.ObjectMeta },
	validate: func(t *corev1.PodTemplate) field.ErrorList {
		return ValidatePodTemplateSpec(&t.Template, field.NewPath("template"))
	},
	columns: []registry.Column{
		registry.ColumnOf("Containers", "string", "Names of each container in the template.", 0, func(t *corev1.PodTemplate) any { return containerNames(&t.Template) }),
		registry.ColumnOf("Images", "string", "Images referenced by each container in the template.", 0, func(t *corev1.PodTemplate) any { return containerImages(&t.Template) }),
		registry.ColumnOf("Pod Labels", "string", "The labels for the pod template.", 0, func(t *corev1.PodTemplate) any { return labels.FormatLabels(t.Template.Labels) }),
	},
	noAge: true,
}

var limitRanges = simple[*corev1.LimitRange]{
	resource: "limitranges", singular: "limitrange", shortNames: []string{"limits"}, namespaced: true,
	newObj:  func() runtime.Object { return &corev1.LimitRange{} },
	newList: func() runtime.Object { return &corev1.LimitRangeList{} },
	meta:    func(l *corev1.LimitRange) *metav1.ObjectMeta { return &l.ObjectMeta },
	columns: []registry.Column{createdAt[*corev1.LimitRange]()},
	noAge:   true,
	validate: func(l *corev1.LimitRange) field.ErrorList {
		var errs field.ErrorList
		types := []string{string(corev1.LimitTypePod), string(corev1.LimitTypeContainer), string(corev1.LimitTypePersistentVolumeClaim)}
		for i, item := range l.Spec.Limits {
			// Other types are allowed when qualified, as extended resources.
			if !slices.Contains(types, string(item.Type)) && !strings.Contains(string(item.Type), "/") {
				errs = append(errs, field.Invalid(field.NewPath("spec", "limits").Index(i).Child("type"), item.Type, "must be a standard limit type or fully qualified"))
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

func defaultReplicationController(rc *corev1.ReplicationController) {
	var labels map[string]string
	if rc.Spec.Template != nil {
		labels = rc.Spec.Template.Labels
		DefaultPodTemplateSpec(rc.Spec.Template)
	}
	if labels != nil {
		if len(rc.Spec.Selector) == 0 {
			rc.Spec.Selector = labels
		}
		if len(rc.Labels) == 0 {
			rc.Labels = labels
		}
	}
	if rc.Spec.Replicas == nil {
		one := int32(1)
		rc.Spec.Replicas = &one
	}
}

// replicationControllers serves replicationcontrollers with /status and
// /scale.
func replicationControllers(ctx providers.Config) (map[string]rest.Storage, error) {
	w := registry.Workload[*corev1.ReplicationController]{
		GroupVersion: corev1.SchemeGroupVersion, Categories: []string{"all"},
		// core/v1 keeps a deleted controller's pods unless asked otherwise.
		OrphanByDefault: true,
		Resource:        "replicationcontrollers", Singular: "replicationcontroller", ShortNames: []string{"rc"},
		NewObj:  func() runtime.Object { return &corev1.ReplicationController{} },
		NewList: func() runtime.Object { return &corev1.ReplicationControllerList{} },
		Meta:    func(rc *corev1.ReplicationController) *metav1.ObjectMeta { return &rc.ObjectMeta },
		Spec:    func(rc *corev1.ReplicationController) any { return rc.Spec },
		ResetStatus: func(rc, old *corev1.ReplicationController) {
			rc.Status = corev1.ReplicationControllerStatus{}
			if old != nil {
				rc.Status = old.Status
			}
		},
		ResetSpec: func(rc, old *corev1.ReplicationController) { rc.Spec = old.Spec },
		Validate: func(rc *corev1.ReplicationController) field.ErrorList {
			p := field.NewPath("spec")
			errs := registry.NonNegative(p, registry.N("replicas", ptrValue(rc.Spec.Replicas)), registry.N("minReadySeconds", rc.Spec.MinReadySeconds))
			if len(rc.Spec.Selector) == 0 {
				errs = append(errs, field.Required(p.Child("selector"), ""))
			}
			if rc.Spec.Template == nil {
				return append(errs, field.Required(p.Child("template"), ""))
			}
			for k, v := range rc.Spec.Selector {
				if rc.Spec.Template.Labels[k] != v {
					errs = append(errs, field.Invalid(p.Child("template", "metadata", "labels"), rc.Spec.Template.Labels, "`selector` does not match template `labels`"))
					break
				}
			}
			return append(errs, ValidatePodTemplateSpec(rc.Spec.Template, p.Child("template"))...)
		},
		Columns: []registry.Column{
			registry.ColumnOf("Desired", "integer", corev1.ReplicationControllerSpec{}.SwaggerDoc()["replicas"], 0, func(rc *corev1.ReplicationController) any { return int64(ptrValue(rc.Spec.Replicas)) }),
			registry.ColumnOf("Current", "integer", corev1.ReplicationControllerStatus{}.SwaggerDoc()["replicas"], 0, func(rc *corev1.ReplicationController) any { return int64(rc.Status.Replicas) }),
			registry.ColumnOf("Ready", "integer", corev1.ReplicationControllerStatus{}.SwaggerDoc()["readyReplicas"], 0, func(rc *corev1.ReplicationController) any { return int64(rc.Status.ReadyReplicas) }),
			registry.AgeColumn(),
			registry.ColumnOf("Containers", "string", "Names of each container in the template.", 1, func(rc *corev1.ReplicationController) any { return containerNames(rc.Spec.Template) }),
			registry.ColumnOf("Images", "string", "Images referenced by each container in the template.", 1, func(rc *corev1.ReplicationController) any { return containerImages(rc.Spec.Template) }),
			registry.ColumnOf("Selector", "string", corev1.ReplicationControllerSpec{}.SwaggerDoc()["selector"], 1, func(rc *corev1.ReplicationController) any {
				return labels.FormatLabels(rc.Spec.Selector)
			}),
		},
		Scale: &registry.ScaleAccess{
			Replicas:       func(o runtime.Object) int32 { return ptrValue(o.(*corev1.ReplicationController).Spec.Replicas) },
			SetReplicas:    func(o runtime.Object, n int32) { o.(*corev1.ReplicationController).Spec.Replicas = &n },
			StatusReplicas: func(o runtime.Object) int32 { return o.(*corev1.ReplicationController).Status.Replicas },
			Selector: func(o runtime.Object) *metav1.LabelSelector {
				return &metav1.LabelSelector{MatchLabels: o.(*corev1.ReplicationController).Spec.Selector}
			},
		},
	}
	return w.Storage(ctx)
}

func ptrValue(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func containerNames(t *corev1.PodTemplateSpec) string {
	if t == nil {
		return ""
	}
	var names []string
	for _, c := range t.Spec.Containers {
		names = append(names, c.Name)
	}
	return strings.Join(names, ",")
}

func containerImages(t *corev1.PodTemplateSpec) string {
	if t == nil {
		return ""
	}
	var images []string
	for _, c := range t.Spec.Containers {
		images = append(images, c.Image)
	}
	return strings.Join(images, ",")
}

var resourceQuotas = registry.Kind[*corev1.ResourceQuota]{
	GroupVersion: corev1.SchemeGroupVersion, Resource: "resourcequotas", Singular: "resourcequota",
	ShortNames: []string{"quota"}, Namespaced: true, Status: true, ReturnDeleted: true,
	NewObj:  func() runtime.Object { return &corev1.ResourceQuota{} },
	NewList: func() runtime.Object { return &corev1.ResourceQuotaList{} },
	Validate: func(q *corev1.ResourceQuota) field.ErrorList {
		var errs field.ErrorList
		p := field.NewPath("spec", "hard")
		for name, v := range q.Spec.Hard {
			if v.Sign() < 0 {
				errs = append(errs, field.Invalid(p.Key(string(name)), v.String(), "must be greater than or equal to 0"))
			}
		}
		return errs
	},
	Columns: []registry.Column{
		registry.ColumnOf("Request", "string", "Request represents a minimum amount of cpu/memory that a container may consume.", 0, func(q *corev1.ResourceQuota) any {
			return quotaSummary(q, func(n corev1.ResourceName) bool { return !strings.HasPrefix(string(n), "limits.") })
		}),
		registry.ColumnOf("Limit", "string", "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.", 0, func(q *corev1.ResourceQuota) any {
			return quotaSummary(q, func(n corev1.ResourceName) bool { return strings.HasPrefix(string(n), "limits.") })
		}),
	},
}

// quotaSummary is "name: used/hard, ..." over the enforced hard limits (in
// status, written by the quota controller) keep selects, sorted by name.
func quotaSummary(q *corev1.ResourceQuota, keep func(corev1.ResourceName) bool) string {
	var names []string
	for n := range q.Status.Hard {
		if keep(n) {
			names = append(names, string(n))
		}
	}
	slices.Sort(names)
	var parts []string
	for _, n := range names {
		hard := q.Status.Hard[corev1.ResourceName(n)]
		used := q.Status.Used[corev1.ResourceName(n)]
		parts = append(parts, fmt.Sprintf("%s: %s/%s", n, used.String(), hard.String()))
	}
	return strings.Join(parts, ", ")
}
