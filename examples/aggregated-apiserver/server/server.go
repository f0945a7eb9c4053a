// Package server is an aggregated API server built on k8s.io/apiserver, the
// way sample-apiserver is: it serves fruits.example.kubeembed.dev/v1 over
// TLS of its own, authenticates and authorizes by delegating to the cluster
// that aggregates it (the front proxy's request headers, TokenReview,
// SubjectAccessReview, all read from that cluster), publishes OpenAPI for
// the cluster to merge, and stores in kubeembed's storage/memory through
// the storage seam the kubeembed server itself stores through.
//
// Its test runs it behind a kubeembed server as it runs behind
// kube-apiserver in a cluster: a Service, an EndpointSlice and an
// APIService.
package server

import (
	"context"
	"fmt"
	"net"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	basecompatibility "k8s.io/component-base/compatibility"
	aggregatoropenapi "k8s.io/kube-aggregator/pkg/generated/openapi"
	"k8s.io/kube-openapi/pkg/common"

	fruitsv1 "github.com/kubeembed/apiserver/examples/aggregated-apiserver/apis/fruits/v1"
	"github.com/kubeembed/apiserver/storage"
	"github.com/kubeembed/apiserver/storage/memory"
)

// Options configures a Server.
type Options struct {
	// Kubeconfig is a kubeconfig file of the cluster that aggregates the
	// server: it reads the front proxy's CA and headers from there
	// (kube-system/extension-apiserver-authentication) and asks it to
	// review tokens and access.
	Kubeconfig string
	// Service and Namespace name the Service the cluster reaches the
	// server through: its certificate is for <Service>.<Namespace>.svc.
	Service, Namespace string
}

// Server is the aggregated API server, listening on 127.0.0.1.
type Server struct {
	generic  *genericapiserver.GenericAPIServer
	port     int
	caBundle []byte
	backend  storage.Backend
}

// New builds the server; Run serves it.
func New(opts Options) (*Server, error) {
	scheme := runtime.NewScheme()
	if err := fruitsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	unversioned := schema.GroupVersion{Version: "v1"}
	scheme.AddUnversionedTypes(unversioned, &metav1.Status{}, &metav1.APIVersions{},
		&metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
	metav1.AddToGroupVersion(scheme, unversioned)
	codecs := serializer.NewCodecFactory(scheme)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	cfg, err := config(opts, scheme, codecs, ln)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	generic, err := cfg.Complete().New("fruits-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	s := &Server{generic: generic, port: ln.Addr().(*net.TCPAddr).Port, backend: memory.NewBackend(memory.Options{})}
	s.caBundle, _ = cfg.SecureServing.Cert.CurrentCertKeyContent()
	if err := s.install(scheme, codecs); err != nil {
		_ = s.backend.Close()
		return nil, err
	}
	return s, nil
}

// config is the recommended configuration of an aggregated server, with
// delegated authentication and authorization, OpenAPI, and no etcd or
// admission of its own.
func config(opts Options, scheme *runtime.Scheme, codecs serializer.CodecFactory, ln net.Listener) (*genericapiserver.RecommendedConfig, error) {
	o := genericoptions.NewRecommendedOptions("/registry", codecs.LegacyCodec(fruitsv1.SchemeGroupVersion))
	o.Etcd, o.Admission = nil, nil
	o.Features.EnablePriorityAndFairness = false
	o.SecureServing.Listener = ln
	o.SecureServing.BindAddress = net.ParseIP("127.0.0.1")
	o.SecureServing.BindPort = ln.Addr().(*net.TCPAddr).Port
	dns := opts.Service + "." + opts.Namespace + ".svc"
	if err := o.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", []string{dns}, nil); err != nil {
		return nil, err
	}
	o.Authentication.RemoteKubeConfigFile = opts.Kubeconfig
	o.Authorization.RemoteKubeConfigFile = opts.Kubeconfig
	o.CoreAPI.CoreAPIKubeconfigPath = opts.Kubeconfig

	cfg := genericapiserver.NewRecommendedConfig(codecs)
	// The Kubernetes version whose API machinery the server is built with.
	cfg.EffectiveVersion = basecompatibility.NewEffectiveVersionFromString("1.37", "", "")
	namer := openapinamer.NewDefinitionNamer(scheme)
	cfg.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(definitions, namer)
	cfg.OpenAPIConfig.Info.Title, cfg.OpenAPIConfig.Info.Version = "fruits", "v1"
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(definitions, namer)
	cfg.OpenAPIV3Config.Info.Title, cfg.OpenAPIV3Config.Info.Version = "fruits", "v1"
	if err := o.ApplyTo(cfg); err != nil {
		return nil, fmt.Errorf("fruits-apiserver: %w", err)
	}
	return cfg, nil
}

// definitions are the fruits' schemas and metav1's (from kube-aggregator's
// generated ones, which include them).
func definitions(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	defs := aggregatoropenapi.GetOpenAPIDefinitions(ref)
	for name, def := range fruitsv1.OpenAPIDefinitions(ref) {
		defs[name] = def
	}
	return defs
}

// install serves the fruits, stored in the server's memory backend.
func (s *Server) install(scheme *runtime.Scheme, codecs serializer.CodecFactory) error {
	store, err := newFruitStore(scheme, codecs, s.backend)
	if err != nil {
		return err
	}
	group := genericapiserver.NewDefaultAPIGroupInfo(fruitsv1.GroupName, scheme, metav1.ParameterCodec, codecs)
	group.VersionedResourcesStorageMap[fruitsv1.SchemeGroupVersion.Version] = map[string]rest.Storage{"fruits": store}
	return s.generic.InstallAPIGroup(&group)
}

// Port is the TCP port the server listens on, on 127.0.0.1.
func (s *Server) Port() int { return s.port }

// Address is 127.0.0.1:Port.
func (s *Server) Address() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// CABundle trusts the server's self-signed certificate: the caBundle of its
// APIService.
func (s *Server) CABundle() []byte { return s.caBundle }

// Run serves until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	defer s.backend.Close()
	return s.generic.PrepareRun().RunWithContext(ctx)
}
