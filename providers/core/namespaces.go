package core

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/names"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"
)

// namespaceNameLabel is the immutable label every namespace carries with its
// own name, so namespace selectors can select by name.
const namespaceNameLabel = "kubernetes.io/metadata.name"

var namespaces = registry.Kind[*corev1.Namespace]{
	Default: func(o *corev1.Namespace) {
		if o.Name != "" {
			setNameLabel(o)
		}
	},
	GroupVersion: corev1.SchemeGroupVersion, Resource: "namespaces", Singular: "namespace", ShortNames: []string{"ns"},
	NameValidation: apivalidation.NameIsDNSLabel,
	Status:         true, StatusWritesLabels: true,
	NewObj:  func() runtime.Object { return &corev1.Namespace{} },
	NewList: func() runtime.Object { return &corev1.NamespaceList{} },
	PrepareCreate: func(_ context.Context, ns *corev1.Namespace) {
		ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
		if !hasFinalizer(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
			ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
		}
		setNameLabel(ns)
	},
	// Finalizers change only through /finalize.
	PrepareUpdate: func(ns, old *corev1.Namespace) {
		ns.Spec.Finalizers = old.Spec.Finalizers
		setNameLabel(ns)
	},
	Validate: func(ns *corev1.Namespace) field.ErrorList { return validateNamespaceFinalizers(ns.Spec.Finalizers) },
	ValidateStatus: func(ns, _ *corev1.Namespace) field.ErrorList {
		// kube-apiserver names this field with a capital P.
		phase := field.NewPath("status", "Phase")
		if ns.DeletionTimestamp.IsZero() {
			if ns.Status.Phase != corev1.NamespaceActive {
				return field.ErrorList{field.Invalid(phase, ns.Status.Phase, "may only be 'Active' if `deletionTimestamp` is empty")}
			}
		} else if ns.Status.Phase != corev1.NamespaceTerminating {
			return field.ErrorList{field.Invalid(phase, ns.Status.Phase, "may only be 'Terminating' if `deletionTimestamp` is not empty")}
		}
		return nil
	},
	ShouldDeleteDuringUpdate: shouldDeleteNamespaceDuringUpdate,
	Columns: []registry.Column{registry.ColumnOf("Status", "string", "The status of the namespace", 0, func(ns *corev1.Namespace) any {
		return string(ns.Status.Phase)
	})},
	Fields:     func(ns *corev1.Namespace) fields.Set { return fields.Set{"status.phase": string(ns.Status.Phase)} },
	FieldNames: []string{"status.phase"},
	Customize: func(cfg providers.Config, store *registry.Store, s map[string]rest.Storage) error {
		s["namespaces"] = &namespaceREST{Store: store}
		finalize := finalizeStrategy(cfg)
		s["namespaces/finalize"] = finalizeREST{registry.Subresource(store, finalize, finalize)}
		return nil
	},
}

// finalizeStrategy writes /finalize: the spec's finalizers and metadata,
// never the status.
func finalizeStrategy(cfg providers.Config) *registry.Strategy {
	st := &registry.Strategy{ObjectTyper: cfg.Scheme, NameGenerator: names.SimpleNameGenerator}
	st.PrepareUpdate = func(_ context.Context, obj, old runtime.Object) {
		obj.(*corev1.Namespace).Status = old.(*corev1.Namespace).Status
	}
	st.ValidateOnUpdate = func(_ context.Context, obj, _ runtime.Object) field.ErrorList {
		return validateNamespaceFinalizers(obj.(*corev1.Namespace).Spec.Finalizers)
	}
	return st
}

// shouldDeleteNamespaceDuringUpdate removes a terminating namespace on update
// only once both its metadata and its spec finalizers are gone.
func shouldDeleteNamespaceDuringUpdate(ctx context.Context, key string, obj, existing runtime.Object) bool {
	ns, ok := obj.(*corev1.Namespace)
	return ok && len(ns.Spec.Finalizers) == 0 && genericregistry.ShouldDeleteDuringUpdate(ctx, key, obj, existing)
}

func setNameLabel(ns *corev1.Namespace) {
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[namespaceNameLabel] = ns.Name
}

