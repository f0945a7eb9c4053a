// Package resource serves resource.k8s.io/v1 (dynamic resource
// allocation): device classes, resource claims (with status), claim
// templates, resource slices and device taint rules. Nothing allocates
// devices here: that is the scheduler's work.
package resource

import (
	"strings"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/internal/printers"
	"github.com/kubeembed/apiserver/providers/registry"
)

var gv = resourcev1.SchemeGroupVersion

// Provider serves resource.k8s.io.
func Provider() providers.Provider { return group }

var group = registry.Group{
	GroupVersion: gv, AddToScheme: resourcev1.AddToScheme,
	Served: []registry.Served{deviceClasses, claims, claimTemplates, slices, taintRules},
}

func defaultClaimSpec(s *resourcev1.ResourceClaimSpec) {
	exact := func(r *resourcev1.ExactDeviceRequest) {
		if r.AllocationMode == "" {
			r.AllocationMode = resourcev1.DeviceAllocationModeExactCount
		}
		if r.AllocationMode == resourcev1.DeviceAllocationModeExactCount && r.Count == 0 {
			r.Count = 1
		}
	}
	for i := range s.Devices.Requests {
		r := &s.Devices.Requests[i]
		if r.Exactly != nil {
			exact(r.Exactly)
		}
		for j := range r.FirstAvailable {
			sub := &r.FirstAvailable[j]
			if sub.AllocationMode == "" {
				sub.AllocationMode = resourcev1.DeviceAllocationModeExactCount
			}
			if sub.AllocationMode == resourcev1.DeviceAllocationModeExactCount && sub.Count == 0 {
				sub.Count = 1
			}
		}
	}
}

func validateClaimSpec(s *resourcev1.ResourceClaimSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	rp := p.Child("devices", "requests")
	for i, r := range s.Devices.Requests {
		ip := rp.Index(i)
		for _, msg := range validation.IsDNS1123Label(r.Name) {
			errs = append(errs, field.Invalid(ip.Child("name"), r.Name, msg))
		}
		if names[r.Name] {
			errs = append(errs, field.Duplicate(ip.Child("name"), r.Name))
		}
		names[r.Name] = true
		switch {
		case r.Exactly == nil && len(r.FirstAvailable) == 0:
			errs = append(errs, field.Required(ip, "exactly one of `exactly` or `firstAvailable` is required"))
		case r.Exactly != nil && len(r.FirstAvailable) > 0:
			errs = append(errs, field.Invalid(ip, nil, "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"))
		case r.Exactly != nil && r.Exactly.DeviceClassName == "":
			errs = append(errs, field.Required(ip.Child("exactly", "deviceClassName"), ""))
		}
	}
	return errs
}

var deviceClasses = registry.Kind[*resourcev1.DeviceClass]{
	ReturnDeleted: true,
	GroupVersion:  gv, Resource: "deviceclasses", Singular: "deviceclass", Generation: true,
	NewObj:  func() runtime.Object { return &resourcev1.DeviceClass{} },
	NewList: func() runtime.Object { return &resourcev1.DeviceClassList{} },
	Validate: func(c *resourcev1.DeviceClass) field.ErrorList {
		var errs field.ErrorList
		for i, s := range c.Spec.Selectors {
			if s.CEL == nil {
				errs = append(errs, field.Required(field.NewPath("spec", "selectors").Index(i).Child("cel"), ""))
			} else if s.CEL.Expression == "" {
				errs = append(errs, field.Required(field.NewPath("spec", "selectors").Index(i).Child("cel", "expression"), ""))
			}
		}
		return errs
	},
}

