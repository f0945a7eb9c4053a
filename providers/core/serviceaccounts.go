package core

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"
)

// serviceAccounts serves /token (TokenRequest) where the server issues
// tokens; bound objects are read through stores of their own kinds.
var serviceAccounts = registry.Kind[*corev1.ServiceAccount]{
	GroupVersion: corev1.SchemeGroupVersion, Resource: "serviceaccounts", Singular: "serviceaccount",
	ShortNames: []string{"sa"}, Namespaced: true, ReturnDeleted: true,
	NewObj:  func() runtime.Object { return &corev1.ServiceAccount{} },
	NewList: func() runtime.Object { return &corev1.ServiceAccountList{} },
	Customize: func(cfg providers.Config, store *registry.Store, s map[string]rest.Storage) error {
		if cfg.ServiceAccountTokens == nil {
			return nil
		}
		token := &tokenREST{serviceAccounts: store, issuer: cfg.ServiceAccountTokens}
		var err error
		if token.pods, err = pods.Store(cfg); err != nil {
			return err
		}
		if token.secrets, err = secrets.Store(cfg); err != nil {
			return err
		}
		if token.nodes, err = nodes.Store(cfg); err != nil {
			return err
		}
		s["serviceaccounts/token"] = token
		return nil
	},
}
