package provisioner_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/controllers"
	kubeadmission "github.com/kubeembed/apiserver/internal/admission"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// The DefaultStorageClass admission plugin (internal/admission) gives new
// claims the class this package makes the default; it is tested here,
// beside that class, on a real server.

// admitClaim runs the plugin on the create of pvc.
func admitClaim(t *testing.T, c kubernetes.Interface, pvc *corev1.PersistentVolumeClaim) {
	t.Helper()
	a := admission.NewAttributesRecord(pvc, nil, corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"), "default", pvc.Name,
		corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"), "", admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "test"})
	require.NoError(t, kubeadmission.NewDefaultStorageClass(c).Admit(t.Context(), a, nil))
}

func TestDefaultStorageClassAdmission(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	apiservertest.WaitIdle(t, srv)

	none := claim("none", nil)
	admitClaim(t, c, none)
	assert.Equal(t, ptr.To("standard"), none.Spec.StorageClassName)

	empty := claim("empty", ptr.To(""))
	admitClaim(t, c, empty)
	assert.Equal(t, ptr.To(""), empty.Spec.StorageClassName, `"" asks for volumes with no class`)

	beta := claim("beta", nil)
	beta.Annotations = map[string]string{"volume.beta.kubernetes.io/storage-class": "old"}
	admitClaim(t, c, beta)
	assert.Nil(t, beta.Spec.StorageClassName, "the beta annotation names a class")

	// Two defaults: the newest wins (creation times are in seconds: a tie
	// goes to the first name).
	_, err := c.StorageV1().StorageClasses().Create(t.Context(), &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "aaa",
		Annotations: map[string]string{"storageclass.beta.kubernetes.io/is-default-class": "true"}}, Provisioner: "example.com/a"}, metav1.CreateOptions{})
	require.NoError(t, err)
	second := claim("second", nil)
	admitClaim(t, c, second)
	assert.Equal(t, ptr.To("aaa"), second.Spec.StorageClassName)
}

func TestDefaultStorageClassAdmissionWithNoDefault(t *testing.T) {
	t.Parallel()
	_, c := start(t, []controllers.Name{}...)
	pvc := claim("data", nil)
	admitClaim(t, c, pvc)
	assert.Nil(t, pvc.Spec.StorageClassName)
}