var claims = registry.Kind[*resourcev1.ResourceClaim]{
	Default:       func(o *resourcev1.ResourceClaim) { defaultClaimSpec(&o.Spec) },
	ReturnDeleted: true,
	GroupVersion:  gv, Resource: "resourceclaims", Singular: "resourceclaim", Namespaced: true, Status: true,
	NewObj:  func() runtime.Object { return &resourcev1.ResourceClaim{} },
	NewList: func() runtime.Object { return &resourcev1.ResourceClaimList{} },
	Validate: func(c *resourcev1.ResourceClaim) field.ErrorList {
		return validateClaimSpec(&c.Spec, field.NewPath("spec"))
	},
	ValidateUpdate: func(c, old *resourcev1.ResourceClaim) field.ErrorList {
		if !apiequality.Semantic.DeepEqual(c.Spec, old.Spec) {
			return field.ErrorList{field.Invalid(field.NewPath("spec"), "", "field is immutable")}
		}
		return nil
	},
	Columns: []registry.Column{
		registry.ColumnOf("State", "string", "A summary of the current state (allocated, pending, reserved, etc.).", 0, claimState),
	},
}

// claimState is the STATE column as kube-apiserver prints it: "deleted"
// first when the claim is being deleted, then "pending" (unless deleted) or
// "allocated" and "reserved".
func claimState(c *resourcev1.ResourceClaim) any {
	var states []string
	if c.DeletionTimestamp != nil {
		states = append(states, "deleted")
	}
	switch {
	case c.Status.Allocation != nil:
		states = append(states, "allocated")
		if len(c.Status.ReservedFor) > 0 {
			states = append(states, "reserved")
		}
	case c.DeletionTimestamp == nil:
		states = append(states, "pending")
	}
	return strings.Join(states, ",")
}

var claimTemplates = registry.Kind[*resourcev1.ResourceClaimTemplate]{
	Default:       func(o *resourcev1.ResourceClaimTemplate) { defaultClaimSpec(&o.Spec.Spec) },
	ReturnDeleted: true,
	GroupVersion:  gv, Resource: "resourceclaimtemplates", Singular: "resourceclaimtemplate", Namespaced: true,
	NewObj:  func() runtime.Object { return &resourcev1.ResourceClaimTemplate{} },
	NewList: func() runtime.Object { return &resourcev1.ResourceClaimTemplateList{} },
	Validate: func(t *resourcev1.ResourceClaimTemplate) field.ErrorList {
		return validateClaimSpec(&t.Spec.Spec, field.NewPath("spec", "spec"))
	},
	ValidateUpdate: func(t, old *resourcev1.ResourceClaimTemplate) field.ErrorList {
		if !apiequality.Semantic.DeepEqual(t.Spec, old.Spec) {
			return field.ErrorList{field.Invalid(field.NewPath("spec"), "", "field is immutable")}
		}
		return nil
	},
}

var slices = registry.Kind[*resourcev1.ResourceSlice]{
	ReturnDeleted: true,
	Default: func(s *resourcev1.ResourceSlice) {
		for i := range s.Spec.Devices {
			for j := range s.Spec.Devices[i].Taints {
				defaultTaint(&s.Spec.Devices[i].Taints[j])
			}
		}
	},
	GroupVersion: gv, Resource: "resourceslices", Singular: "resourceslice", Generation: true,
	NewObj:  func() runtime.Object { return &resourcev1.ResourceSlice{} },
	NewList: func() runtime.Object { return &resourcev1.ResourceSliceList{} },
	Validate: func(s *resourcev1.ResourceSlice) field.ErrorList {
		p := field.NewPath("spec")
		var errs field.ErrorList
		if s.Spec.Driver == "" {
			errs = append(errs, field.Required(p.Child("driver"), ""))
		}
		if s.Spec.Pool.Name == "" {
			errs = append(errs, field.Required(p.Child("pool", "name"), ""))
		}
		if s.Spec.Pool.ResourceSliceCount <= 0 {
			errs = append(errs, field.Invalid(p.Child("pool", "resourceSliceCount"), s.Spec.Pool.ResourceSliceCount, "must be greater than zero"))
		}
		return errs
	},
	ValidateUpdate: func(s, old *resourcev1.ResourceSlice) field.ErrorList {
		if s.Spec.Driver != old.Spec.Driver {
			return field.ErrorList{field.Invalid(field.NewPath("spec", "driver"), s.Spec.Driver, "field is immutable")}
		}
		return nil
	},
	Columns: []registry.Column{
		registry.ColumnOf("Node", "string", resourcev1.ResourceSliceSpec{}.SwaggerDoc()["nodeName"], 0, func(s *resourcev1.ResourceSlice) any {
			return ptr.Deref(s.Spec.NodeName, "")
		}),
		registry.ColumnOf("Driver", "string", resourcev1.ResourceSliceSpec{}.SwaggerDoc()["driver"], 0, func(s *resourcev1.ResourceSlice) any { return s.Spec.Driver }),
		registry.ColumnOf("Pool", "string", resourcev1.ResourcePool{}.SwaggerDoc()["name"], 0, func(s *resourcev1.ResourceSlice) any { return s.Spec.Pool.Name }),
	},
	Fields: func(s *resourcev1.ResourceSlice) fields.Set {
		node := ""
		if s.Spec.NodeName != nil {
			node = *s.Spec.NodeName
		}
		return fields.Set{"spec.nodeName": node, "spec.driver": s.Spec.Driver}
	},
	FieldNames: []string{"spec.nodeName", "spec.driver"},
}

