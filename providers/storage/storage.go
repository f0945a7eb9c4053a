// Package storage serves storage.k8s.io/v1: storage classes, CSI drivers,
// CSI nodes, volume attachments (with status), CSI storage capacities and
// volume attributes classes.
package storage

import (
	"context"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/internal/volumes"
	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"
)

var gv = storagev1.SchemeGroupVersion

// Provider serves storage.k8s.io.
func Provider() providers.Provider { return group }

var group = registry.Group{
	GroupVersion: gv, AddToScheme: storagev1.AddToScheme,
	Served: []registry.Served{storageClasses, csiDrivers, csiNodes, volumeAttachments, capacities, attributesClasses},
}

func defaultCSIDriver(s *storagev1.CSIDriverSpec) {
	t, f := true, false
	for _, b := range []struct {
		p   **bool
		def bool
	}{{&s.AttachRequired, t}, {&s.PodInfoOnMount, f}, {&s.StorageCapacity, f}, {&s.RequiresRepublish, f}, {&s.SELinuxMount, f}, {&s.PreventPodSchedulingIfMissing, f}} {
		if *b.p == nil {
			*b.p = ptr.To(b.def)
		}
	}
	if len(s.VolumeLifecycleModes) == 0 {
		s.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}
	}
	if s.FSGroupPolicy == nil {
		s.FSGroupPolicy = ptr.To(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy)
	}
}

func qualifiedName(p *field.Path, v string) field.ErrorList {
	var errs field.ErrorList
	if v == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	for _, msg := range validation.IsQualifiedName(strings.ToLower(v)) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

func dnsSubdomain(p *field.Path, v string) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

var storageClasses = registry.Kind[*storagev1.StorageClass]{
	Default: func(sc *storagev1.StorageClass) {
		if sc.ReclaimPolicy == nil {
			sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimDelete)
		}
		if sc.VolumeBindingMode == nil {
			sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingImmediate)
		}
	},
	ReturnDeleted: true,
	GroupVersion:  gv, Resource: "storageclasses", Singular: "storageclass", ShortNames: []string{"sc"},
	NewObj:  func() runtime.Object { return &storagev1.StorageClass{} },
	NewList: func() runtime.Object { return &storagev1.StorageClassList{} },
	Validate: func(sc *storagev1.StorageClass) field.ErrorList {
		errs := qualifiedName(field.NewPath("provisioner"), sc.Provisioner)
		if p := sc.ReclaimPolicy; p != nil && *p != corev1.PersistentVolumeReclaimDelete && *p != corev1.PersistentVolumeReclaimRetain {
			errs = append(errs, field.NotSupported(field.NewPath("reclaimPolicy"), *p, []string{"Delete", "Retain"}))
		}
		if m := sc.VolumeBindingMode; m != nil && *m != storagev1.VolumeBindingImmediate && *m != storagev1.VolumeBindingWaitForFirstConsumer {
			errs = append(errs, field.NotSupported(field.NewPath("volumeBindingMode"), *m, []string{string(storagev1.VolumeBindingImmediate), string(storagev1.VolumeBindingWaitForFirstConsumer)}))
		}
		return errs
	},
	ValidateUpdate: func(sc, old *storagev1.StorageClass) field.ErrorList {
		var errs field.ErrorList
		if !apiequality.Semantic.DeepEqual(sc.Parameters, old.Parameters) {
			errs = append(errs, field.Invalid(field.NewPath("parameters"), nil, "field is immutable"))
		}
		if sc.Provisioner != old.Provisioner {
			errs = append(errs, field.Forbidden(field.NewPath("provisioner"), "updates to provisioner are forbidden."))
		}
		if !apiequality.Semantic.DeepEqual(sc.ReclaimPolicy, old.ReclaimPolicy) {
			errs = append(errs, field.Forbidden(field.NewPath("reclaimPolicy"), "updates to reclaimPolicy are forbidden."))
		}
		return append(errs, apivalidation.ValidateImmutableField(sc.VolumeBindingMode, old.VolumeBindingMode, field.NewPath("volumeBindingMode"))...)
	},
	ListName: listedStorageClassName,
	Columns: []registry.Column{
		registry.ColumnOf("Provisioner", "string", "provisioner indicates the type of the provisioner.", 0, func(sc *storagev1.StorageClass) any { return sc.Provisioner }),
		registry.ColumnOf("ReclaimPolicy", "string", "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class. Defaults to Delete.", 0, func(sc *storagev1.StorageClass) any {
			if sc.ReclaimPolicy == nil {
				return "Delete"
			}
			return string(*sc.ReclaimPolicy)
		}),
		registry.ColumnOf("VolumeBindingMode", "string", storagev1.StorageClass{}.SwaggerDoc()["volumeBindingMode"], 0, func(sc *storagev1.StorageClass) any {
			if sc.VolumeBindingMode == nil {
				return string(storagev1.VolumeBindingImmediate)
			}
			return string(*sc.VolumeBindingMode)
		}),
		registry.ColumnOf("AllowVolumeExpansion", "string", "allowVolumeExpansion shows whether the storage class allow volume expand.", 0, func(sc *storagev1.StorageClass) any { return ptr.Deref(sc.AllowVolumeExpansion, false) }),
	},
}

