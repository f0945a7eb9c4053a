package apps

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeembed/apiserver/providers/registry"
)

// controllerRevisionStorage serves controllerrevisions, whose data and
// revision are immutable.
var controllerRevisions = registry.Kind[*appsv1.ControllerRevision]{
	GroupVersion: appsv1.SchemeGroupVersion, Resource: "controllerrevisions", Singular: "controllerrevision", Namespaced: true,
	NewObj:  func() runtime.Object { return &appsv1.ControllerRevision{} },
	NewList: func() runtime.Object { return &appsv1.ControllerRevisionList{} },
	Validate: func(r *appsv1.ControllerRevision) field.ErrorList {
		var errs field.ErrorList
		if r.Data.Raw == nil && r.Data.Object == nil {
			errs = append(errs, field.Required(field.NewPath("data"), "data is mandatory"))
		}
		return append(errs, apivalidation.ValidateNonnegativeField(r.Revision, field.NewPath("revision"))...)
	},
	ValidateUpdate: func(r, old *appsv1.ControllerRevision) field.ErrorList {
		return apivalidation.ValidateImmutableField(r.Data, old.Data, field.NewPath("data"))
	},
	Columns: []registry.Column{
		registry.ColumnOf("Controller", "string", "Controller of the object", 0, func(r *appsv1.ControllerRevision) any {
			ref := metav1.GetControllerOf(r)
			if ref == nil {
				return "<none>"
			}
			// Metadata validation refuses an apiVersion that does not parse.
			gv, _ := schema.ParseGroupVersion(ref.APIVersion)
			gk := schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
			if gk.Empty() {
				return ref.Name
			}
			return strings.ToLower(gk.String()) + "/" + ref.Name
		}),
		registry.ColumnOf("Revision", "string", "Revision indicates the revision of the state represented by Data.", 0,
			func(r *appsv1.ControllerRevision) any { return r.Revision }),
	},
}
