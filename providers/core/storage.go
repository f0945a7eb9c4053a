package core

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	volumehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/internal/volumes"
	"github.com/kubeembed/apiserver/providers/internal/validation"
	"github.com/kubeembed/apiserver/providers/registry"
)

func defaultPVC(c *corev1.PersistentVolumeClaim) {
	if c.Spec.VolumeMode == nil {
		c.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
	}
}

var accessModes = []string{string(corev1.ReadWriteOnce), string(corev1.ReadOnlyMany), string(corev1.ReadWriteMany), string(corev1.ReadWriteOncePod)}

func validatePVCSpec(s *corev1.PersistentVolumeClaimSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(s.AccessModes) == 0 {
		errs = append(errs, field.Required(p.Child("accessModes"), "at least 1 access mode is required"))
	}
	for _, m := range s.AccessModes {
		if !slices.Contains(accessModes, string(m)) {
			errs = append(errs, field.NotSupported(p.Child("accessModes"), m, accessModes))
		}
	}
	if _, ok := s.Resources.Requests[corev1.ResourceStorage]; !ok && s.DataSource == nil && s.DataSourceRef == nil {
		errs = append(errs, field.Required(p.Child("resources").Key(string(corev1.ResourceStorage)), ""))
	} else if q, ok := s.Resources.Requests[corev1.ResourceStorage]; ok && q.Sign() <= 0 {
		errs = append(errs, field.Invalid(p.Child("resources").Key(string(corev1.ResourceStorage)), q.String(), "must be greater than zero"))
	}
	if m := s.VolumeMode; m != nil && *m != corev1.PersistentVolumeFilesystem && *m != corev1.PersistentVolumeBlock {
		errs = append(errs, field.NotSupported(p.Child("volumeMode"), *m, []string{string(corev1.PersistentVolumeBlock), string(corev1.PersistentVolumeFilesystem)}))
	}
	return errs
}

// persistentVolumeClaims are served: a claim's spec is immutable
// after creation but for its storage request (expansion), volume binding and
// attributes class, as kube-apiserver allows.
var persistentVolumeClaims = registry.Kind[*corev1.PersistentVolumeClaim]{
	Default: defaultPVC,
	Status:  true, NoAge: true, Namespaced: true,
	GroupVersion: corev1.SchemeGroupVersion,
	Resource:     "persistentvolumeclaims", Singular: "persistentvolumeclaim", ShortNames: []string{"pvc"},
	ReturnDeleted: true,
	NewObj:        func() runtime.Object { return &corev1.PersistentVolumeClaim{} },
	NewList:       func() runtime.Object { return &corev1.PersistentVolumeClaimList{} },
	PrepareCreate: func(_ context.Context, c *corev1.PersistentVolumeClaim) {
		c.Status.Phase = corev1.ClaimPending
		addFinalizer(&c.ObjectMeta, "kubernetes.io/pvc-protection")
	},
	Validate: func(c *corev1.PersistentVolumeClaim) field.ErrorList {
		return validatePVCSpec(&c.Spec, field.NewPath("spec"))
	},
	ValidateUpdate: validatePVCUpdate,

	Columns: []registry.Column{
		registry.ColumnOf("Status", "string", corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()["phase"], 0, func(c *corev1.PersistentVolumeClaim) any {
			return phaseOrTerminating(&c.ObjectMeta, string(c.Status.Phase))
		}),
		registry.ColumnOf("Volume", "string", corev1.PersistentVolumeClaimSpec{}.SwaggerDoc()["volumeName"], 0, func(c *corev1.PersistentVolumeClaim) any { return c.Spec.VolumeName }),
		// A claim's capacity and access modes are its volume's: none
		// before it names one ("0" if the volume's capacity is unknown).
		registry.ColumnOf("Capacity", "string", corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()["capacity"], 0, func(c *corev1.PersistentVolumeClaim) any {
			if c.Spec.VolumeName == "" {
				return ""
			}
			q := c.Status.Capacity[corev1.ResourceStorage]
			return q.String()
		}),
		registry.ColumnOf("Access Modes", "string", corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()["accessModes"], 0, func(c *corev1.PersistentVolumeClaim) any {
			if c.Spec.VolumeName == "" {
				return ""
			}
			return volumes.AccessModesString(c.Status.AccessModes)
		}),
		registry.ColumnOf("StorageClass", "string", "StorageClass of the pvc", 0, func(c *corev1.PersistentVolumeClaim) any {
			return volumehelpers.GetPersistentVolumeClaimClass(c)
		}),
		registry.ColumnOf("VolumeAttributesClass", "string", "VolumeAttributesClass of the pvc", 0, func(c *corev1.PersistentVolumeClaim) any {
			if c.Spec.VolumeAttributesClassName == nil {
				return "<unset>"
			}
			return *c.Spec.VolumeAttributesClassName
		}),
		registry.AgeColumn(),
		registry.ColumnOf("VolumeMode", "string", corev1.PersistentVolumeClaimSpec{}.SwaggerDoc()["volumeMode"], 1, func(c *corev1.PersistentVolumeClaim) any {
			if c.Spec.VolumeMode == nil {
				return "<unset>"
			}
			return string(*c.Spec.VolumeMode)
		}),
	},
}