// listedStorageClassName names the effective default class of a list
// "<name> (default)", as kube-apiserver prints a list (one class alone is
// printed by its name).
func listedStorageClassName(items []*storagev1.StorageClass) func(*storagev1.StorageClass) string {
	def := volumes.DefaultClass(items)
	return func(sc *storagev1.StorageClass) string {
		if def != nil && sc.Name == def.Name {
			return sc.Name + " (default)"
		}
		return sc.Name
	}
}

var csiDrivers = registry.Kind[*storagev1.CSIDriver]{
	Default:       func(o *storagev1.CSIDriver) { defaultCSIDriver(&o.Spec) },
	ReturnDeleted: true,
	GroupVersion:  gv, Resource: "csidrivers", Singular: "csidriver",
	NewObj:  func() runtime.Object { return &storagev1.CSIDriver{} },
	NewList: func() runtime.Object { return &storagev1.CSIDriverList{} },
	ValidateUpdate: func(d, old *storagev1.CSIDriver) field.ErrorList {
		p := field.NewPath("spec")
		errs := apivalidation.ValidateImmutableField(d.Spec.AttachRequired, old.Spec.AttachRequired, p.Child("attachRequired"))
		errs = append(errs, apivalidation.ValidateImmutableField(d.Spec.FSGroupPolicy, old.Spec.FSGroupPolicy, p.Child("fsGroupPolicy"))...)
		errs = append(errs, apivalidation.ValidateImmutableField(d.Spec.PodInfoOnMount, old.Spec.PodInfoOnMount, p.Child("podInfoOnMount"))...)
		return append(errs, apivalidation.ValidateImmutableField(d.Spec.VolumeLifecycleModes, old.Spec.VolumeLifecycleModes, p.Child("volumeLifecycleModes"))...)
	},
	Columns: []registry.Column{
		registry.ColumnOf("AttachRequired", "boolean", storagev1.CSIDriverSpec{}.SwaggerDoc()["attachRequired"], 0, func(d *storagev1.CSIDriver) any { return ptr.Deref(d.Spec.AttachRequired, false) }),
		registry.ColumnOf("PodInfoOnMount", "boolean", storagev1.CSIDriverSpec{}.SwaggerDoc()["podInfoOnMount"], 0, func(d *storagev1.CSIDriver) any { return ptr.Deref(d.Spec.PodInfoOnMount, false) }),
		registry.ColumnOf("StorageCapacity", "boolean", storagev1.CSIDriverSpec{}.SwaggerDoc()["storageCapacity"], 0, func(d *storagev1.CSIDriver) any { return ptr.Deref(d.Spec.StorageCapacity, false) }),
		registry.ColumnOf("TokenRequests", "string", storagev1.CSIDriverSpec{}.SwaggerDoc()["tokenRequests"], 0, func(d *storagev1.CSIDriver) any {
			if len(d.Spec.TokenRequests) == 0 {
				return "<unset>"
			}
			var aud []string
			for _, t := range d.Spec.TokenRequests {
				aud = append(aud, t.Audience)
			}
			return strings.Join(aud, ",")
		}),
		registry.ColumnOf("RequiresRepublish", "boolean", storagev1.CSIDriverSpec{}.SwaggerDoc()["requiresRepublish"], 0, func(d *storagev1.CSIDriver) any { return ptr.Deref(d.Spec.RequiresRepublish, false) }),
		registry.ColumnOf("Modes", "string", storagev1.CSIDriverSpec{}.SwaggerDoc()["volumeLifecycleModes"], 0, func(d *storagev1.CSIDriver) any {
			var m []string
			for _, v := range d.Spec.VolumeLifecycleModes {
				m = append(m, string(v))
			}
			if len(m) == 0 {
				return "<none>"
			}
			return strings.Join(m, ",")
		}),
	},
}

var csiNodes = registry.Kind[*storagev1.CSINode]{
	ReturnDeleted: true, Status: true,
	GroupVersion: gv, Resource: "csinodes", Singular: "csinode",
	NewObj:  func() runtime.Object { return &storagev1.CSINode{} },
	NewList: func() runtime.Object { return &storagev1.CSINodeList{} },
	Columns: []registry.Column{
		registry.ColumnOf("Drivers", "integer", "Drivers indicates the number of CSI drivers registered on the node", 0, func(n *storagev1.CSINode) any { return int64(len(n.Spec.Drivers)) }),
	},
}

