// Package providers defines how an API group's REST storage is plugged into
// kubeembed's core tier: the role kube-apiserver's RESTStorageProvider plays.
//
// kube-apiserver serves internal types from k8s.io/kubernetes, which
// kubeembed never imports. Providers serve the published k8s.io/api types
// instead, registered as both the external version and the group's internal
// (hub) version, so the generic handlers convert between them by copying.
package providers

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/informers"
	"k8s.io/kube-openapi/pkg/common"
)

// Provider serves one API group from the core tier.
type Provider interface {
	// GroupName is the API group served; "" is the legacy core group (/api).
	GroupName() string
	// Install registers the group's types, defaults and conversions in scheme,
	// with PrioritizedVersions order (the first version is the storage
	// version).
	Install(scheme *runtime.Scheme) error
	// Storage returns the REST storage of every served resource by version
	// then resource ("configmaps", "namespaces/status").
	Storage(cfg Config) (map[string]map[string]rest.Storage, error)
}

// OpenAPIProvider is implemented by a Provider whose types are not in
// k8s.io/api: its OpenAPI definitions (as openapi-gen writes them) are
// merged with the built-in ones. The generic server needs a definition for
// every served type, for server-side apply and field validation.
type OpenAPIProvider interface {
	OpenAPIDefinitions(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition
}

// Config is what the core tier hands a provider to build its storage.
type Config struct {
	// RESTOptionsGetter gives each resource its storage (codec, key prefix,
	// storage backend).
	RESTOptionsGetter generic.RESTOptionsGetter
	// Scheme is the core tier's scheme, with every provider installed.
	Scheme *runtime.Scheme
	// Authenticator and Authorizer are the server's own, for the review
	// APIs (TokenReview, SubjectAccessReview...).
	Authenticator authenticator.Request
	Authorizer    authorizer.Authorizer
	// RuleResolver lists what a user may do, for SelfSubjectRulesReview.
	RuleResolver authorizer.RuleResolver
	// ServiceClusterIPRange is the range Services' cluster IPs come from
	// (kube-apiserver's --service-cluster-ip-range); the zero Prefix means
	// kube-apiserver's default, 10.0.0.0/24.
	ServiceClusterIPRange netip.Prefix
	// ServingAddress is the address and port clients reach the server at
	// (a loopback address when it listens on all): the endpoint of the
	// default/kubernetes Service.
	ServingAddress netip.AddrPort
	// Informers is the server's shared informer factory (it starts them),
	// for providers' hooks and REST logic that watch objects. Informers
	// must be requested while the provider builds its storage, so that they
	// are synced when the server starts.
	Informers informers.SharedInformerFactory
	// AddPostStartHook registers work to do once the server serves, such as
	// creating and keeping the group's system objects, as kube-apiserver's
	// RESTStorageProviders do: under kube-apiserver's name where it has one;
	// the hook gets a loopback client configuration, and /readyz waits for
	// it and reports it by name. A hook that returns an error while the
	// server runs ends the process, as on kube-apiserver (genericapiserver
	// calls klog.Fatalf); one returned once the hook's context is done (the
	// server is closing) is only logged.
	AddPostStartHook func(name string, hook genericapiserver.PostStartHookFunc) error
	// AfterRestore registers work to do after Server.Restore replaced the
	// stored objects, for state a provider keeps beside storage (the
	// services' allocator).
	AfterRestore func(func(context.Context) error)
	// PriorityAndFairness says whether the server applies API Priority and
	// Fairness (flowcontrol's bootstrap configuration is kept only then).
	PriorityAndFairness bool
	// DefaultServiceAccounts says whether every new namespace gets its
	// "default" ServiceAccount (controllers.ServiceAccount is on).
	DefaultServiceAccounts bool
	// ServiceAccountTokens signs the server's service account tokens
	// (serviceaccounts/token), which its authenticator accepts.
	ServiceAccountTokens TokenIssuer
	// ClusterDialer connects to an address of the cluster network
	// ("host:port", network "tcp"), as kube-apiserver dials through its
	// egress selector's "cluster" dialer: a node's kubelet at the node's
	// preferred address and kubelet port (pods/log, exec, attach,
	// portforward) and a pod's IP (pods/proxy). The server's simulated
	// kubelet provides it (kubelet.Kubelet.DialContext); nil when it does
	// not run, and every dial then fails (refused, or the name does not
	// resolve), as on a cluster whose kubelets cannot be reached.
	ClusterDialer func(ctx context.Context, network, address string) (net.Conn, error)
	// Components are the cluster's components whose health
	// componentstatuses reports, by kube-apiserver's names for them
	// ("scheduler", "controller-manager", "etcd-0"): a check returns nil
	// when the component is healthy, else why it is not.
	Components map[string]func(context.Context) error
}

// TokenIssuer issues a server's service account tokens.
type TokenIssuer interface {
	// Audiences are the server's API audiences: a TokenRequest without
	// audiences gets these.
	Audiences() []string
	// IssueToken signs a token as t describes.
	IssueToken(ctx context.Context, t ServiceAccountToken) (string, error)
}

// ServiceAccountToken is a token to issue: for a service account, bound to
// at most one of a pod (with its node), a secret or a node, valid for TTL
// from now, for audiences.
type ServiceAccountToken struct {
	ServiceAccount *corev1.ServiceAccount
	Pod            *corev1.Pod
	Secret         *corev1.Secret
	Node           *corev1.Node
	Audiences      []string
	TTL            time.Duration
}

// addInternalVersion registers every kind of gv's own package (not the
// metav1 options kinds) under the internal version of gv's group too, so the
// generic handlers can use the versioned types as their hub types.
func addInternalVersion(scheme *runtime.Scheme, gv schema.GroupVersion) error {
	internal := schema.GroupVersion{Group: gv.Group, Version: runtime.APIVersionInternal}
	known := scheme.KnownTypes(gv)
	if len(known) == 0 {
		return fmt.Errorf("add internal version of %v: no types registered", gv)
	}
	const metaPkg = "k8s.io/apimachinery/pkg/apis/meta/v1"
	for kind, t := range known {
		if t.PkgPath() == metaPkg {
			continue // list/get/delete options and watch events stay external
		}
		if _, exists := scheme.KnownTypes(internal)[kind]; exists {
			continue
		}
		scheme.AddKnownTypeWithName(internal.WithKind(kind), reflect.New(t).Interface().(runtime.Object))
	}
	return nil
}

// InstallGroupVersion registers the types of gv (addToScheme, such as
// corev1.AddToScheme) as both gv and the group's internal version, and makes
// gv the group's preferred version: what every provider of k8s.io/api types
// does first in Install.
func InstallGroupVersion(scheme *runtime.Scheme, gv schema.GroupVersion, addToScheme func(*runtime.Scheme) error) error {
	if err := addToScheme(scheme); err != nil {
		return fmt.Errorf("install %v: %w", gv, err)
	}
	if err := addInternalVersion(scheme, gv); err != nil {
		return err
	}
	return scheme.SetVersionPriority(gv)
}
