package admission

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/kubernetes"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/kubeembed/apiserver/internal/volumes"
)

// DefaultStorageClass is kube-apiserver's DefaultStorageClass plugin: a
// PersistentVolumeClaim created with no class (no spec.storageClassName and
// no volume.beta.kubernetes.io/storage-class annotation) gets the default
// class: of the classes annotated storageclass.kubernetes.io/is-default-class
// "true" (or the beta annotation), the newest, then the first by name. With
// no default class the claim is left alone; a failed lookup refuses the
// create (403), as upstream's does. An empty storageClassName ("") is a
// class, the one of volumes with none, and is kept. Like Pods it asks the
// server itself, so a class created just before counts.
type DefaultStorageClass struct {
	*admission.Handler
	client kubernetes.Interface
}

var _ admission.MutationInterface = (*DefaultStorageClass)(nil)

// NewDefaultStorageClass returns the plugin; client lists storage classes.
func NewDefaultStorageClass(client kubernetes.Interface) *DefaultStorageClass {
	return &DefaultStorageClass{Handler: admission.NewHandler(admission.Create), client: client}
}

// Admit implements admission.MutationInterface.
func (d *DefaultStorageClass) Admit(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != corev1.Resource("persistentvolumeclaims") || a.GetSubresource() != "" || a.GetOperation() != admission.Create {
		return nil
	}
	pvc, ok := a.GetObject().(*corev1.PersistentVolumeClaim)
	if !ok || storagehelpers.PersistentVolumeClaimHasClass(pvc) {
		return nil
	}
	classes, err := d.client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return admission.NewForbidden(a, fmt.Errorf("list storage classes: %w", err))
	}
	items := make([]*storagev1.StorageClass, len(classes.Items))
	for i := range classes.Items {
		items[i] = &classes.Items[i]
	}
	if def := volumes.DefaultClass(items); def != nil {
		pvc.Spec.StorageClassName = &def.Name
	}
	return nil
}
