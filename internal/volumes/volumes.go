// Package volumes is what kube-apiserver's admission, the persistent
// volume controller and the tables kubectl prints share about volumes:
// which storage class is the default, access modes by their short names,
// and the claims a pod's volumes use (podclaims.go), which the volume
// controllers and the scheduler read the same way.
package volumes

import (
	"cmp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// The annotations that mark a storage class the default one.
const (
	IsDefaultClassAnnotation     = "storageclass.kubernetes.io/is-default-class"
	BetaIsDefaultClassAnnotation = "storageclass.beta.kubernetes.io/is-default-class"
)

// IsDefaultClass: the class is annotated the default (either annotation).
func IsDefaultClass(sc *storagev1.StorageClass) bool {
	return sc.Annotations[IsDefaultClassAnnotation] == "true" || sc.Annotations[BetaIsDefaultClassAnnotation] == "true"
}

// DefaultClass is upstream's GetDefaultClass (and the printers' effective
// default): of the classes annotated the default, the newest, then the
// first by name; nil if none is.
func DefaultClass(classes []*storagev1.StorageClass) *storagev1.StorageClass {
	var def *storagev1.StorageClass
	for _, sc := range classes {
		if !IsDefaultClass(sc) {
			continue
		}
		if def == nil || cmp.Or(sc.CreationTimestamp.Compare(def.CreationTimestamp.Time), strings.Compare(def.Name, sc.Name)) > 0 {
			def = sc
		}
	}
	return def
}

// accessModes are the access modes' short names, in upstream's order.
var accessModes = []struct {
	mode  corev1.PersistentVolumeAccessMode
	short string
}{{corev1.ReadWriteOnce, "RWO"}, {corev1.ReadOnlyMany, "ROX"}, {corev1.ReadWriteMany, "RWX"}, {corev1.ReadWriteOncePod, "RWOP"}}

// AccessModesString is GetAccessModesAsString: the modes' short names,
// each once, in the order RWO, ROX, RWX, RWOP whatever order they are
// given in.
func AccessModesString(modes []corev1.PersistentVolumeAccessMode) string {
	var out []string
	for _, m := range accessModes {
		if slices.Contains(modes, m.mode) {
			out = append(out, m.short)
		}
	}
	return strings.Join(out, ",")
}

// AccessModesFromString is GetAccessModesFromString: the modes named in s.
func AccessModesFromString(s string) []corev1.PersistentVolumeAccessMode {
	var out []corev1.PersistentVolumeAccessMode
	for _, part := range strings.Split(s, ",") {
		for _, m := range accessModes {
			if strings.TrimSpace(part) == m.short {
				out = append(out, m.mode)
			}
		}
	}
	return out
}