var taintRules = registry.Kind[*resourcev1.DeviceTaintRule]{
	GroupVersion: gv, Resource: "devicetaintrules", Singular: "devicetaintrule", Generation: true, Status: true,
	Default:       func(r *resourcev1.DeviceTaintRule) { defaultTaint(&r.Spec.Taint) },
	PrepareUpdate: bumpTaintTime,
	NewObj:        func() runtime.Object { return &resourcev1.DeviceTaintRule{} },
	NewList:       func() runtime.Object { return &resourcev1.DeviceTaintRuleList{} },
	Validate: func(r *resourcev1.DeviceTaintRule) field.ErrorList {
		p := field.NewPath("spec", "taint")
		var errs field.ErrorList
		if r.Spec.Taint.Key == "" {
			errs = append(errs, field.Required(p.Child("key"), ""))
		}
		if r.Spec.Taint.Effect == "" {
			errs = append(errs, field.Required(p.Child("effect"), ""))
		}
		return errs
	},
	Columns: []registry.Column{
		registry.ColumnOf("Key", "string", resourcev1.DeviceTaint{}.SwaggerDoc()["key"], 0, func(r *resourcev1.DeviceTaintRule) any { return r.Spec.Taint.Key }),
		registry.ColumnOf("Value", "string", resourcev1.DeviceTaint{}.SwaggerDoc()["value"], 0, func(r *resourcev1.DeviceTaintRule) any { return r.Spec.Taint.Value }),
		registry.ColumnOf("Effect", "string", resourcev1.DeviceTaint{}.SwaggerDoc()["effect"], 0, func(r *resourcev1.DeviceTaintRule) any { return string(r.Spec.Taint.Effect) }),
		registry.ColumnOf("TimeAdded", "string", resourcev1.DeviceTaint{}.SwaggerDoc()["timeAdded"], 0, func(r *resourcev1.DeviceTaintRule) any {
			if r.Spec.Taint.TimeAdded == nil {
				return ""
			}
			return printers.Since(*r.Spec.Taint.TimeAdded)
		}),
	},
}

// defaultTaint sets when a device taint was added, if not given: now, to
// the second (what survives encoding), as resource.k8s.io's defaulter.
func defaultTaint(t *resourcev1.DeviceTaint) {
	if t.TimeAdded == nil {
		t.TimeAdded = &metav1.Time{Time: time.Now().Truncate(time.Second)}
	}
}

// bumpTaintTime makes a rule's timeAdded the time its effect changed,
// unless the update sets it itself, as kube-apiserver's DeviceTaintRule
// strategy does: the toleration of affected claims counts from it.
func bumpTaintTime(r, old *resourcev1.DeviceTaintRule) {
	if r.Spec.Taint.Effect != old.Spec.Taint.Effect && r.Spec.Taint.TimeAdded.Equal(old.Spec.Taint.TimeAdded) {
		r.Spec.Taint.TimeAdded = &metav1.Time{Time: time.Now().Truncate(time.Second)}
	}
}
