package apps

import (
	"context"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/providers/internal/podspec"
	"github.com/kubeembed/apiserver/providers/internal/validation"
	"github.com/kubeembed/apiserver/providers/registry"
)

// templateGeneration is the annotation in which apps/v1 keeps a DaemonSet's
// template generation: 1 on create, counted by the server on template
// changes whatever the client sends.
const templateGeneration = "deprecated.daemonset.template.generation"

func defaultDaemonSet(d *appsv1.DaemonSet) {
	// Set when decoded, so that on create the annotation is among the
	// fields the request's manager owns, as on kube-apiserver.
	if _, ok := d.Annotations[templateGeneration]; !ok {
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Annotations[templateGeneration] = "1"
	}
	u := &d.Spec.UpdateStrategy
	if u.Type == "" {
		u.Type = appsv1.RollingUpdateDaemonSetStrategyType
	}
	if u.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if u.RollingUpdate == nil {
			u.RollingUpdate = &appsv1.RollingUpdateDaemonSet{}
		}
		if u.RollingUpdate.MaxUnavailable == nil {
			u.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(1))
		}
		if u.RollingUpdate.MaxSurge == nil {
			u.RollingUpdate.MaxSurge = ptr.To(intstr.FromInt32(0))
		}
	}
	if d.Spec.RevisionHistoryLimit == nil {
		d.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	}
	podspec.DefaultTemplate(&d.Spec.Template)
}

var daemonSets = registry.Kind[*appsv1.DaemonSet]{
	Default: defaultDaemonSet,
	Status:  true, NoAge: true, Namespaced: true,
	GroupVersion: appsv1.SchemeGroupVersion, Categories: []string{"all"},
	Resource: "daemonsets", Singular: "daemonset", ShortNames: []string{"ds"},
	FieldAnnotations: []string{templateGeneration},
	NewObj:           func() runtime.Object { return &appsv1.DaemonSet{} },
	NewList:          func() runtime.Object { return &appsv1.DaemonSetList{} },
	GenerationOf:     func(d *appsv1.DaemonSet) any { return d.Spec },
	PrepareCreate: func(_ context.Context, d *appsv1.DaemonSet) {
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Annotations[templateGeneration] = "1"
	},
	PrepareUpdate: func(d, old *appsv1.DaemonSet) {
		gen, _ := strconv.ParseInt(old.Annotations[templateGeneration], 10, 64)
		if !apiequality.Semantic.DeepEqual(d.Spec.Template, old.Spec.Template) {
			gen++
		}
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Annotations[templateGeneration] = strconv.FormatInt(gen, 10)
	},
	Validate: func(d *appsv1.DaemonSet) field.ErrorList {
		p := field.NewPath("spec")
		errs := validation.NonNegative(p, validation.N("minReadySeconds", d.Spec.MinReadySeconds))
		switch d.Spec.UpdateStrategy.Type {
		case appsv1.RollingUpdateDaemonSetStrategyType:
			if ru := d.Spec.UpdateStrategy.RollingUpdate; ru != nil && isZero(ru.MaxUnavailable) && isZero(ru.MaxSurge) {
				errs = append(errs, field.Invalid(p.Child("updateStrategy", "rollingUpdate", "maxUnavailable"), ru.MaxUnavailable.String(), "may not be 0 when `maxSurge` is 0"))
			}
		case appsv1.OnDeleteDaemonSetStrategyType:
		default:
			errs = append(errs, field.NotSupported(p.Child("updateStrategy", "type"), d.Spec.UpdateStrategy.Type,
				[]string{string(appsv1.OnDeleteDaemonSetStrategyType), string(appsv1.RollingUpdateDaemonSetStrategyType)}))
		}
		return append(errs, validateSelectorAndTemplate(d.Spec.Selector, &d.Spec.Template, "daemonset", p)...)
	},
	ValidateUpdate: func(d, old *appsv1.DaemonSet) field.ErrorList {
		return apivalidation.ValidateImmutableField(d.Spec.Selector, old.Spec.Selector, field.NewPath("spec", "selector"))
	},
	ValidateStatus: func(d, _ *appsv1.DaemonSet) field.ErrorList {
		s := d.Status
		return validation.NonNegative(field.NewPath("status"), validation.N("currentNumberScheduled", s.CurrentNumberScheduled), validation.N("numberMisscheduled", s.NumberMisscheduled), validation.N("desiredNumberScheduled", s.DesiredNumberScheduled), validation.N("numberReady", s.NumberReady), validation.N("updatedNumberScheduled", s.UpdatedNumberScheduled), validation.N("numberAvailable", s.NumberAvailable), validation.N("numberUnavailable", s.NumberUnavailable))
	},
	Columns: append([]registry.Column{
		registry.ColumnOf("Desired", "integer", appsv1.DaemonSetStatus{}.SwaggerDoc()["desiredNumberScheduled"], 0, func(d *appsv1.DaemonSet) any { return int64(d.Status.DesiredNumberScheduled) }),
		registry.ColumnOf("Current", "integer", appsv1.DaemonSetStatus{}.SwaggerDoc()["currentNumberScheduled"], 0, func(d *appsv1.DaemonSet) any { return int64(d.Status.CurrentNumberScheduled) }),
		registry.ColumnOf("Ready", "integer", appsv1.DaemonSetStatus{}.SwaggerDoc()["numberReady"], 0, func(d *appsv1.DaemonSet) any { return int64(d.Status.NumberReady) }),
		registry.ColumnOf("Up-to-date", "integer", "The total number of nodes that are running updated daemon pod", 0, func(d *appsv1.DaemonSet) any { return int64(d.Status.UpdatedNumberScheduled) }),
		registry.ColumnOf("Available", "integer", appsv1.DaemonSetStatus{}.SwaggerDoc()["numberAvailable"], 0, func(d *appsv1.DaemonSet) any { return int64(d.Status.NumberAvailable) }),
		registry.ColumnOf("Node Selector", "string", corev1.PodSpec{}.SwaggerDoc()["nodeSelector"], 0, func(d *appsv1.DaemonSet) any {
			sel := labels.SelectorFromSet(d.Spec.Template.Spec.NodeSelector).String()
			if sel == "" {
				return "<none>"
			}
			return sel
		}),
		registry.AgeColumn(),
	}, append(registry.TemplateColumns(1, func(d *appsv1.DaemonSet) *corev1.PodTemplateSpec { return &d.Spec.Template }),
		registry.SelectorColumn(appsv1.DaemonSetSpec{}.SwaggerDoc()["selector"], func(d *appsv1.DaemonSet) *metav1.LabelSelector { return d.Spec.Selector }))...),
}
