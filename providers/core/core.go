// Package core serves the legacy core group (/api/v1): namespaces (with
// status and finalize), configmaps, secrets, serviceaccounts, events and pods
// (with status).
package core

import (
	"context"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"
)

// Provider serves the core group.
type Provider struct{}

var _ providers.Provider = Provider{}

// GroupName implements providers.Provider.
func (Provider) GroupName() string { return corev1.GroupName }

// Install implements providers.Provider.
func (Provider) Install(scheme *runtime.Scheme) error {
	if err := providers.InstallGroupVersion(scheme, corev1.SchemeGroupVersion, corev1.AddToScheme); err != nil {
		return err
	}
	registry.AddScale(scheme) // replicationcontrollers/scale
	scheme.AddTypeDefaultingFunc(&corev1.Secret{}, func(obj any) { defaultSecret(obj.(*corev1.Secret)) })
	scheme.AddTypeDefaultingFunc(&corev1.Pod{}, func(obj any) { defaultPod(obj.(*corev1.Pod)) })
	scheme.AddTypeDefaultingFunc(&corev1.Service{}, func(obj any) { defaultService(obj.(*corev1.Service)) })
	scheme.AddTypeDefaultingFunc(&corev1.PersistentVolumeClaim{}, func(obj any) { defaultPVC(obj.(*corev1.PersistentVolumeClaim)) })
	scheme.AddTypeDefaultingFunc(&corev1.PersistentVolume{}, func(obj any) { defaultPV(obj.(*corev1.PersistentVolume)) })
	// The name label is a default too (so the writer owns it in managed
	// fields), and set again once a generated name is known.
	scheme.AddTypeDefaultingFunc(&corev1.Namespace{}, func(obj any) {
		if ns := obj.(*corev1.Namespace); ns.Name != "" {
			setNameLabel(ns)
		}
	})
	scheme.AddTypeDefaultingFunc(&corev1.Endpoints{}, func(obj any) { defaultEndpoints(obj.(*corev1.Endpoints)) })
	scheme.AddTypeDefaultingFunc(&corev1.LimitRange{}, func(obj any) { defaultLimitRange(obj.(*corev1.LimitRange)) })
	scheme.AddTypeDefaultingFunc(&corev1.ReplicationController{}, func(obj any) {
		defaultReplicationController(obj.(*corev1.ReplicationController))
	})
	scheme.AddTypeDefaultingFunc(&corev1.PodTemplate{}, func(obj any) { DefaultPodTemplateSpec(&obj.(*corev1.PodTemplate).Template) })
	gv := corev1.SchemeGroupVersion
	for _, fl := range []struct {
		kind       string
		namespaced bool
		extra      []string
	}{
		{"Namespace", false, []string{"status.phase"}},
		{"ConfigMap", true, nil},
		{"Secret", true, []string{"type"}},
		{"ServiceAccount", true, nil},
		{"Event", true, eventFields},
		{"Pod", true, podFields},
		{"Service", true, nil},
		{"PersistentVolumeClaim", true, nil},
		{"Node", false, []string{"spec.unschedulable"}},
		{"Endpoints", true, nil},
		{"PodTemplate", true, nil},
		{"LimitRange", true, nil},
		{"PersistentVolume", false, nil},
		{"ReplicationController", true, []string{"status.replicas"}},
		{"ResourceQuota", true, nil},
	} {
		if err := registry.FieldLabelConversion(scheme, gv.WithKind(fl.kind), fl.namespaced, fl.extra...); err != nil {
			return err
		}
	}
	return scheme.SetVersionPriority(gv)
}

// Storage implements providers.Provider.
func (Provider) Storage(ctx providers.Config) (map[string]map[string]rest.Storage, error) {
	s := map[string]rest.Storage{}
	add := func(name string, build func(providers.Config) (map[string]rest.Storage, error)) error {
		m, err := build(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		for k, v := range m {
			s[k] = v
		}
		return nil
	}
	for _, b := range []struct {
		name  string
		build func(providers.Config) (map[string]rest.Storage, error)
	}{
		{"namespaces", namespaceStorage},
		{"configmaps", configMapStorage},
		{"secrets", secretStorage},
		{"serviceaccounts", serviceAccountStorage},
		{"events", eventStorage},
		{"pods", podStorage},
		{"services", serviceStorage},
		{"persistentvolumeclaims", pvcStorage},
		{"nodes", nodeStorage},
		{"endpoints", endpoints.storage},
		{"podtemplates", podTemplates.storage},
		{"limitranges", limitRanges.storage},
		{"persistentvolumes", pvStorage},
		{"replicationcontrollers", replicationControllers},
		{"resourcequotas", resourceQuotas.Storage},
	} {
		if err := add(b.name, b.build); err != nil {
			return nil, err
		}
	}
	defaultServiceAccounts(s["namespaces"].(*namespaceREST).Store.Store, s["serviceaccounts"].(*registry.Store).Store)
	return map[string]map[string]rest.Storage{"v1": s}, nil
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

func strategy(scheme *runtime.Scheme, namespaced bool) *registry.Strategy {
	return &registry.Strategy{ObjectTyper: scheme, NameGenerator: names.SimpleNameGenerator, Namespaced: namespaced}
}

// validateMeta validates metadata as kube-apiserver's ValidateObjectMeta with
// the given name rule.
func validateMeta(m *metav1.ObjectMeta, namespaced bool, nameFn apivalidation.ValidateNameFunc) field.ErrorList {
	return apivalidation.ValidateObjectMeta(m, namespaced, nameFn, field.NewPath("metadata"))
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

// --- ConfigMaps ---

func configMapStorage(ctx providers.Config) (map[string]rest.Storage, error) {
	st := strategy(ctx.Scheme, true)
	st.ValidateCreate = func(_ context.Context, obj runtime.Object) field.ErrorList {
		return validateConfigMap(obj.(*corev1.ConfigMap))
	}
	st.ValidateOnUpdate = func(_ context.Context, obj, old runtime.Object) field.ErrorList {
		cm, oldCM := obj.(*corev1.ConfigMap), old.(*corev1.ConfigMap)
		errs := validateImmutable(cm.Immutable, oldCM.Immutable,
			fieldChange{"data", !reflect.DeepEqual(cm.Data, oldCM.Data)},
			fieldChange{"binaryData", !reflect.DeepEqual(cm.BinaryData, oldCM.BinaryData)})
		return append(errs, validateConfigMap(cm)...)
	}
	store, err := registry.NewStore(ctx, registry.StoreConfig{
		Resource: corev1.Resource("configmaps"), Singular: "configmap",
		NewFunc:  func() runtime.Object { return &corev1.ConfigMap{} },
		NewList:  func() runtime.Object { return &corev1.ConfigMapList{} },
		Strategy: st, ShortNames: []string{"cm"},
		Table: registry.Table(registry.NameColumn(),
			registry.Column{TableColumnDefinition: col("Data", "string", corev1.ConfigMap{}.SwaggerDoc()["data"]),
				Value: func(o runtime.Object) any {
					cm := o.(*corev1.ConfigMap)
					return int64(len(cm.Data) + len(cm.BinaryData))
				}},
			registry.AgeColumn()),
		AttrFunc: registry.AttrFunc[*corev1.ConfigMap](true, nil),
	})
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{"configmaps": store}, nil
}

func validateConfigMap(cm *corev1.ConfigMap) field.ErrorList {
	errs := validateMeta(&cm.ObjectMeta, true, apivalidation.NameIsDNSSubdomain)
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

func col(name, typ, desc string) metaTableColumn {
	return metaTableColumn{Name: name, Type: typ, Description: desc}
}
