package persistentvolume

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/kubeembed/apiserver/internal/volumes"
)

// accessModesIndex indexes the controller's volumes by their access modes
// (upstream's "accessmodes" index), so that a claim is matched first with
// the volumes that have the fewest modes beyond those it asks for.
const accessModesIndex = "accessmodes"

// newVolumeIndex is upstream's persistentVolumeOrderedIndex store.
func newVolumeIndex() cache.Indexer {
	return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{accessModesIndex: func(obj any) ([]string, error) {
		pv, ok := obj.(*corev1.PersistentVolume)
		if !ok {
			return []string{""}, fmt.Errorf("object is not a persistent volume: %T", obj)
		}
		return []string{volumes.AccessModesString(pv.Spec.AccessModes)}, nil
	}})
}

// findBestMatch is upstream's findBestMatchForClaim: for each set of access
// modes that holds all the claim asks for, fewest modes first,
// FindMatchingVolume (the volume pre-bound to the claim, else the smallest
// Available one that fits; in delay-binding mode only a pre-bound one).
// Sets of as many modes are taken in name order, where upstream's order is
// that of a map.
func findBestMatch(index cache.Indexer, claim *corev1.PersistentVolumeClaim, delayBinding bool) (*corev1.PersistentVolume, error) {
	var sets []string
	for _, key := range index.ListIndexFuncValues(accessModesIndex) {
		if containsAll(volumes.AccessModesFromString(key), claim.Spec.AccessModes) {
			sets = append(sets, key)
		}
	}
	slices.SortFunc(sets, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(volumes.AccessModesFromString(a)), len(volumes.AccessModesFromString(b))), strings.Compare(a, b))
	})
	for _, key := range sets {
		objs, err := index.ByIndex(accessModesIndex, key)
		if err != nil {
			return nil, fmt.Errorf("volumes with access modes %s: %w", key, err)
		}
		volumes := make([]*corev1.PersistentVolume, 0, len(objs))
		for _, o := range objs {
			if pv, ok := o.(*corev1.PersistentVolume); ok {
				volumes = append(volumes, pv)
			}
		}
		// VolumeAttributesClass is GA and locked on in 1.37.
		best, err := storagehelpers.FindMatchingVolume(claim, volumes, nil, nil, delayBinding, true)
		if err != nil || best != nil {
			return best, err
		}
	}
	return nil, nil
}

func containsAll(have, want []corev1.PersistentVolumeAccessMode) bool {
	for _, m := range want {
		if !slices.Contains(have, m) {
			return false
		}
	}
	return true
}
