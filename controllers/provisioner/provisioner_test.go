package provisioner_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/controllers/provisioner"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// start starts a server running the volume controllers (or those named),
// with no simulated node.
func start(t *testing.T, names ...controllers.Name) (*apiserver.Server, kubernetes.Interface) {
	t.Helper()
	if names == nil {
		names = []controllers.Name{controllers.PersistentVolumeBinder, controllers.VolumeProvisioner, controllers.PVCProtection, controllers.PVProtection}
	}
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Controllers: names, Nodes: []controllers.Node{}}))
	c, err := srv.Clientset()
	require.NoError(t, err)
	return srv, c
}

func claim(name string, class *string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: class,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
}

// waitEvent waits (10 s at most: events are written after the work, so
// WaitIdle does not cover them) for an event of reason about name.
func waitEvent(t *testing.T, c kubernetes.Interface, name, reason string) corev1.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	selector := fields.Set{"involvedObject.name": name, "reason": reason}.String()
	list, err := c.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: selector})
	require.NoError(t, err)
	if len(list.Items) > 0 {
		return list.Items[0]
	}
	w, err := c.CoreV1().Events("default").Watch(ctx, metav1.ListOptions{FieldSelector: selector, ResourceVersion: list.ResourceVersion})
	require.NoError(t, err)
	defer w.Stop()
	for e := range w.ResultChan() {
		if ev, ok := e.Object.(*corev1.Event); ok && (e.Type == watch.Added || e.Type == watch.Modified) {
			return *ev
		}
	}
	t.Fatalf("no event %s about %s: %v", reason, name, ctx.Err())
	return corev1.Event{}
}

func TestDefaultStorageClass(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	apiservertest.WaitIdle(t, srv)
	got, err := c.StorageV1().StorageClasses().Get(t.Context(), provisioner.DefaultClass, metav1.GetOptions{})
	require.NoError(t, err)
	want := &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: "standard", Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner: "kubeembed.io/simulated", ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	assert.Empty(t, cmp.Diff(want, got, cmpopts.IgnoreFields(metav1.ObjectMeta{}, "UID", "ResourceVersion", "CreationTimestamp", "ManagedFields")))
	require.Len(t, got.ManagedFields, 1)
	assert.Equal(t, "kubectl-client-side-apply", got.ManagedFields[0].Manager)

	// Made once, as kind applies its manifest once.
	require.NoError(t, c.StorageV1().StorageClasses().Delete(t.Context(), "standard", metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv)
	_, err = c.StorageV1().StorageClasses().Get(t.Context(), provisioner.DefaultClass, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
}

func TestSelectedNodeThatDoesNotExistIsGivenBack(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	ctx := t.Context()
	// The default class is created once the server is ready, after Start
	// returns. A claim synced before the class exists gets the PV
	// controller's own ProvisioningFailed (storageclass.storage.k8s.io
	// "standard" not found) before the provisioner's, and waitEvent returns
	// the first: the failure seen once on 2 loaded cores, and every time
	// with createDefaultClass delayed by 300 ms.
	apiservertest.WaitIdle(t, srv)
	pvc := claim("data", ptr.To(provisioner.DefaultClass))
	pvc.Annotations = map[string]string{"volume.kubernetes.io/selected-node": "ghost"}
	_, err := c.CoreV1().PersistentVolumeClaims("default").Create(ctx, pvc, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)

	got, err := c.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, got.Annotations, "volume.kubernetes.io/selected-node", "the scheduler is to choose again")
	assert.Equal(t, provisioner.Name, got.Annotations["volume.kubernetes.io/storage-provisioner"])
	e := waitEvent(t, c, "data", "ProvisioningFailed")
	assert.Equal(t, `nodes "ghost" not found`, e.Message)
	vols, err := c.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, vols.Items)
}

func TestBlockClaimIsRefused(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	ctx := t.Context()
	_, err := c.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"},
		Provisioner: provisioner.Name, VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate)}, metav1.CreateOptions{})
	require.NoError(t, err)
	pvc := claim("raw", ptr.To("fast"))
	pvc.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock)
	_, err = c.CoreV1().PersistentVolumeClaims("default").Create(ctx, pvc, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)

	e := waitEvent(t, c, "raw", "ProvisioningFailed")
	assert.Equal(t, "kubeembed.io/simulated does not support block volume provisioning", e.Message)
	got, err := c.CoreV1().PersistentVolumeClaims("default").Get(ctx, "raw", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.ClaimPending, got.Status.Phase)
}
