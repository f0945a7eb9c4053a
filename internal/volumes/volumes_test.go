package volumes

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The default class is the newest of those annotated default (either
// annotation), then the first by name.
func TestDefaultClass(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	class := func(name string, at time.Time, annotation string) *storagev1.StorageClass {
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(at)}}
		if annotation != "" {
			sc.Annotations = map[string]string{annotation: "true"}
		}
		return sc
	}
	older, newer := class("aaa", t0, IsDefaultClassAnnotation), class("zzz", t0.Add(time.Second), BetaIsDefaultClassAnnotation)
	plain := class("newest", t0.Add(time.Hour), "")
	assert.Equal(t, newer, DefaultClass([]*storagev1.StorageClass{older, newer, plain}))
	assert.Equal(t, newer, DefaultClass([]*storagev1.StorageClass{newer, older}))
	tie := class("bbb", t0, IsDefaultClassAnnotation)
	assert.Equal(t, older, DefaultClass([]*storagev1.StorageClass{tie, older}), "same second: the first by name")
	assert.Nil(t, DefaultClass([]*storagev1.StorageClass{plain}))
}

func TestAccessModes(t *testing.T) {
	modes := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany, corev1.ReadWriteOnce, corev1.ReadWriteMany}
	assert.Equal(t, "RWO,RWX", AccessModesString(modes))
	assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteMany}, AccessModesFromString("RWO, RWX"))
}