// classFromNil: a claim without a class gets one (the default class,
// given by the PV controller), which kube-apiserver allows unless a beta
// class annotation names another.
// validatePVCUpdate allows what kube-apiserver allows of a claim's spec:
// the volume name once, a storage class where there was none, and for a
// bound claim its storage request (growth is admission's to judge:
// PersistentVolumeClaimResize; it may not come down to its capacity) and
// volume attributes class; the error shows the diff, as kube-apiserver's.
func validatePVCUpdate(c, old *corev1.PersistentVolumeClaim) field.ErrorList {
	a, b := c.Spec.DeepCopy(), old.Spec.DeepCopy()
	if b.VolumeName == "" {
		b.VolumeName = a.VolumeName
	}
	if classFromNil(c, old) {
		a.StorageClassName = b.StorageClassName // the default class given afterwards (retroactively)
	}
	if c.Status.Phase == corev1.ClaimBound {
		if a.Resources.Requests != nil {
			a.Resources.Requests[corev1.ResourceStorage] = old.Spec.Resources.Requests[corev1.ResourceStorage]
		}
		a.VolumeAttributesClassName = b.VolumeAttributesClassName
	}
	var errs field.ErrorList
	if !apiequality.Semantic.DeepEqual(a, b) {
		errs = append(errs, field.Forbidden(field.NewPath("spec"), "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n"+
			validation.Diff(*b, *a)))
	}
	// A request may come down (RecoverVolumeExpansionFailure, GA), but
	// not to the capacity the claim has: volumes do not shrink.
	size, oldSize := c.Spec.Resources.Requests[corev1.ResourceStorage], old.Spec.Resources.Requests[corev1.ResourceStorage]
	if capacity := old.Status.Capacity[corev1.ResourceStorage]; size.Cmp(oldSize) < 0 && size.Cmp(capacity) <= 0 {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "resources", "requests", "storage"), "field can not be less than status.capacity"))
	}
	return errs
}

func classFromNil(c, old *corev1.PersistentVolumeClaim) bool {
	annotation, annotated := old.Annotations[corev1.BetaStorageClassAnnotation]
	return c.Spec.StorageClassName != nil && old.Spec.StorageClassName == nil && (!annotated || *c.Spec.StorageClassName == annotation)
}

// phaseOrTerminating is a volume's or claim's phase, or Terminating once
// it is being deleted.
func phaseOrTerminating(m *metav1.ObjectMeta, phase string) string {
	if m.DeletionTimestamp != nil {
		return "Terminating"
	}
	return phase
}

