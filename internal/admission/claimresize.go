package admission

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/kubernetes"
	volumeutil "k8s.io/component-helpers/storage/volume"
)

// PersistentVolumeClaimResize is kube-apiserver's plugin of that name (on
// by default): a claim's storage request may grow only once the claim is
// Bound, and only when its storage class (the same before and after)
// allows volume expansion; otherwise 403. Shrinking is validation's to
// judge. The class is read from the server at each growth (rare), so a
// class written just before is seen.
type PersistentVolumeClaimResize struct {
	*admission.Handler
	client kubernetes.Interface
}

var _ admission.ValidationInterface = (*PersistentVolumeClaimResize)(nil)

// NewPersistentVolumeClaimResize returns the plugin, reading storage
// classes with client.
func NewPersistentVolumeClaimResize(client kubernetes.Interface) *PersistentVolumeClaimResize {
	return &PersistentVolumeClaimResize{Handler: admission.NewHandler(admission.Update), client: client}
}

// Validate implements admission.ValidationInterface.
func (p *PersistentVolumeClaimResize) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != corev1.Resource("persistentvolumeclaims") || a.GetSubresource() != "" {
		return nil
	}
	pvc, ok := a.GetObject().(*corev1.PersistentVolumeClaim)
	old, oldOK := a.GetOldObject().(*corev1.PersistentVolumeClaim)
	if !ok || !oldOK {
		return nil
	}
	size, oldSize := pvc.Spec.Resources.Requests[corev1.ResourceStorage], old.Spec.Resources.Requests[corev1.ResourceStorage]
	if size.Cmp(oldSize) <= 0 {
		return nil
	}
	if old.Status.Phase != corev1.ClaimBound {
		return admission.NewForbidden(a, errors.New("Only bound persistent volume claims can be expanded"))
	}
	if !p.allowResize(ctx, pvc, old) {
		return admission.NewForbidden(a, errors.New("only dynamically provisioned pvc can be resized and "+
			"the storageclass that provisions the pvc must support resize"))
	}
	return nil
}

// allowResize: the claim's class, unchanged, allows volume expansion.
func (p *PersistentVolumeClaimResize) allowResize(ctx context.Context, pvc, old *corev1.PersistentVolumeClaim) bool {
	name, oldName := volumeutil.GetPersistentVolumeClaimClass(pvc), volumeutil.GetPersistentVolumeClaimClass(old)
	if name == "" || name != oldName {
		return false
	}
	class, err := p.client.StorageV1().StorageClasses().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false // as upstream's lister: a class it cannot read does not allow it
	}
	return class.AllowVolumeExpansion != nil && *class.AllowVolumeExpansion
}