func hasFinalizer(list []corev1.FinalizerName, f corev1.FinalizerName) bool {
	for _, x := range list {
		if x == f {
			return true
		}
	}
	return false
}

func validateNamespaceFinalizers(finalizers []corev1.FinalizerName) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath("spec", "finalizers")
	for i, f := range finalizers {
		errs = append(errs, apivalidation.ValidateFinalizerName(string(f), p.Index(i))...)
	}
	return errs
}

// namespaceREST deletes namespaces in two phases, as kube-apiserver: the first
// DELETE marks the namespace Terminating; it is removed only once its
// spec.finalizers are empty (the namespace controller's job).
type namespaceREST struct {
	*registry.Store
}

// DeleteCollection hides the store's: kube-apiserver serves no
// deletecollection of namespaces (its discovery lists no such verb, and
// such a request is refused with 405), so a namespaceREST must not be a
// rest.CollectionDeleter.
func (*namespaceREST) DeleteCollection() {}

// finalizeREST is namespaces/finalize as kube-apiserver serves it: update
// only, no get or patch.
type finalizeREST struct{ sub *registry.SubresourceStore }

func (f finalizeREST) New() runtime.Object { return f.sub.New() }

func (f finalizeREST) Destroy() {}

// Update implements rest.Updater.
func (f finalizeREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return f.sub.Update(ctx, name, objInfo, createValidation, updateValidation, forceAllowCreate, options)
}

// GetResetFields implements rest.ResetFieldsStrategy.
func (f finalizeREST) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return f.sub.GetResetFields()
}

// Delete implements rest.GracefulDeleter.
func (r *namespaceREST) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	obj, err := r.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, false, err
	}
	ns := obj.(*corev1.Namespace)
	if options == nil {
		options = metav1.NewDeleteOptions(0)
	}
	if options.Preconditions == nil {
		options.Preconditions = &metav1.Preconditions{}
	}
	if options.Preconditions.UID == nil {
		options.Preconditions.UID = &ns.UID
	} else if *options.Preconditions.UID != ns.UID {
		return nil, false, apierrors.NewConflict(corev1.Resource("namespaces"), name,
			//lint:ignore ST1005 kube-apiserver's exact message
			fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *options.Preconditions.UID, ns.UID))
	}
	if rv := options.Preconditions.ResourceVersion; rv != nil && *rv != ns.ResourceVersion {
		return nil, false, apierrors.NewConflict(corev1.Resource("namespaces"), name,
			//lint:ignore ST1005 kube-apiserver's exact message
			fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *rv, ns.ResourceVersion))
	}
	if deleteValidation != nil {
		if err := deleteValidation(ctx, ns); err != nil {
			return nil, false, err
		}
	}
	if ns.DeletionTimestamp.IsZero() {
		key, err := r.KeyFunc(ctx, name)
		if err != nil {
			return nil, false, err
		}
		pre := storage.Preconditions{UID: options.Preconditions.UID, ResourceVersion: options.Preconditions.ResourceVersion}
		out := r.NewFunc()
		err = r.Storage.GuaranteedUpdate(ctx, key, out, false, &pre, storage.SimpleUpdate(func(existing runtime.Object) (runtime.Object, error) {
			e := existing.(*corev1.Namespace)
			if e.DeletionTimestamp.IsZero() {
				e.DeletionTimestamp = ptr.To(metav1.Now())
			}
			e.Status.Phase = corev1.NamespaceTerminating
			return e, nil
		}), len(options.DryRun) > 0 && options.DryRun[0] == metav1.DryRunAll, nil)
		if err != nil {
			return nil, false, storageError(err, name)
		}
		return out, false, nil
	}
	if len(ns.Spec.Finalizers) != 0 {
		return ns, false, nil
	}
	return r.Store.Delete(ctx, name, deleteValidation, options)
}

func storageError(err error, name string) error {
	if storage.IsNotFound(err) {
		return apierrors.NewNotFound(corev1.Resource("namespaces"), name)
	}
	if storage.IsConflict(err) || storage.IsInvalidObj(err) {
		return apierrors.NewConflict(corev1.Resource("namespaces"), name, err)
	}
	return err
}
