package pvprotection_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/controllers/pvprotection"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// start starts a server running the volume controllers, with no
// simulated node.
func start(t *testing.T) (*apiserver.Server, kubernetes.Interface) {
	t.Helper()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{
		Controllers: []controllers.Name{controllers.PersistentVolumeBinder, controllers.VolumeProvisioner, controllers.PVCProtection, controllers.PVProtection},
		Nodes:       []controllers.Node{}}))
	c, err := srv.Clientset()
	require.NoError(t, err)
	return srv, c
}

// createVolume creates a 1Gi static volume with no class (reclaim policy
// Retain, the default).
func createVolume(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	_, err := c.CoreV1().PersistentVolumes().Create(t.Context(), &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/" + name}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func getVolume(t *testing.T, c kubernetes.Interface, name string) *corev1.PersistentVolume {
	t.Helper()
	got, err := c.CoreV1().PersistentVolumes().Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return got
}

func TestBoundVolumeIsKeptUntilReleased(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	ctx, volumes := t.Context(), c.CoreV1().PersistentVolumes()
	createVolume(t, c, "disk")
	_, err := c.CoreV1().PersistentVolumeClaims("default").Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: ptr.To(""),
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	require.Equal(t, corev1.VolumeBound, getVolume(t, c, "disk").Status.Phase)

	require.NoError(t, volumes.Delete(ctx, "disk", metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv)
	kept := getVolume(t, c, "disk")
	assert.NotNil(t, kept.DeletionTimestamp)
	assert.Equal(t, []string{pvprotection.Finalizer}, kept.Finalizers)
	assert.Equal(t, corev1.VolumeBound, kept.Status.Phase)

	// The claim goes: the volume is Released, then let go.
	require.NoError(t, c.CoreV1().PersistentVolumeClaims("default").Delete(ctx, "data", metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv)
	_, err = volumes.Get(ctx, "disk", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
}

func TestUnboundVolumeGoesAtOnce(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	ctx, volumes := t.Context(), c.CoreV1().PersistentVolumes()
	createVolume(t, c, "spare")
	createVolume(t, c, "unprotected")
	apiservertest.WaitIdle(t, srv)
	assert.Equal(t, corev1.VolumeAvailable, getVolume(t, c, "spare").Status.Phase)

	// A volume whose finalizer was taken away gets it back.
	pv := getVolume(t, c, "unprotected")
	pv.Finalizers = nil
	_, err := volumes.Update(ctx, pv, metav1.UpdateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	assert.Equal(t, []string{pvprotection.Finalizer}, getVolume(t, c, "unprotected").Finalizers)

	require.NoError(t, volumes.Delete(ctx, "spare", metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv)
	_, err = volumes.Get(ctx, "spare", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
}
