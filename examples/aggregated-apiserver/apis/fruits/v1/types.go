// Package v1 is the fruits.example.kubeembed.dev/v1 API of the example
// aggregated API server: one namespaced kind, Fruit.
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group the server serves.
const GroupName = "fruits.example.kubeembed.dev"

// SchemeGroupVersion is the group version of the types.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1"}

// Resource qualifies a resource of the group.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

// Fruit is a fruit on a shelf.
type Fruit struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec FruitSpec `json:"spec"`
}

// FruitSpec is what a fruit is.
type FruitSpec struct {
	// Color of the fruit; required.
	Color string `json:"color"`
	// Sweetness from 0 to 10.
	Sweetness int32 `json:"sweetness,omitempty"`
}

// FruitList is a list of fruits.
type FruitList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Fruit `json:"items"`
}

// AddToScheme registers the types as v1 and as the group's internal
// version (the same Go types: the generic registry converts by copying).
func AddToScheme(scheme *runtime.Scheme) error {
	for _, gv := range []schema.GroupVersion{SchemeGroupVersion, {Group: GroupName, Version: runtime.APIVersionInternal}} {
		scheme.AddKnownTypes(gv, &Fruit{}, &FruitList{})
	}
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return scheme.SetVersionPriority(SchemeGroupVersion)
}

// DeepCopyObject implements runtime.Object.
func (f *Fruit) DeepCopyObject() runtime.Object { return f.DeepCopy() }

// DeepCopy copies f.
func (f *Fruit) DeepCopy() *Fruit {
	if f == nil {
		return nil
	}
	out := *f
	f.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// DeepCopyObject implements runtime.Object.
func (l *FruitList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]Fruit, len(l.Items))
		for i := range l.Items {
			out.Items[i] = *l.Items[i].DeepCopy()
		}
	}
	return &out
}
