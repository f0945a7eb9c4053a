package volumes

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-helpers/storage/ephemeral"
)

// PodClaimsIndex is the pod informer's index of pods by the claims
// (namespace/name) their volumes use, as upstream's PodPVCIndex: one
// index that the controllers reading it share (AddPodClaimsIndex).
const PodClaimsIndex = "pod-pvc-index"

// ClaimName is the claim volume v of pod uses, "" for a volume that uses
// none: its persistentVolumeClaim, or the one the ephemeral volume
// controller makes for a generic ephemeral volume (<pod>-<volume>).
func ClaimName(pod *corev1.Pod, v *corev1.Volume) string {
	switch {
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName
	case v.Ephemeral != nil:
		return ephemeral.VolumeClaimName(pod, v)
	}
	return ""
}

// PodClaims is upstream's PodPVCIndexFunc: the claims a pod's volumes use
// (namespace/name), ephemeral volumes' included.
func PodClaims(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	var keys []string
	for i := range pod.Spec.Volumes {
		if name := ClaimName(pod, &pod.Spec.Volumes[i]); name != "" {
			keys = append(keys, pod.Namespace+"/"+name)
		}
	}
	return keys, nil
}

// AddPodClaimsIndex adds PodClaimsIndex to pods unless it has it, as
// upstream's AddPodPVCIndexerIfNotPresent.
func AddPodClaimsIndex(pods cache.Indexer) error {
	if _, ok := pods.GetIndexers()[PodClaimsIndex]; ok {
		return nil
	}
	if err := pods.AddIndexers(cache.Indexers{PodClaimsIndex: PodClaims}); err != nil {
		return fmt.Errorf("index pods by claim: %w", err)
	}
	return nil
}
