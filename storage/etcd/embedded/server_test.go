package embedded_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/storage/etcd"
	"github.com/kubeembed/apiserver/storage/etcd/embedded"
)

var widgets = schema.GroupVersionResource{Group: "example.kubeembed.dev", Version: "v1", Resource: "widgets"}

// startOn starts a server on an embedded etcd in dir; the test's cleanup
// closes it (Close of the server, then of the backend) unless stop is
// called first.
func startOn(t *testing.T, dir string, opts apiserver.Options) (srv *apiserver.Server, stop func()) {
	t.Helper()
	b, err := embedded.NewBackend(t.Context(), embedded.Options{DataDir: dir}, etcd.Options{})
	require.NoError(t, err)
	opts.Storage, opts.CertDir = b, filepath.Join(dir, "pki")
	srv, err = apiserver.New(opts)
	require.NoError(t, err)
	closed := false
	stop = func() {
		if !closed {
			closed = true
			assert.NoError(t, srv.Close())
			assert.NoError(t, b.Close())
		}
	}
	t.Cleanup(stop)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	require.NoError(t, srv.Start(ctx))
	return srv, stop
}

// TestRestart writes 1,000 objects and a custom resource, stops the server
// and its etcd, starts both again on the same data directory: everything is
// there, resourceVersions go on from where they were, and a watch from the
// last resourceVersion seen resumes.
func TestRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv, stop := startOn(t, dir, apiserver.Options{CRDPaths: []string{"../../../testdata/crds"}})
	client, dyn := clients(t, srv)
	const n = 1000
	createConfigMaps(t, client, n)
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.kubeembed.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "default"},
		"spec":     map[string]any{"size": int64(1), "maxSize": int64(3)},
	}}
	_, err := dyn.Resource(widgets).Namespace("default").Create(t.Context(), w, metav1.CreateOptions{})
	require.NoError(t, err)
	list, err := client.CoreV1().ConfigMaps("restart").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	lastRV := list.ResourceVersion
	stop()

	srv, _ = startOn(t, dir, apiserver.Options{CRDPaths: []string{"../../../testdata/crds"}})
	client, dyn = clients(t, srv)
	list, err = client.CoreV1().ConfigMaps("restart").List(t.Context(), metav1.ListOptions{LabelSelector: "test=restart"})
	require.NoError(t, err)
	assert.Len(t, list.Items, n)
	_, err = dyn.Resource(widgets).Namespace("default").Get(t.Context(), "w", metav1.GetOptions{})
	require.NoError(t, err)

	watcher, err := client.CoreV1().ConfigMaps("restart").Watch(t.Context(), metav1.ListOptions{ResourceVersion: lastRV})
	require.NoError(t, err)
	defer watcher.Stop()
	created, err := client.CoreV1().ConfigMaps("restart").Create(t.Context(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Greater(t, rv(t, created.ResourceVersion), rv(t, lastRV), "resourceVersions go on")
	select {
	case ev := <-watcher.ResultChan():
		require.Equal(t, watch.Added, ev.Type, "%v", ev.Object)
		assert.Equal(t, "after", ev.Object.(*corev1.ConfigMap).Name)
	case <-time.After(30 * time.Second):
		t.Fatal("the watch from the last resourceVersion saw nothing")
	}
}

func clients(t *testing.T, srv *apiserver.Server) (kubernetes.Interface, *dynamic.DynamicClient) {
	client, err := srv.Clientset()
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(srv.RESTConfig())
	require.NoError(t, err)
	return client, dyn
}

// createConfigMaps creates n ConfigMaps in namespace "restart", 8 at a
// time.
func createConfigMaps(t *testing.T, client kubernetes.Interface, n int) {
	_, err := client.CoreV1().Namespaces().Create(t.Context(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "restart"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	var g errgroup.Group
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			_, err := client.CoreV1().ConfigMaps("restart").Create(t.Context(), &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%04d", i), Labels: map[string]string{"test": "restart"}}}, metav1.CreateOptions{})
			return err
		})
	}
	require.NoError(t, g.Wait())
}

func rv(t *testing.T, s string) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return v
}

// Two servers on one etcd with different prefixes never see each other's
// objects: each has its own namespaces, its own revision of what it wrote,
// and a watch of one sees nothing of the other.
func TestTwoServersTwoPrefixes(t *testing.T) {
	t.Parallel()
	member, err := embedded.Start(t.Context(), embedded.Options{UnsafeNoFsync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = member.Close() })
	start := func(prefix string) kubernetes.Interface {
		return startOnEtcd(t, etcd.Options{Servers: member.ClientURLs(), Prefix: prefix})
	}
	a, b := start("/team-a"), start("/team-b")
	w, err := b.CoreV1().ConfigMaps("default").Watch(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	defer w.Stop()
	_, err = a.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "only-a"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = a.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = b.CoreV1().Namespaces().Get(t.Context(), "only-a", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
	_, err = b.CoreV1().ConfigMaps("default").Get(t.Context(), "a", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
	// b's own write is the first event its watch sees.
	_, err = b.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-w.ResultChan():
			if cm := ev.Object.(*corev1.ConfigMap); cm.Name != "kube-root-ca.crt" {
				assert.Equal(t, "b", cm.Name)
				return
			}
		case <-timeout:
			t.Fatal("b's watch saw nothing")
		}
	}
}

// startOnEtcd starts a server on an etcd backend of opts, both closed when
// the test ends, and returns a client of it.
func startOnEtcd(t *testing.T, opts etcd.Options) kubernetes.Interface {
	b, err := etcd.New(t.Context(), opts)
	require.NoError(t, err)
	srv, err := apiserver.New(apiserver.Options{Storage: b})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close(); _ = b.Close() })
	require.NoError(t, srv.Start(t.Context()))
	c, err := srv.Clientset()
	require.NoError(t, err)
	return c
}
