package volumeexpand_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/controllers/provisioner"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// start starts a server with the volume controllers and two Immediate
// classes of the simulated provisioner: "elastic", which allows volume
// expansion, and "fixed", which does not.
func start(t *testing.T) (*apiserver.Server, kubernetes.Interface) {
	t.Helper()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Nodes: []controllers.Node{},
		Controllers: []controllers.Name{controllers.PersistentVolumeBinder, controllers.VolumeProvisioner, controllers.PVCProtection,
			controllers.PVProtection, controllers.VolumeExpand}}))
	client, err := srv.Clientset()
	require.NoError(t, err)
	for name, expands := range map[string]bool{"elastic": true, "fixed": false} {
		_, err := client.StorageV1().StorageClasses().Create(t.Context(), &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name},
			Provisioner: provisioner.Name, VolumeBindingMode: new(storagev1.VolumeBindingImmediate), AllowVolumeExpansion: new(expands)},
			metav1.CreateOptions{})
		require.NoError(t, err)
	}
	return srv, client
}

// boundClaim creates a claim of 1Gi of class and waits for it to be bound.
func boundClaim(t *testing.T, srv *apiserver.Server, client kubernetes.Interface, name, class string) {
	t.Helper()
	_, err := client.CoreV1().PersistentVolumeClaims("default").Create(t.Context(), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &class,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, srv.WaitIdle(t.Context()))
	pvc, err := client.CoreV1().PersistentVolumeClaims("default").Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, corev1.ClaimBound, pvc.Status.Phase)
}

func grow(client kubernetes.Interface, t *testing.T, name string) error {
	_, err := client.CoreV1().PersistentVolumeClaims("default").Patch(t.Context(), name, types.MergePatchType,
		[]byte(`{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}`), metav1.PatchOptions{})
	return err
}

// A claim of a class that allows expansion may grow; kube-controller-
// manager's expand controller then says it waits for an external resizer,
// which local-path-provisioner (the simulated one) does not have.
func TestGrowingClaimWaitsForAnExternalResizer(t *testing.T) {
	t.Parallel()
	srv, client := start(t)
	boundClaim(t, srv, client, "data", "elastic")
	require.NoError(t, grow(client, t, "data"))
	require.NoError(t, srv.WaitIdle(t.Context()))

	events, err := client.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", "data").String()})
	require.NoError(t, err)
	var expanding []corev1.Event
	for _, e := range events.Items {
		if e.Reason == "ExternalExpanding" {
			expanding = append(expanding, e)
		}
	}
	require.Len(t, expanding, 1)
	assert.Equal(t, corev1.EventTypeNormal, expanding[0].Type)
	assert.Equal(t, "waiting for an external controller to expand this PVC", expanding[0].Message)
	assert.Equal(t, corev1.EventSource{Component: "volume_expand"}, expanding[0].Source)
	pvc, err := client.CoreV1().PersistentVolumeClaims("default").Get(t.Context(), "data", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "1Gi", pvc.Status.Capacity.Storage().String(), "nothing expands it")
}

// kube-apiserver's PersistentVolumeClaimResize admission refuses growing a
// claim whose class does not allow expansion.
func TestClaimOfAFixedClassCannotGrow(t *testing.T) {
	t.Parallel()
	srv, client := start(t)
	boundClaim(t, srv, client, "data", "fixed")
	err := grow(client, t, "data")
	require.True(t, apierrors.IsForbidden(err), "%v", err)
	assert.Equal(t, `persistentvolumeclaims "data" is forbidden: only dynamically provisioned pvc can be resized and `+
		`the storageclass that provisions the pvc must support resize`, err.Error())

	// Nor does any claim shrink below its capacity (validation's).
	_, err = client.CoreV1().PersistentVolumeClaims("default").Patch(t.Context(), "data", types.MergePatchType,
		[]byte(`{"spec":{"resources":{"requests":{"storage":"512Mi"}}}}`), metav1.PatchOptions{})
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	assert.Equal(t, `PersistentVolumeClaim "data" is invalid: spec.resources.requests.storage: Forbidden: field can not be less than status.capacity`, err.Error())
}
