package apps

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/core"
	"github.com/kubeembed/apiserver/providers/registry"
)

// workload describes one apps/v1 kind whose objects have a spec, a status,
// a selector and a pod template.
type workload[T runtime.Object] struct {
	resource, singular string
	shortNames         []string
	newObj, newList    func() runtime.Object
	meta               func(T) *metav1.ObjectMeta
	spec               func(T) any
	resetStatus        func(obj, old T)
	resetSpec          func(obj, old T)
	validate           func(T) field.ErrorList
	validateUpdate     func(obj, old T) field.ErrorList
	validateStatus     func(T) field.ErrorList
	table              []registry.Column
	scale              *registry.ScaleAccess
}

// storage builds the main store, /status and (for scalable kinds) /scale.
func (w workload[T]) storage(ctx providers.Context) (map[string]rest.Storage, error) {
	gv := schema.GroupVersion{Group: "apps", Version: "v1"}
	st := &registry.Strategy{ObjectTyper: ctx.Scheme, NameGenerator: names.SimpleNameGenerator, Namespaced: true}
	st.ResetFields = registry.ResetStatus(gv)
	st.PrepareCreate = func(_ context.Context, obj runtime.Object) {
		o := obj.(T)
		var zero T
		w.resetStatus(o, zero)
		w.meta(o).Generation = 1
	}
	st.PrepareUpdate = func(_ context.Context, obj, old runtime.Object) {
		o, prev := obj.(T), old.(T)
		w.resetStatus(o, prev)
		if !apiequality.Semantic.DeepEqual(w.spec(o), w.spec(prev)) {
			w.meta(o).Generation = w.meta(prev).Generation + 1
		} else {
			w.meta(o).Generation = w.meta(prev).Generation
		}
	}
	st.ValidateCreate = func(_ context.Context, obj runtime.Object) field.ErrorList {
		o := obj.(T)
		errs := apivalidation.ValidateObjectMeta(w.meta(o), true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
		return append(errs, w.validate(o)...)
	}
	st.ValidateOnUpdate = func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		o, prev := obj.(T), old.(T)
		errs := apivalidation.ValidateObjectMetaUpdate(w.meta(o), w.meta(prev), field.NewPath("metadata"))
		errs = append(errs, w.validate(o)...)
		if w.validateUpdate != nil {
			errs = append(errs, w.validateUpdate(o, prev)...)
		}
		return errs
	}
	table := append([]registry.Column{registry.NameColumn()}, w.table...)
	store, err := registry.NewStore(ctx, registry.StoreConfig{
		Resource: schema.GroupResource{Group: gv.Group, Resource: w.resource}, Singular: w.singular,
		NewFunc: w.newObj, NewList: w.newList,
		Strategy: st, ShortNames: w.shortNames, Categories: []string{"all"},
		Table:    registry.Table(table...),
		AttrFunc: registry.AttrFunc[T](true, nil),
	})
	if err != nil {
		return nil, err
	}

	status := &registry.Strategy{ObjectTyper: ctx.Scheme, NameGenerator: names.SimpleNameGenerator, Namespaced: true}
	status.ResetFields = registry.ResetSpec(gv, "metadata.labels")
	status.PrepareUpdate = func(_ context.Context, obj, old runtime.Object) {
		o, prev := obj.(T), old.(T)
		w.resetSpec(o, prev)
		w.meta(o).Labels = w.meta(prev).Labels
	}
	status.ValidateOnUpdate = func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		o, prev := obj.(T), old.(T)
		errs := apivalidation.ValidateObjectMetaUpdate(w.meta(o), w.meta(prev), field.NewPath("metadata"))
		if w.validateStatus != nil {
			errs = append(errs, w.validateStatus(o)...)
		}
		return errs
	}
	out := map[string]rest.Storage{
		w.resource:             store,
		w.resource + "/status": registry.Subresource(store, status, status),
	}
	if w.scale != nil {
		out[w.resource+"/scale"] = registry.Scale(store, *w.scale)
	}
	return out, nil
}

// validateSelectorAndTemplate checks what every apps/v1 workload requires of
// its selector and pod template.
func validateSelectorAndTemplate(selector *metav1.LabelSelector, template *corev1.PodTemplateSpec, kind string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if selector == nil {
		errs = append(errs, field.Required(p.Child("selector"), ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(selector, metav1validation.LabelSelectorValidationOptions{}, p.Child("selector"))...)
		if len(selector.MatchLabels)+len(selector.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(p.Child("selector"), selector, "empty selector is invalid for "+kind))
		}
	}
	if sel, err := metav1.LabelSelectorAsSelector(selector); err == nil && selector != nil && !sel.Empty() {
		if !sel.Matches(labels.Set(template.Labels)) {
			errs = append(errs, field.Invalid(p.Child("template", "metadata", "labels"), template.Labels, "`selector` does not match template `labels`"))
		}
	}
	errs = append(errs, core.ValidatePodTemplateSpec(template, p.Child("template"))...)
	if template.Spec.RestartPolicy != "" && template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(p.Child("template", "spec", "restartPolicy"), template.Spec.RestartPolicy, []string{string(corev1.RestartPolicyAlways)}))
	}
	if template.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(p.Child("template", "spec", "activeDeadlineSeconds"), "activeDeadlineSeconds in ReplicaSet is not Supported"))
	}
	return errs
}

func nonNegative(p *field.Path, fields map[string]int32) field.ErrorList {
	var errs field.ErrorList
	for _, name := range sortedKeys(fields) {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(fields[name]), p.Child(name))...)
	}
	return errs
}

func sortedKeys(m map[string]int32) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// Column helpers shared by the workload tables.
func column[T any](name, typ, desc string, priority int32, f func(T) any) registry.Column {
	return registry.Column{
		TableColumnDefinition: metav1.TableColumnDefinition{Name: name, Type: typ, Description: desc, Priority: priority},
		Value:                 func(o runtime.Object) any { return f(any(o).(T)) },
	}
}

func containersColumns[T any](template func(T) *corev1.PodTemplateSpec) []registry.Column {
	return []registry.Column{
		column("Containers", "string", "Names of each container in the template.", 1, func(o T) any {
			var n []string
			for _, c := range template(o).Spec.Containers {
				n = append(n, c.Name)
			}
			return strings.Join(n, ",")
		}),
		column("Images", "string", "Images referenced by each container in the template.", 1, func(o T) any {
			var n []string
			for _, c := range template(o).Spec.Containers {
				n = append(n, c.Image)
			}
			return strings.Join(n, ",")
		}),
	}
}

func selectorColumn[T any](selector func(T) *metav1.LabelSelector) registry.Column {
	return column("Selector", "string", "Label selector for pods.", 1, func(o T) any {
		return metav1.FormatLabelSelector(selector(o))
	})
}
