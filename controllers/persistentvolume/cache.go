package persistentvolume

import (
	"context"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
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
