package openapi

import (
	extensionsopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	aggregatoropenapi "k8s.io/kube-aggregator/pkg/generated/openapi"
	"k8s.io/kube-openapi/pkg/common"
)

// AllDefinitions returns the definitions of every type the three tiers serve:
// the core groups, apiextensions and apiregistration, as kube-apiserver's
// single generated set does.
func AllDefinitions(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	defs := GetOpenAPIDefinitions(ref)
	for _, more := range []func(common.ReferenceCallback) map[string]common.OpenAPIDefinition{
		extensionsopenapi.GetOpenAPIDefinitions, aggregatoropenapi.GetOpenAPIDefinitions,
	} {
		for k, v := range more(ref) {
			if _, ok := defs[k]; !ok {
				defs[k] = v
			}
		}
	}
	return defs
}
