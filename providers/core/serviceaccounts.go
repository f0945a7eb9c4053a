package core

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"
)

func serviceAccountStorage(ctx providers.Config) (map[string]rest.Storage, error) {
	st := strategy(ctx.Scheme, true)
	st.ValidateCreate = func(_ context.Context, obj runtime.Object) field.ErrorList {
		sa := obj.(*corev1.ServiceAccount)
		return validateMeta(&sa.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	}
	st.ValidateOnUpdate = func(_ context.Context, obj, _ runtime.Object) field.ErrorList {
		sa := obj.(*corev1.ServiceAccount)
		return validateMeta(&sa.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
	}
	store, err := registry.NewStore(ctx, registry.StoreConfig{
		Resource: corev1.Resource("serviceaccounts"), Singular: "serviceaccount",
		NewFunc:  func() runtime.Object { return &corev1.ServiceAccount{} },
		NewList:  func() runtime.Object { return &corev1.ServiceAccountList{} },
		Strategy: st, ShortNames: []string{"sa"},
		Table:    registry.Table(registry.NameColumn(), registry.AgeColumn()),
		AttrFunc: registry.AttrFunc[*corev1.ServiceAccount](true, nil),
	})
	if err != nil {
		return nil, err
	}
	store.Store.ReturnDeletedObject = true
	return map[string]rest.Storage{"serviceaccounts": store}, nil
}
