package core

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubeembed/apiserver/providers/registry"
)

var serviceAccounts = registry.Kind[*corev1.ServiceAccount]{
	GroupVersion: corev1.SchemeGroupVersion, Resource: "serviceaccounts", Singular: "serviceaccount",
	ShortNames: []string{"sa"}, Namespaced: true, ReturnDeleted: true,
	NewObj:  func() runtime.Object { return &corev1.ServiceAccount{} },
	NewList: func() runtime.Object { return &corev1.ServiceAccountList{} },
}
