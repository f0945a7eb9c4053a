package pvcprotection_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/controllers/provisioner"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// start starts a server running the volume controllers, with no simulated
// node (the tests play the scheduler), a node "node-1" to bind pods to and
// an Immediate class "fast" of the simulated provisioner.
func start(t *testing.T) (*apiserver.Server, kubernetes.Interface) {
	t.Helper()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{
		Controllers: []controllers.Name{controllers.PersistentVolumeBinder, controllers.VolumeProvisioner, controllers.PVCProtection, controllers.PVProtection},
		Nodes:       []controllers.Node{}}))
	c, err := srv.Clientset()
	require.NoError(t, err)
	ctx := t.Context()
	// Without the serviceaccount controller nothing makes it, and the
	// ServiceAccount admission plugin refuses pods without it.
	_, err = c.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	_, err = c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"},
		Provisioner: provisioner.Name, VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate)}, metav1.CreateOptions{})
	require.NoError(t, err)
	return srv, c
}

// createClaim creates a 1Gi claim of class fast, which its controllers
// provision and bind.
func createClaim(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	_, err := c.CoreV1().PersistentVolumeClaims("default").Create(t.Context(), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: ptr.To("fast"),
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// createPod creates a pod with claim as its volume, bound to node unless
// node is "".
func createPod(t *testing.T, c kubernetes.Interface, name, claim, node string) {
	t.Helper()
	ctx, pods := t.Context(), c.CoreV1().Pods("default")
	_, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	if node != "" {
		err = pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name},
			Target: corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
}

func getClaim(t *testing.T, c kubernetes.Interface, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	got, err := c.CoreV1().PersistentVolumeClaims("default").Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return got
}

// unused is the claim's Unused condition, failing the test without one.
func unused(t *testing.T, c kubernetes.Interface, name string) corev1.PersistentVolumeClaimCondition {
	t.Helper()
	for _, cond := range getClaim(t, c, name).Status.Conditions {
		if cond.Type == corev1.PersistentVolumeClaimUnused {
			return cond
		}
	}
	t.Fatalf("claim %s has no Unused condition", name)
	return corev1.PersistentVolumeClaimCondition{}
}
