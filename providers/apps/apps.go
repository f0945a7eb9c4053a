// Package apps serves apps/v1: deployments, replicasets and statefulsets
// (with status and scale), daemonsets (with status) and controllerrevisions.
package apps

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/internal/podspec"
	"github.com/kubeembed/apiserver/providers/internal/validation"
	"github.com/kubeembed/apiserver/providers/registry"
)

// Provider serves apps/v1.
func Provider() providers.Provider { return group }

var group = registry.Group{
	GroupVersion: appsv1.SchemeGroupVersion, AddToScheme: appsv1.AddToScheme,
	// The scale subresource speaks autoscaling/v1 Scale; only Scale, so that
	// the autoscaling provider owns the group's other kinds.
	Register: func(scheme *runtime.Scheme) error {
		registry.AddScale(scheme)
		return nil
	},
	Served: []registry.Served{deployments, replicaSets, statefulSets, daemonSets, controllerRevisions},
}

func defaultDeployment(d *appsv1.Deployment) {
	if d.Spec.Replicas == nil {
		d.Spec.Replicas = ptr.To[int32](1)
	}
	s := &d.Spec.Strategy
	if s.Type == "" {
		s.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if s.Type == appsv1.RollingUpdateDeploymentStrategyType {
		if s.RollingUpdate == nil {
			s.RollingUpdate = &appsv1.RollingUpdateDeployment{}
		}
		quarter := intstr.FromString("25%")
		if s.RollingUpdate.MaxUnavailable == nil {
			s.RollingUpdate.MaxUnavailable = ptr.To(quarter)
		}
		if s.RollingUpdate.MaxSurge == nil {
			s.RollingUpdate.MaxSurge = ptr.To(quarter)
		}
	}
	if d.Spec.RevisionHistoryLimit == nil {
		d.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	}
	if d.Spec.ProgressDeadlineSeconds == nil {
		d.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
	}
	podspec.DefaultTemplate(&d.Spec.Template)
}

var deployments = registry.Kind[*appsv1.Deployment]{
	Default: defaultDeployment,
	Status:  true, NoAge: true, Namespaced: true,
	GroupVersion: appsv1.SchemeGroupVersion, Categories: []string{"all"},
	Resource: "deployments", Singular: "deployment", ShortNames: []string{"deploy"},
	NewObj:  func() runtime.Object { return &appsv1.Deployment{} },
	NewList: func() runtime.Object { return &appsv1.DeploymentList{} },
	// A change of annotations is a new generation too (kube-apiserver's
	// deployment strategy; rollbacks were requested by annotation).
	GenerationOf: func(d *appsv1.Deployment) any { return []any{d.Spec, d.Annotations} },
	Validate: func(d *appsv1.Deployment) field.ErrorList {
		return validateDeploymentSpec(&d.Spec, field.NewPath("spec"))
	},
	ValidateUpdate: func(d, old *appsv1.Deployment) field.ErrorList {
		return apivalidation.ValidateImmutableField(d.Spec.Selector, old.Spec.Selector, field.NewPath("spec", "selector"))
	},
	ValidateStatus: func(d, _ *appsv1.Deployment) field.ErrorList {
		s := d.Status
		return validation.NonNegative(field.NewPath("status"), validation.N("replicas", s.Replicas), validation.N("updatedReplicas", s.UpdatedReplicas), validation.N("readyReplicas", s.ReadyReplicas), validation.N("availableReplicas", s.AvailableReplicas), validation.N("unavailableReplicas", s.UnavailableReplicas))
	},
	Columns: append([]registry.Column{
		registry.ColumnOf("Ready", "string", "Number of the pod with ready state", 0, func(d *appsv1.Deployment) any {
			return fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, ptr.Deref(d.Spec.Replicas, 0))
		}),
		registry.ColumnOf("Up-to-date", "string", appsv1.DeploymentStatus{}.SwaggerDoc()["updatedReplicas"], 0,
			func(d *appsv1.Deployment) any { return int64(d.Status.UpdatedReplicas) }),
		registry.ColumnOf("Available", "string", appsv1.DeploymentStatus{}.SwaggerDoc()["availableReplicas"], 0,
			func(d *appsv1.Deployment) any { return int64(d.Status.AvailableReplicas) }),
		registry.AgeColumn(),
	}, append(registry.TemplateColumns(1, func(d *appsv1.Deployment) *corev1.PodTemplateSpec { return &d.Spec.Template }),
		registry.SelectorColumn(appsv1.DeploymentSpec{}.SwaggerDoc()["selector"], func(d *appsv1.Deployment) *metav1.LabelSelector { return d.Spec.Selector }))...),
	Scale: &registry.ScaleAccess{
		Replicas:       func(o runtime.Object) int32 { return ptr.Deref(o.(*appsv1.Deployment).Spec.Replicas, 0) },
		SetReplicas:    func(o runtime.Object, n int32) { o.(*appsv1.Deployment).Spec.Replicas = &n },
		StatusReplicas: func(o runtime.Object) int32 { return o.(*appsv1.Deployment).Status.Replicas },
		Selector:       func(o runtime.Object) *metav1.LabelSelector { return o.(*appsv1.Deployment).Spec.Selector },
	},
}

