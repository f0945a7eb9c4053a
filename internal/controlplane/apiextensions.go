package controlplane

// The apiextensions tier: CRDs and the custom resources they define.

import (
	noopoteltrace "go.opentelemetry.io/otel/trace/noop"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	crdinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// newExtensionsConfig is the apiextensions tier's configuration: its objects
// stored with apiextensions' legacy codec, custom resources as JSON,
// conversion webhooks reached through the Service resolver.
func newExtensionsConfig(sh *shared) *apiextensionsapiserver.Config {
	codecs := apiextensionsapiserver.Codecs
	getter := simpleGetter(sh.stored, codecs.LegacyCodec(apiextensionsv1beta1.SchemeGroupVersion),
		runtime.NewMultiGroupVersioner(apiextensionsv1beta1.SchemeGroupVersion, schema.GroupKind{Group: apiextensionsv1beta1.GroupName}))
	return &apiextensionsapiserver.Config{
		GenericConfig: sh.genericConfig(codecs, getter, apiextensionsapiserver.DefaultAPIResourceConfigSource()),
		ExtraConfig: apiextensionsapiserver.ExtraConfig{
			CRDRESTOptionsGetter: simpleGetter(sh.stored, customResourceCodec(), nil),
			MasterCount:          1,
			ServiceResolver:      sh.services,
			AuthResolverWrapper:  webhook.NewDefaultAuthenticationInfoResolverWrapper(serviceTransport(), nil, sh.loopback, noopoteltrace.NewTracerProvider()),
		},
	}
}

// extensionsReady readies the apiextensions tier for the others and
// returns its CRD informer. It publishes CRDs' OpenAPI v3 only when it also
// has a static OpenAPI v2 spec, which it does not use for v3; kubeembed
// builds /openapi/v2 itself, lazily (openAPIV2): a placeholder turns the v3
// publishing on, as on kube-apiserver.
func extensionsReady(ext *apiextensionsapiserver.CustomResourceDefinitions) crdinformers.CustomResourceDefinitionInformer {
	ext.GenericAPIServer.StaticOpenAPISpec = &spec.Swagger{}
	return ext.Informers.Apiextensions().V1().CustomResourceDefinitions()
}
