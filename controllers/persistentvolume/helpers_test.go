package persistentvolume_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// start starts a server running the volume controllers (PV controller,
// provisioner, both protections), with no simulated node (the tests play
// the scheduler and the kubelet), and returns it with a client once the
// default class is there.
func start(t *testing.T) (*apiserver.Server, kubernetes.Interface) {
	t.Helper()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{
		Controllers: []controllers.Name{controllers.PersistentVolumeBinder, controllers.VolumeProvisioner, controllers.PVCProtection, controllers.PVProtection},
		Nodes:       []controllers.Node{}}))
	c, err := srv.Clientset()
	require.NoError(t, err)
	// Without the serviceaccount controller nothing makes it, and the
	// ServiceAccount admission plugin refuses pods without it.
	_, err = c.CoreV1().ServiceAccounts("default").Create(t.Context(),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	apiservertest.WaitIdle(t, srv)
	return srv, c
}

// createClass creates a class of provisioner with the binding mode and
// reclaim policy given.
func createClass(t *testing.T, c kubernetes.Interface, name, provisioner string, mode storagev1.VolumeBindingMode, policy corev1.PersistentVolumeReclaimPolicy) {
	t.Helper()
	_, err := c.StorageV1().StorageClasses().Create(t.Context(), &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name},
		Provisioner: provisioner, VolumeBindingMode: &mode, ReclaimPolicy: &policy}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// claim is a claim in namespace default of size with the access modes
// given (ReadWriteOnce if none), of class (nil: none given).
func claim(name, size string, class *string, modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaim {
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: modes, StorageClassName: class,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}}
}

func createClaim(t *testing.T, c kubernetes.Interface, pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	t.Helper()
	got, err := c.CoreV1().PersistentVolumeClaims(pvc.Namespace).Create(t.Context(), pvc, metav1.CreateOptions{})
	require.NoError(t, err)
	return got
}

func getClaim(t *testing.T, c kubernetes.Interface, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	got, err := c.CoreV1().PersistentVolumeClaims("default").Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return got
}

func getVolume(t *testing.T, c kubernetes.Interface, name string) *corev1.PersistentVolume {
	t.Helper()
	got, err := c.CoreV1().PersistentVolumes().Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return got
}

// hostPathVolume is a static volume of size, class and access modes.
func hostPathVolume(name, size, class string, modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{AccessModes: modes, StorageClassName: class,
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/" + name}}}}
}

// eventTimeout bounds the wait for an event: the recorders write them
// after the controller's work, so WaitIdle does not cover them.
const eventTimeout = 10 * time.Second

// waitEvent waits for an event of reason about the object named name in
// namespace default (or cluster-scoped if ns is ""), and returns it.
func waitEvent(t *testing.T, c kubernetes.Interface, ns, name, reason string) corev1.Event {
	t.Helper()
	selector := fields.Set{"involvedObject.name": name, "reason": reason}.String()
	events := c.CoreV1().Events(ns)
	list, err := events.List(t.Context(), metav1.ListOptions{FieldSelector: selector})
	require.NoError(t, err)
	if len(list.Items) > 0 {
		return list.Items[0]
	}
	w, err := events.Watch(t.Context(), metav1.ListOptions{FieldSelector: selector, ResourceVersion: list.ResourceVersion})
	require.NoError(t, err)
	defer w.Stop()
	timeout := time.After(eventTimeout)
	for {
		select {
		case e, ok := <-w.ResultChan():
			require.True(t, ok, "watch of events ended")
			if ev, ok := e.Object.(*corev1.Event); ok && (e.Type == watch.Added || e.Type == watch.Modified) {
				return *ev
			}
		case <-timeout:
			t.Fatalf("no event %s about %s/%s in %v", reason, ns, name, eventTimeout)
		}
	}
}

// quantities compares quantities by value.
var quantities = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

// managers are the field managers of obj's managed fields, as
// "manager/operation[/subresource]".
func managers(fields []metav1.ManagedFieldsEntry) []string {
	var out []string
	for _, f := range fields {
		out = append(out, strings.TrimSuffix(f.Manager+"/"+string(f.Operation)+"/"+f.Subresource, "/"))
	}
	return out
}

var (
	standard = ptr.To("standard")
	noClass  = ptr.To("")
)
