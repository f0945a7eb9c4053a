// Package storagemigration serves storagemigration.k8s.io/v1
// StorageVersionMigrations, with status. Nothing migrates here (the storage
// version migrator is a controller): the objects are stored and validated.
package storagemigration

import (
	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"
)

var gv = storagemigrationv1.SchemeGroupVersion

// Provider serves storagemigration.k8s.io.
func Provider() providers.Provider { return group }

var group = registry.Group{
	GroupVersion: gv, AddToScheme: storagemigrationv1.AddToScheme,
	Served: []registry.Served{registry.Kind[*storagemigrationv1.StorageVersionMigration]{
		GroupVersion: gv, Resource: "storageversionmigrations", Singular: "storageversionmigration", Status: true,
		NewObj:  func() runtime.Object { return &storagemigrationv1.StorageVersionMigration{} },
		NewList: func() runtime.Object { return &storagemigrationv1.StorageVersionMigrationList{} },
		Validate: func(m *storagemigrationv1.StorageVersionMigration) field.ErrorList {
			if m.Spec.Resource.Resource == "" {
				return field.ErrorList{field.Required(field.NewPath("spec", "resource", "resource"), "")}
			}
			return nil
		},
		ValidateUpdate: func(m, old *storagemigrationv1.StorageVersionMigration) field.ErrorList {
			if !apiequality.Semantic.DeepEqual(m.Spec, old.Spec) {
				return field.ErrorList{field.Invalid(field.NewPath("spec"), m.Spec, "field is immutable")}
			}
			return nil
		},
		Columns: []registry.Column{
			registry.ColumnOf("Resource", "string", "GroupResource to migrate", 0, func(m *storagemigrationv1.StorageVersionMigration) any {
				r := m.Spec.Resource
				if r.Group == "" {
					return r.Resource
				}
				return r.Resource + "." + r.Group
			}),
			registry.ColumnOf("Status", "string", "Status of the migration", 0, func(m *storagemigrationv1.StorageVersionMigration) any {
				// The last true condition of these types, as kube-apiserver
				// prints it.
				status := "Unknown"
				for _, c := range m.Status.Conditions {
					switch storagemigrationv1.MigrationConditionType(c.Type) {
					case storagemigrationv1.MigrationRunning, storagemigrationv1.MigrationFailed, storagemigrationv1.MigrationSucceeded:
						if c.Status == metav1.ConditionTrue {
							status = c.Type
						}
					}
				}
				return status
			}),
		},
		NoAge: true, PlainName: true,
	}},
}
