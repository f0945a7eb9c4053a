// Package core serves the legacy core group (/api/v1): namespaces (with
// status and finalize), configmaps, secrets, serviceaccounts, events, pods
// (with status, binding, eviction, ephemeralcontainers and resize),
// services (with status; cluster IPs and node ports allocated), endpoints,
// nodes (with status), persistentvolumes and persistentvolumeclaims (with
// status), podtemplates, limitranges, resourcequotas (with status),
// replicationcontrollers (with status and scale), the legacy bindings,
// componentstatuses, and the proxy subresources of pods, nodes and
// services.
package core

import (
	"context"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/internal/eventstore"
	"github.com/kubeembed/apiserver/providers/registry"
)

// Provider serves the core group.
func Provider() providers.Provider { return group }

var group = registry.Group{
	GroupVersion: corev1.SchemeGroupVersion, AddToScheme: corev1.AddToScheme,
	Register: func(scheme *runtime.Scheme) error {
		registry.AddScale(scheme) // replicationcontrollers/scale
		defaultTokenRequests(scheme)
		return nil
	},
	Served: []registry.Served{namespaces, configMaps, secrets, serviceAccounts,
		eventstore.Kind(corev1.SchemeGroupVersion, eventstore.ValidateCore),
		pods, services, persistentVolumeClaims, nodes, endpoints, podTemplates, limitRanges,
		persistentVolumes, replicationControllers, resourceQuotas, componentStatuses},
	Hooks: hooks,
	Link: func(cfg providers.Config, s map[string]rest.Storage) error {
		serviceProxy, err := newServiceProxy(cfg, s["services"].(rest.Getter), s["pods"].(rest.Getter))
		if err != nil {
			return err
		}
		s["services/proxy"] = serviceProxy
		if cfg.DefaultServiceAccounts {
			defaultServiceAccounts(s["namespaces"].(*namespaceREST).Store.Store, s["serviceaccounts"].(*registry.Store).Store)
		}
		return nil
	},
}

// defaultServiceAccounts gives every new namespace its "default" service
// account before the namespace's create returns, as the service account
// controller of a cluster does soon after: the ServiceAccount admission
// plugin refuses pods whose service account is missing, and a test should
// not race a controller to create its first pod.
func defaultServiceAccounts(namespaces, serviceAccounts *genericregistry.Store) {
	namespaces.AfterCreate = func(obj runtime.Object, opts *metav1.CreateOptions) {
		ns, ok := obj.(*corev1.Namespace)
		if !ok || len(opts.DryRun) > 0 {
			return
		}
		ctx := genericapirequest.WithNamespace(context.Background(), ns.Name)
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns.Name}}
		// An error leaves the namespace without one, as a cluster whose
		// controller failed; AlreadyExists is the common case on restart.
		_, _ = serviceAccounts.Create(ctx, sa, nil, &metav1.CreateOptions{})
	}
}

// fieldChange says whether a top-level field changed in an update.
type fieldChange struct {
	field   string
	changed bool
}

// validateImmutable rejects changes to a ConfigMap or Secret that was made
// immutable, and making it mutable again.
func validateImmutable(immutable, oldImmutable *bool, changes ...fieldChange) field.ErrorList {
	if oldImmutable == nil || !*oldImmutable {
		return nil
	}
	const msg = "field is immutable when `immutable` is set"
	var errs field.ErrorList
	if immutable == nil || !*immutable {
		errs = append(errs, field.Forbidden(field.NewPath("immutable"), msg))
	}
	for _, c := range changes {
		if c.changed {
			errs = append(errs, field.Forbidden(field.NewPath(c.field), msg))
		}
	}
	return errs
}

// maxDataSize is the limit on the data of a ConfigMap or Secret (1 MiB).
const maxDataSize = corev1.MaxSecretSize

var configMaps = registry.Kind[*corev1.ConfigMap]{
	GroupVersion: corev1.SchemeGroupVersion, Resource: "configmaps", Singular: "configmap", ShortNames: []string{"cm"},
	Namespaced:        true,
	NewObj:            func() runtime.Object { return &corev1.ConfigMap{} },
	NewList:           func() runtime.Object { return &corev1.ConfigMapList{} },
	Validate:          validateConfigMap,
	UpdateChecksFirst: true,
	ValidateUpdate: func(cm, old *corev1.ConfigMap) field.ErrorList {
		return validateImmutable(cm.Immutable, old.Immutable,
			fieldChange{"data", !reflect.DeepEqual(cm.Data, old.Data)},
			fieldChange{"binaryData", !reflect.DeepEqual(cm.BinaryData, old.BinaryData)})
	},
	Columns: []registry.Column{registry.ColumnOf("Data", "string", corev1.ConfigMap{}.SwaggerDoc()["data"], 0, func(cm *corev1.ConfigMap) any {
		return int64(len(cm.Data) + len(cm.BinaryData))
	})},
}

func validateConfigMap(cm *corev1.ConfigMap) field.ErrorList {
	var errs field.ErrorList
	total := 0
	for key, value := range cm.Data {
		for _, msg := range isConfigMapKey(key) {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(key), key, msg))
		}
		if _, dup := cm.BinaryData[key]; dup {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(key), key, "duplicate of key present in binaryData"))
		}
		total += len(value)
	}
	for key, value := range cm.BinaryData {
		for _, msg := range isConfigMapKey(key) {
			errs = append(errs, field.Invalid(field.NewPath("binaryData").Key(key), key, msg))
		}
		total += len(value)
	}
	if total > maxDataSize {
		errs = append(errs, field.TooLong(field.NewPath(""), "", maxDataSize))
	}
	return errs
}
