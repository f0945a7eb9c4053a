package apps

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/providers/internal/podspec"
	"github.com/kubeembed/apiserver/providers/internal/validation"
	"github.com/kubeembed/apiserver/providers/registry"
)

func defaultStatefulSet(s *appsv1.StatefulSet) {
	// The claim templates are full PVCs and say so, as kube-apiserver
	// writes them.
	for i := range s.Spec.VolumeClaimTemplates {
		t := &s.Spec.VolumeClaimTemplates[i]
		if t.APIVersion == "" && t.Kind == "" {
			t.APIVersion, t.Kind = "v1", "PersistentVolumeClaim"
		}
	}
	if s.Spec.PodManagementPolicy == "" {
		s.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	if s.Spec.UpdateStrategy.Type == "" {
		s.Spec.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
	}
	if s.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType {
		if s.Spec.UpdateStrategy.RollingUpdate == nil {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
		if s.Spec.UpdateStrategy.RollingUpdate.Partition == nil {
			s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](0)
		}
		if s.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable == nil {
			s.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(1))
		}
	}
	if s.Spec.PersistentVolumeClaimRetentionPolicy == nil {
		s.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
	}
	if p := s.Spec.PersistentVolumeClaimRetentionPolicy; true {
		if p.WhenDeleted == "" {
			p.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
		}
		if p.WhenScaled == "" {
			p.WhenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
		}
	}
	if s.Spec.Replicas == nil {
		s.Spec.Replicas = ptr.To[int32](1)
	}
	if s.Spec.RevisionHistoryLimit == nil {
		s.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	}
	// Claim templates are PersistentVolumeClaims and get their defaults.
	for i := range s.Spec.VolumeClaimTemplates {
		pvc := &s.Spec.VolumeClaimTemplates[i]
		if pvc.Spec.VolumeMode == nil {
			pvc.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
		}
		if pvc.Status.Phase == "" {
			pvc.Status.Phase = corev1.ClaimPending
		}
	}
	podspec.DefaultTemplate(&s.Spec.Template)
}

var statefulSets = registry.Kind[*appsv1.StatefulSet]{
	Default: defaultStatefulSet,
	Status:  true, NoAge: true, Namespaced: true,
	// A StatefulSet's name is in its pods' hostnames: a DNS label.
	NameValidation: apivalidation.NameIsDNSLabel,
	GroupVersion:   appsv1.SchemeGroupVersion, Categories: []string{"all"},
	Resource: "statefulsets", Singular: "statefulset", ShortNames: []string{"sts"},
	NewObj:       func() runtime.Object { return &appsv1.StatefulSet{} },
	NewList:      func() runtime.Object { return &appsv1.StatefulSetList{} },
	GenerationOf: func(s *appsv1.StatefulSet) any { return s.Spec },
	Validate: func(s *appsv1.StatefulSet) field.ErrorList {
		p := field.NewPath("spec")
		errs := validation.NonNegative(p, validation.N("replicas", ptr.Deref(s.Spec.Replicas, 0)), validation.N("minReadySeconds", s.Spec.MinReadySeconds))
		switch s.Spec.PodManagementPolicy {
		case appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement:
		default:
			errs = append(errs, field.Invalid(p.Child("podManagementPolicy"), s.Spec.PodManagementPolicy,
				fmt.Sprintf("must be '%s' or '%s'", appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement)))
		}
		switch s.Spec.UpdateStrategy.Type {
		case appsv1.RollingUpdateStatefulSetStrategyType:
		case appsv1.OnDeleteStatefulSetStrategyType:
			if s.Spec.UpdateStrategy.RollingUpdate != nil {
				errs = append(errs, field.Invalid(p.Child("updateStrategy", "rollingUpdate"), s.Spec.UpdateStrategy.RollingUpdate,
					fmt.Sprintf("only allowed for updateStrategy '%s'", appsv1.RollingUpdateStatefulSetStrategyType)))
			}
		default:
			errs = append(errs, field.Invalid(p.Child("updateStrategy"), s.Spec.UpdateStrategy,
				fmt.Sprintf("must be '%s' or '%s'", appsv1.RollingUpdateStatefulSetStrategyType, appsv1.OnDeleteStatefulSetStrategyType)))
		}
		return append(errs, validateSelectorAndTemplate(s.Spec.Selector, templateToValidate(s), "statefulset", p)...)
	},
	ValidateUpdate: func(s, old *appsv1.StatefulSet) field.ErrorList {
		// kube-apiserver 1.37 names each immutable field.
		p := field.NewPath("spec")
		errs := apivalidation.ValidateImmutableField(s.Spec.Selector, old.Spec.Selector, p.Child("selector"))
		errs = append(errs, apivalidation.ValidateImmutableField(s.Spec.VolumeClaimTemplates, old.Spec.VolumeClaimTemplates, p.Child("volumeClaimTemplates"))...)
		errs = append(errs, apivalidation.ValidateImmutableField(s.Spec.ServiceName, old.Spec.ServiceName, p.Child("serviceName"))...)
		return append(errs, apivalidation.ValidateImmutableField(s.Spec.PodManagementPolicy, old.Spec.PodManagementPolicy, p.Child("podManagementPolicy"))...)
	},
	ValidateStatus: func(s, _ *appsv1.StatefulSet) field.ErrorList {
		st := s.Status
		return validation.NonNegative(field.NewPath("status"), validation.N("replicas", st.Replicas), validation.N("readyReplicas", st.ReadyReplicas), validation.N("currentReplicas", st.CurrentReplicas), validation.N("updatedReplicas", st.UpdatedReplicas), validation.N("availableReplicas", st.AvailableReplicas))
	},
	Columns: append([]registry.Column{
		registry.ColumnOf("Ready", "string", "Number of the pod with ready state", 0, func(s *appsv1.StatefulSet) any {
			return fmt.Sprintf("%d/%d", s.Status.ReadyReplicas, ptr.Deref(s.Spec.Replicas, 0))
		}),
		registry.AgeColumn(),
	}, registry.TemplateColumns(1, func(s *appsv1.StatefulSet) *corev1.PodTemplateSpec { return &s.Spec.Template })...),
	Scale: &registry.ScaleAccess{
		Replicas:       func(o runtime.Object) int32 { return ptr.Deref(o.(*appsv1.StatefulSet).Spec.Replicas, 0) },
		SetReplicas:    func(o runtime.Object, n int32) { o.(*appsv1.StatefulSet).Spec.Replicas = &n },
		StatusReplicas: func(o runtime.Object) int32 { return o.(*appsv1.StatefulSet).Status.Replicas },
		Selector:       func(o runtime.Object) *metav1.LabelSelector { return o.(*appsv1.StatefulSet).Spec.Selector },
	},
}

// templateToValidate is s's pod template as kube-apiserver validates it:
// with a persistentVolumeClaim volume for each claim template (which its
// containers may mount; a template volume of the same name gives way),
// and without the hostname and subdomain the controller overwrites.
func templateToValidate(s *appsv1.StatefulSet) *corev1.PodTemplateSpec {
	t := s.Spec.Template.DeepCopy()
	t.Spec.Hostname, t.Spec.Subdomain = "", ""
	if len(s.Spec.VolumeClaimTemplates) == 0 {
		return t
	}
	claims := map[string]bool{}
	var volumes []corev1.Volume
	for _, c := range s.Spec.VolumeClaimTemplates {
		claims[c.Name] = true
		volumes = append(volumes, corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.Name}}})
	}
	for _, v := range t.Spec.Volumes {
		if !claims[v.Name] {
			volumes = append(volumes, v)
		}
	}
	t.Spec.Volumes = volumes
	return t
}
