package persistentvolume

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-helpers/storage/ephemeral"
	"k8s.io/klog/v2"
)

// storeUpdate is upstream's storeObjectUpdate: obj replaces the copy in
// store unless that copy is newer (a write of the controller the informer
// has not delivered yet); it reports whether obj was stored, and so
// whether to sync it.
func storeUpdate(ctx context.Context, store cache.Store, obj any) (bool, error) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return false, fmt.Errorf("key of %T: %w", obj, err)
	}
	old, found, err := store.GetByKey(key)
	if err != nil {
		return false, fmt.Errorf("find %s in the controller's cache: %w", key, err)
	}
	if !found {
		return true, store.Add(obj)
	}
	newRV, err := resourceVersion(obj)
	if err != nil {
		return false, fmt.Errorf("%s: %w", key, err)
	}
	oldRV, err := resourceVersion(old)
	if err != nil {
		return false, fmt.Errorf("%s in the controller's cache: %w", key, err)
	}
	if oldRV > newRV {
		klog.FromContext(ctx).V(4).Info("Ignoring an older copy", "key", key, "resourceVersion", newRV)
		return false, nil
	}
	return true, store.Update(obj)
}

func resourceVersion(obj any) (int64, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return 0, err
	}
	rv, err := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse resourceVersion %q: %w", m.GetResourceVersion(), err)
	}
	return rv, nil
}

// claimsOfPod is upstream's PodPVCIndexFunc: the claims a pod's volumes
// name, generic ephemeral volumes' included.
func claimsOfPod(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	var keys []string
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		name := ""
		switch {
		case v.PersistentVolumeClaim != nil:
			name = v.PersistentVolumeClaim.ClaimName
		case v.Ephemeral != nil:
			name = ephemeral.VolumeClaimName(pod, v)
		}
		if name != "" {
			keys = append(keys, pod.Namespace+"/"+name)
		}
	}
	return keys, nil
}