// persistentVolumes are served (cluster-scoped) with /status. A new
// volume is Pending since its creation; the phase's transition time moves
// when /status changes the phase, as kube-apiserver records it.
var persistentVolumes = registry.Kind[*corev1.PersistentVolume]{
	Default: defaultPV,
	Status:  true, NoAge: true,
	GroupVersion: corev1.SchemeGroupVersion, Resource: "persistentvolumes", Singular: "persistentvolume", ShortNames: []string{"pv"},
	ReturnDeleted: true,
	NewObj:        func() runtime.Object { return &corev1.PersistentVolume{} },
	NewList:       func() runtime.Object { return &corev1.PersistentVolumeList{} },
	PrepareCreate: func(_ context.Context, p *corev1.PersistentVolume) {
		p.Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumePending, LastPhaseTransitionTime: ptr.To(metav1.Now())}
		addFinalizer(&p.ObjectMeta, "kubernetes.io/pv-protection")
	},
	PrepareStatusUpdate: func(p, old *corev1.PersistentVolume) {
		if p.Status.Phase != old.Status.Phase {
			p.Status.LastPhaseTransitionTime = ptr.To(metav1.Now())
		}
	},
	Validate: func(p *corev1.PersistentVolume) field.ErrorList {
		var errs field.ErrorList
		sp := field.NewPath("spec")
		if len(p.Spec.AccessModes) == 0 {
			errs = append(errs, field.Required(sp.Child("accessModes"), ""))
		}
		if _, ok := p.Spec.Capacity[corev1.ResourceStorage]; !ok {
			errs = append(errs, field.Required(sp.Child("capacity"), ""))
		}
		return errs
	},
	Columns: []registry.Column{
		registry.ColumnOf("Capacity", "string", pvSpecDoc["capacity"], 0, func(p *corev1.PersistentVolume) any {
			q := p.Spec.Capacity[corev1.ResourceStorage]
			return q.String()
		}),
		registry.ColumnOf("Access Modes", "string", pvSpecDoc["accessModes"], 0, func(p *corev1.PersistentVolume) any { return volumes.AccessModesString(p.Spec.AccessModes) }),
		registry.ColumnOf("Reclaim Policy", "string", pvSpecDoc["persistentVolumeReclaimPolicy"], 0, func(p *corev1.PersistentVolume) any {
			return string(p.Spec.PersistentVolumeReclaimPolicy)
		}),
		registry.ColumnOf("Status", "string", corev1.PersistentVolumeStatus{}.SwaggerDoc()["phase"], 0, func(p *corev1.PersistentVolume) any {
			return phaseOrTerminating(&p.ObjectMeta, string(p.Status.Phase))
		}),
		registry.ColumnOf("Claim", "string", pvSpecDoc["claimRef"], 0, func(p *corev1.PersistentVolume) any {
			if c := p.Spec.ClaimRef; c != nil {
				return c.Namespace + "/" + c.Name
			}
			return ""
		}),
		registry.ColumnOf("StorageClass", "string", "StorageClass of the pv", 0, func(p *corev1.PersistentVolume) any {
			return volumehelpers.GetPersistentVolumeClass(p)
		}),
		registry.ColumnOf("VolumeAttributesClass", "string", "VolumeAttributesClass of the pv", 0, func(p *corev1.PersistentVolume) any {
			if p.Spec.VolumeAttributesClassName == nil {
				return "<unset>"
			}
			return *p.Spec.VolumeAttributesClassName
		}),
		registry.ColumnOf("Reason", "string", corev1.PersistentVolumeStatus{}.SwaggerDoc()["reason"], 0, func(p *corev1.PersistentVolume) any { return p.Status.Reason }),
		registry.AgeColumn(),
		registry.ColumnOf("VolumeMode", "string", pvSpecDoc["volumeMode"], 1, func(p *corev1.PersistentVolume) any {
			if p.Spec.VolumeMode == nil {
				return "<unset>"
			}
			return string(*p.Spec.VolumeMode)
		}),
	},
}

// addFinalizer adds f once. The StorageObjectInUseProtection admission
// plugin of kube-apiserver protects volumes and claims this way.
func addFinalizer(m *metav1.ObjectMeta, f string) {
	if !slices.Contains(m.Finalizers, f) {
		m.Finalizers = append(m.Finalizers, f)
	}
}

var pvSpecDoc = corev1.PersistentVolumeSpec{}.SwaggerDoc()

func defaultPV(p *corev1.PersistentVolume) {
	if p.Spec.PersistentVolumeReclaimPolicy == "" {
		p.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	}
	if p.Spec.VolumeMode == nil {
		p.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
	}
	if p.Status.Phase == "" {
		p.Status.Phase = corev1.VolumePending
	}
	if h := p.Spec.HostPath; h != nil && h.Type == nil {
		h.Type = ptr.To(corev1.HostPathUnset)
	}
}
