package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// OpenAPI model names of the types: the server publishes its OpenAPI under
// them, and the hosting cluster's aggregator merges it into its own.
func (Fruit) OpenAPIModelName() string     { return "dev.kubeembed.example.fruits.v1.Fruit" }
func (FruitSpec) OpenAPIModelName() string { return "dev.kubeembed.example.fruits.v1.FruitSpec" }
func (FruitList) OpenAPIModelName() string { return "dev.kubeembed.example.fruits.v1.FruitList" }

// OpenAPIDefinitions are the schemas of the types, written by hand where
// openapi-gen would generate them.
func OpenAPIDefinitions(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	object := func(desc string, props map[string]spec.Schema, required ...string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Description: desc, Type: []string{"object"}, Properties: props, Required: required}}
	}
	str := func(desc string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Description: desc, Type: []string{"string"}}}
	}
	refTo := func(name string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref(name)}}
	}
	meta := metav1.ObjectMeta{}.OpenAPIModelName()
	return map[string]common.OpenAPIDefinition{
		Fruit{}.OpenAPIModelName(): {Schema: object("Fruit is a fruit on a shelf.", map[string]spec.Schema{
			"apiVersion": str("APIVersion of the object."), "kind": str("Kind of the object."),
			"metadata": refTo(meta), "spec": refTo(FruitSpec{}.OpenAPIModelName()),
		}, "spec"), Dependencies: []string{meta, FruitSpec{}.OpenAPIModelName()}},
		FruitSpec{}.OpenAPIModelName(): {Schema: object("FruitSpec is what a fruit is.", map[string]spec.Schema{
			"color": str("Color of the fruit; required."),
			"sweetness": {SchemaProps: spec.SchemaProps{Description: "Sweetness from 0 to 10.",
				Type: []string{"integer"}, Format: "int32"}},
		}, "color")},
		FruitList{}.OpenAPIModelName(): {Schema: object("FruitList is a list of fruits.", map[string]spec.Schema{
			"apiVersion": str("APIVersion of the object."), "kind": str("Kind of the object."),
			"metadata": refTo(metav1.ListMeta{}.OpenAPIModelName()),
			"items": {SchemaProps: spec.SchemaProps{Type: []string{"array"},
				Items: &spec.SchemaOrArray{Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref(Fruit{}.OpenAPIModelName())}}}}},
		}, "items"), Dependencies: []string{metav1.ListMeta{}.OpenAPIModelName(), Fruit{}.OpenAPIModelName()}},
	}
}
