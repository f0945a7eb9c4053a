package apiserver_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/storage/memory"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

func TestSnapshotRestore(t *testing.T) {
	t.Parallel()
	srv := startOnMemory(t, apiservertest.WithCRDPaths("testdata/crds"))
	c := clientset(t, srv)
	ctx := t.Context()
	cms := c.CoreV1().ConfigMaps("default")
	for _, name := range []string{"a", "b"} {
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": "1"}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	dyn, err := srv.DynamicClient()
	require.NoError(t, err)
	widgets := dyn.Resource(widgetGVR).Namespace("default")
	_, err = widgets.Create(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.kubeembed.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w"}, "spec": map[string]any{"size": int64(1)}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	snap, err := srv.Snapshot()
	require.NoError(t, err)

	a, err := cms.Get(ctx, "a", metav1.GetOptions{})
	require.NoError(t, err)
	a.Data["v"] = "2"
	a, err = cms.Update(ctx, a, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, cms.Delete(ctx, "b", metav1.DeleteOptions{}))
	_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, widgets.Delete(ctx, "w", metav1.DeleteOptions{}))
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: a.ResourceVersion})
	require.NoError(t, err)
	defer w.Stop()

	require.NoError(t, srv.Restore(ctx, snap))

	restored, err := cms.Get(ctx, "a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "1", restored.Data["v"])
	assert.Equal(t, a.UID, restored.UID, "the same object")
	before, _ := strconv.ParseInt(a.ResourceVersion, 10, 64)
	after, _ := strconv.ParseInt(restored.ResourceVersion, 10, 64)
	assert.Greater(t, after, before, "resourceVersions only grow")
	_, err = cms.Get(ctx, "b", metav1.GetOptions{})
	assert.NoError(t, err, "a deleted object is back")
	_, err = cms.Get(ctx, "c", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "an object created since is gone: %v", err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := widgets.Get(ctx, "w", metav1.GetOptions{})
		assert.NoError(c, err, "custom resources are restored too")
	}, 10*time.Second, 10*time.Millisecond)

	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			assert.True(t, apierrors.IsResourceExpired(apierrors.FromObject(ev.Object)) || apierrors.IsGone(apierrors.FromObject(ev.Object)),
				"a watch across the restore ends with 410: %v", ev.Object)
			return
		}
	}
	t.Fatal("the watch ended without 410")
}

// Cluster IPs of restored services are not handed out again.
func TestRestoreKeepsServiceAllocations(t *testing.T) {
	t.Parallel()
	srv := startOnMemory(t)
	svcs := clientset(t, srv).CoreV1().Services("default")
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.20", Ports: []corev1.ServicePort{{Port: 80}}}}
	_, err := svcs.Create(t.Context(), svc, metav1.CreateOptions{})
	require.NoError(t, err)
	snap, err := srv.Snapshot()
	require.NoError(t, err)
	require.NoError(t, svcs.Delete(t.Context(), "web", metav1.DeleteOptions{}))
	require.NoError(t, srv.Restore(t.Context(), snap))
	other := svc.DeepCopy()
	other.Name = "other"
	_, err = svcs.Create(t.Context(), other, metav1.CreateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "10.0.0.20 is the restored service's: %v", err)
}

// What a restore deleted frees its cluster IP and node port, as on a new
// server: a pooled server's next test may ask for them.
func TestRestoreFreesServiceAllocations(t *testing.T) {
	t.Parallel()
	srv := startOnMemory(t)
	svcs := clientset(t, srv).CoreV1().Services("default")
	snap, err := srv.Snapshot()
	require.NoError(t, err)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
		ClusterIP: "10.0.0.30", Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080}}}}
	_, err = svcs.Create(t.Context(), svc, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, srv.Restore(t.Context(), snap))
	_, err = svcs.Create(t.Context(), svc, metav1.CreateOptions{})
	assert.NoError(t, err, "10.0.0.30 and 30080 are free again")
}

// startOnMemory starts a server on storage/memory, whatever backend
// apiservertest.Start would choose (apiservertest.EtcdEnv): snapshots are
// the memory backend's.
func startOnMemory(t *testing.T, opts ...apiservertest.Option) *apiserver.Server {
	b := memory.NewBackend(memory.Options{})
	t.Cleanup(func() { _ = b.Close() })
	return apiservertest.Start(t, append(opts, apiservertest.WithOptions(apiserver.Options{Storage: b}))...)
}