func validateDeploymentSpec(s *appsv1.DeploymentSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Replicas != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*s.Replicas), p.Child("replicas"))...)
	}
	errs = append(errs, validateSelectorAndTemplate(s.Selector, &s.Template, "deployment", p)...)
	errs = append(errs, validateStrategy(&s.Strategy, p.Child("strategy"))...)
	if s.RevisionHistoryLimit != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*s.RevisionHistoryLimit), p.Child("revisionHistoryLimit"))...)
	}
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(s.MinReadySeconds), p.Child("minReadySeconds"))...)
	if d := s.ProgressDeadlineSeconds; d != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*d), p.Child("progressDeadlineSeconds"))...)
		if *d <= s.MinReadySeconds {
			errs = append(errs, field.Invalid(p.Child("progressDeadlineSeconds"), *d, "must be greater than minReadySeconds"))
		}
	}
	return errs
}

func validateStrategy(s *appsv1.DeploymentStrategy, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch s.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if s.RollingUpdate != nil {
			errs = append(errs, field.Forbidden(p.Child("rollingUpdate"), "may not be specified when strategy `type` is 'Recreate'"))
		}
	case appsv1.RollingUpdateDeploymentStrategyType:
		if s.RollingUpdate == nil {
			errs = append(errs, field.Required(p.Child("rollingUpdate"), "this should be defaulted and never be nil"))
			break
		}
		ru := s.RollingUpdate
		errs = append(errs, validateIntOrPercent(ru.MaxUnavailable, p.Child("rollingUpdate", "maxUnavailable"))...)
		errs = append(errs, validateIntOrPercent(ru.MaxSurge, p.Child("rollingUpdate", "maxSurge"))...)
		if isZero(ru.MaxUnavailable) && isZero(ru.MaxSurge) {
			errs = append(errs, field.Invalid(p.Child("rollingUpdate", "maxUnavailable"), ru.MaxUnavailable.String(), "may not be 0 when `maxSurge` is 0"))
		}
		if ru.MaxUnavailable != nil && ru.MaxUnavailable.Type == intstr.String && percent(ru.MaxUnavailable) > 100 {
			errs = append(errs, field.Invalid(p.Child("rollingUpdate", "maxUnavailable"), ru.MaxUnavailable.String(), "must not be greater than 100%"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), s.Type, []string{string(appsv1.RecreateDeploymentStrategyType), string(appsv1.RollingUpdateDeploymentStrategyType)}))
	}
	return errs
}

func validateIntOrPercent(v *intstr.IntOrString, p *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	if v.Type == intstr.Int {
		return apivalidation.ValidateNonnegativeField(int64(v.IntVal), p)
	}
	if percent(v) < 0 {
		return field.ErrorList{field.Invalid(p, v.StrVal, "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")}
	}
	return nil
}

// percent parses "N%"; -1 if it is not one.
func percent(v *intstr.IntOrString) int {
	s := v.StrVal
	if !strings.HasSuffix(s, "%") || len(s) < 2 {
		return -1
	}
	n := 0
	for _, c := range s[:len(s)-1] {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

func isZero(v *intstr.IntOrString) bool {
	if v == nil {
		return true
	}
	if v.Type == intstr.Int {
		return v.IntVal == 0
	}
	return percent(v) == 0
}