var volumeAttachments = registry.Kind[*storagev1.VolumeAttachment]{
	ReturnDeleted: true,
	GroupVersion:  gv, Resource: "volumeattachments", Singular: "volumeattachment", Status: true,
	NewObj:  func() runtime.Object { return &storagev1.VolumeAttachment{} },
	NewList: func() runtime.Object { return &storagev1.VolumeAttachmentList{} },
	Validate: func(va *storagev1.VolumeAttachment) field.ErrorList {
		p := field.NewPath("spec")
		errs := dnsSubdomain(p.Child("attacher"), va.Spec.Attacher)
		errs = append(errs, dnsSubdomain(p.Child("nodeName"), va.Spec.NodeName)...)
		src := va.Spec.Source
		switch {
		case src.PersistentVolumeName == nil && src.InlineVolumeSpec == nil:
			errs = append(errs, field.Required(p.Child("source"), "must specify exactly one of inlineVolumeSpec and persistentVolumeName"))
		case src.PersistentVolumeName != nil && src.InlineVolumeSpec != nil:
			errs = append(errs, field.Forbidden(p.Child("source"), "must specify exactly one of inlineVolumeSpec and persistentVolumeName"))
		case src.PersistentVolumeName != nil && *src.PersistentVolumeName == "":
			errs = append(errs, field.Required(p.Child("source", "persistentVolumeName"), "must specify non empty persistentVolumeName"))
		}
		return errs
	},
	ValidateUpdate: func(va, old *storagev1.VolumeAttachment) field.ErrorList {
		if !apiequality.Semantic.DeepEqual(va.Spec, old.Spec) {
			return field.ErrorList{field.Invalid(field.NewPath("spec"), va.Spec, "field is immutable")}
		}
		return nil
	},
	Columns: []registry.Column{
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Attacher", Type: "string", Format: "name", Description: storagev1.VolumeAttachmentSpec{}.SwaggerDoc()["attacher"]},
			Value: func(o runtime.Object) any { return o.(*storagev1.VolumeAttachment).Spec.Attacher }},
		registry.ColumnOf("PV", "string", storagev1.VolumeAttachmentSource{}.SwaggerDoc()["persistentVolumeName"], 0, func(va *storagev1.VolumeAttachment) any {
			if va.Spec.Source.PersistentVolumeName == nil {
				return ""
			}
			return *va.Spec.Source.PersistentVolumeName
		}),
		registry.ColumnOf("Node", "string", storagev1.VolumeAttachmentSpec{}.SwaggerDoc()["nodeName"], 0, func(va *storagev1.VolumeAttachment) any { return va.Spec.NodeName }),
		registry.ColumnOf("Attached", "boolean", storagev1.VolumeAttachmentStatus{}.SwaggerDoc()["attached"], 0, func(va *storagev1.VolumeAttachment) any { return va.Status.Attached }),
	},
}

var capacities = registry.Kind[*storagev1.CSIStorageCapacity]{
	GroupVersion: gv, Resource: "csistoragecapacities", Singular: "csistoragecapacity", Namespaced: true,
	NewObj:  func() runtime.Object { return &storagev1.CSIStorageCapacity{} },
	NewList: func() runtime.Object { return &storagev1.CSIStorageCapacityList{} },
	Validate: func(c *storagev1.CSIStorageCapacity) field.ErrorList {
		return dnsSubdomain(field.NewPath("storageClassName"), c.StorageClassName)
	},
	Columns: []registry.Column{
		registry.ColumnOf("Created At", "date", metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"], 0, func(c *storagev1.CSIStorageCapacity) any {
			return c.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z")
		}),
	},
	NoAge: true,
}

var attributesClasses = registry.Kind[*storagev1.VolumeAttributesClass]{
	ReturnDeleted: true,
	GroupVersion:  gv, Resource: "volumeattributesclasses", Singular: "volumeattributesclass", ShortNames: []string{"vac"},
	NewObj:  func() runtime.Object { return &storagev1.VolumeAttributesClass{} },
	NewList: func() runtime.Object { return &storagev1.VolumeAttributesClassList{} },
	PrepareCreate: func(_ context.Context, c *storagev1.VolumeAttributesClass) {
		// The StorageObjectInUseProtection admission plugin's finalizer.
		if !slices.Contains(c.Finalizers, "kubernetes.io/vac-protection") {
			c.Finalizers = append(c.Finalizers, "kubernetes.io/vac-protection")
		}
	},
	Validate: func(c *storagev1.VolumeAttributesClass) field.ErrorList {
		errs := qualifiedName(field.NewPath("driverName"), c.DriverName)
		if len(c.Parameters) == 0 {
			errs = append(errs, field.Required(field.NewPath("parameters"), "must contain at least one key/value pair"))
		}
		return errs
	},
	ValidateUpdate: func(c, old *storagev1.VolumeAttributesClass) field.ErrorList {
		errs := apivalidation.ValidateImmutableField(c.DriverName, old.DriverName, field.NewPath("driverName"))
		if !apiequality.Semantic.DeepEqual(c.Parameters, old.Parameters) {
			errs = append(errs, field.Forbidden(field.NewPath("parameters"), "updates to parameters are forbidden."))
		}
		return errs
	},
	Columns: []registry.Column{
		registry.ColumnOf("DriverName", "string", "driverName is the name of the CSI driver This field is immutable.", 0, func(c *storagev1.VolumeAttributesClass) any { return c.DriverName }),
	},
}
