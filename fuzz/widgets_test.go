package fuzz_test

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// widgetsPath is the collection of the widgets CRD in namespace ns.
const widgetsPath = "/apis/fuzz.kubeembed.io/v1/namespaces/" + ns + "/widgets"

// widgetYAML is a CRD with what a structural schema can ask of a custom
// resource: defaults, enums, formats, int-or-string, list and map types,
// embedded resources, preserved unknown fields, and CEL rules (with
// messageExpression, fieldPath and reason, a transition rule, quantities),
// status and scale subresources and a selectable field.
const widgetYAML = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.fuzz.kubeembed.io
spec:
  group: fuzz.kubeembed.io
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    selectableFields: [{jsonPath: .spec.color}]
    additionalPrinterColumns:
    - {name: Color, type: string, jsonPath: .spec.color}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas, labelSelectorPath: .status.selector}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [color]
            x-kubernetes-validations:
            - rule: self.minReplicas <= self.replicas
              message: minReplicas must not exceed replicas
            - rule: "!has(self.tags) || self.tags.all(t, size(t) <= 16)"
            - rule: self.color != 'black' || self.replicas == 0
              messageExpression: "'a ' + self.color + ' widget needs 0 replicas'"
              fieldPath: .replicas
              reason: FieldValueForbidden
            properties:
              color: {type: string, maxLength: 8, enum: [red, green, blue, black], default: red}
              replicas: {type: integer, format: int32, minimum: 0, maximum: 1000, default: 1}
              minReplicas: {type: integer, default: 0}
              tags: {type: array, maxItems: 10, x-kubernetes-list-type: set, items: {type: string}}
              ports:
                type: array
                maxItems: 8
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string, maxLength: 15}
                    port: {type: integer, minimum: 1, maximum: 65535}
                  x-kubernetes-validations:
                  - rule: "!has(self.port) || self.port != 22"
                    message: no ssh
              size:
                x-kubernetes-int-or-string: true
                anyOf: [{type: integer}, {type: string}]
                x-kubernetes-validations:
                - rule: type(self) == int || self.startsWith('1')
              labels:
                type: object
                maxProperties: 20
                additionalProperties: {type: string, maxLength: 63}
                x-kubernetes-map-type: granular
              extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
              template: {type: object, x-kubernetes-embedded-resource: true, x-kubernetes-preserve-unknown-fields: true}
              when: {type: string, format: date-time}
              owner:
                type: string
                maxLength: 64
                x-kubernetes-validations:
                - {rule: self == oldSelf, message: owner is immutable}
              quantity:
                type: string
                maxLength: 32
                x-kubernetes-validations:
                - rule: isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))
                  message: quantity must be a positive quantity
          status:
            type: object
            properties:
              replicas: {type: integer}
              selector: {type: string}
`

// widgetCRD is widgetYAML's CRD.
func widgetCRD(f *testing.F) *apiextensionsv1.CustomResourceDefinition {
	f.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict([]byte(widgetYAML), crd); err != nil {
		f.Fatalf("widgets CRD: %v", err)
	}
	return crd
}

// widgetJSON is a widget that passes every rule.
const widgetJSON = `{"apiVersion":"fuzz.kubeembed.io/v1","kind":"Widget","metadata":{"name":"w","labels":{"a":"b"}},
"spec":{"color":"green","replicas":3,"minReplicas":1,"tags":["x","y"],"ports":[{"name":"http","port":80}],
"size":"10Mi","labels":{"k":"v"},"extra":{"any":[1,"two",{"three":3}]},
"template":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"t"}},
"when":"2026-01-02T03:04:05Z","owner":"me","quantity":"500m"}}`
