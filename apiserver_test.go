package apiserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

var widgetGVR = schema.GroupVersionResource{Group: "example.kubeembed.dev", Version: "v1", Resource: "widgets"}

func clientset(t *testing.T, srv *apiserver.Server) kubernetes.Interface {
	t.Helper()
	c, err := srv.Clientset()
	require.NoError(t, err)
	return c
}

// statusOf returns the metav1.Status of an API error.
func statusOf(t *testing.T, err error) metav1.Status {
	t.Helper()
	var se apierrors.APIStatus
	require.ErrorAs(t, err, &se, "want an API status error, got %v", err)
	return se.Status()
}

func TestDefaultNamespacesExistWhenStartReturns(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	for _, name := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		ns, err := c.CoreV1().Namespaces().Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err, name)
		assert.Equal(t, corev1.NamespaceActive, ns.Status.Phase, name)
		assert.Equal(t, name, ns.Labels["kubernetes.io/metadata.name"], name)
		assert.Equal(t, []corev1.FinalizerName{corev1.FinalizerKubernetes}, ns.Spec.Finalizers, name)
	}
}

func TestConfigMapCRUD(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	cms := clientset(t, srv).CoreV1().ConfigMaps("default")
	ctx := t.Context()

	created, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Labels: map[string]string{"app": "demo"}},
		Data:       map[string]string{"mode": "fast"},
	}, metav1.CreateOptions{FieldManager: "test"})
	require.NoError(t, err)
	assert.NotEmpty(t, created.UID)
	assert.NotEmpty(t, created.ResourceVersion)
	assert.False(t, created.CreationTimestamp.IsZero())
	require.Len(t, created.ManagedFields, 1)
	assert.Equal(t, "test", created.ManagedFields[0].Manager)

	got, err := cms.Get(ctx, "settings", metav1.GetOptions{})
	require.NoError(t, err)
	if diff := cmp.Diff(created, got); diff != "" {
		t.Errorf("get differs from create (-create +get):\n%s", diff)
	}

	got.Data["mode"] = "slow"
	updated, err := cms.Update(ctx, got, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "slow", updated.Data["mode"])
	assert.NotEqual(t, created.ResourceVersion, updated.ResourceVersion)

	// A stale resourceVersion conflicts.
	_, err = cms.Update(ctx, created, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsConflict(err), "stale update: %v", err)

	_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsAlreadyExists(err), "duplicate create: %v", err)

	list, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "app=demo"})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)

	require.NoError(t, cms.Delete(ctx, "settings", metav1.DeleteOptions{}))
	_, err = cms.Get(ctx, "settings", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "get after delete: %v", err)
}

func TestValidationErrors(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	ctx := t.Context()
	yes := true

	tests := []struct {
		name  string
		do    func() error
		field string
	}{
		{"configmap name", func() error {
			_, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "Bad_Name"}}, metav1.CreateOptions{})
			return err
		}, "metadata.name"},
		{"configmap key", func() error {
			_, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "k"}, Data: map[string]string{"a b": "x"}}, metav1.CreateOptions{})
			return err
		}, "data[a b]"},
		{"namespace name", func() error {
			_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a.b"}}, metav1.CreateOptions{})
			return err
		}, "metadata.name"},
		{"tls secret keys", func() error {
			_, err := c.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tls"}, Type: corev1.SecretTypeTLS}, metav1.CreateOptions{})
			return err
		}, "data[tls.crt]"},
		{"lease duration", func() error {
			d := int32(0)
			_, err := c.CoordinationV1().Leases("default").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l"}, Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: &d}}, metav1.CreateOptions{})
			return err
		}, "spec.leaseDurationSeconds"},
		{"immutable configmap", func() error {
			cm, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "frozen"}, Data: map[string]string{"a": "1"}, Immutable: &yes}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			cm.Data["a"] = "2"
			_, err = c.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{})
			return err
		}, "data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do()
			require.Error(t, err)
			st := statusOf(t, err)
			assert.Equal(t, int32(http.StatusUnprocessableEntity), st.Code, st.Message)
			assert.Equal(t, metav1.StatusReasonInvalid, st.Reason)
			require.NotNil(t, st.Details)
			var fields []string
			for _, c := range st.Details.Causes {
				fields = append(fields, c.Field)
			}
			assert.Contains(t, fields, tt.field, st.Message)
		})
	}
}

func TestSecretDefaultsAndStringData(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	s, err := clientset(t, srv).CoreV1().Secrets("default").Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		StringData: map[string]string{"user": "admin"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.SecretTypeOpaque, s.Type)
	assert.Equal(t, map[string][]byte{"user": []byte("admin")}, s.Data)
	assert.Empty(t, s.StringData)
}

// The API's side of namespace deletion, without the namespace controller
// (which would finish the deletion the test makes by hand).
func TestNamespaceLifecycle(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Controllers: []controllers.Name{"*", "-" + controllers.Namespace}}))
	c := clientset(t, srv)
	ctx := t.Context()

	_, err := c.CoreV1().ConfigMaps("missing").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsNotFound(err), "create in missing namespace: %v", err)
	assert.Equal(t, `namespaces "missing" not found`, statusOf(t, err).Message)

	_, err = c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, c.CoreV1().Namespaces().Delete(ctx, "team", metav1.DeleteOptions{}))
	ns, err := c.CoreV1().Namespaces().Get(ctx, "team", metav1.GetOptions{})
	require.NoError(t, err, "a namespace with finalizers stays until they are removed")
	assert.Equal(t, corev1.NamespaceTerminating, ns.Status.Phase)
	assert.NotNil(t, ns.DeletionTimestamp)

	_, err = c.CoreV1().ConfigMaps("team").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "create in terminating namespace: %v", err)

	// Updates of a terminating namespace keep it while it has finalizers.
	ns.Labels["touched"] = "yes"
	ns, err = c.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{})
	require.NoError(t, err)

	// Removing the last finalizer through /finalize removes the namespace.
	ns.Spec.Finalizers = nil
	_, err = c.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = c.CoreV1().Namespaces().Get(ctx, "team", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "after finalize: %v", err)

	err = c.CoreV1().Namespaces().Delete(ctx, "kube-system", metav1.DeleteOptions{})
	assert.True(t, apierrors.IsForbidden(err), "deleting kube-system: %v", err)
}

// Namespaces have no deletecollection and /finalize is update only, as
// kube-apiserver serves them (its discovery lists those verbs).
func TestNamespaceVerbs(t *testing.T) {
	t.Parallel()
	c := clientset(t, apiservertest.Start(t))
	list, err := c.Discovery().ServerResourcesForGroupVersion("v1")
	require.NoError(t, err)
	verbs := map[string][]string{}
	for _, r := range list.APIResources {
		verbs[r.Name] = r.Verbs
	}
	assert.Equal(t, []string{"create", "delete", "get", "list", "patch", "update", "watch"}, verbs["namespaces"])
	assert.Equal(t, []string{"update"}, verbs["namespaces/finalize"])
	// client-go's typed client has no such call either: a raw DELETE of the
	// collection.
	err = c.CoreV1().RESTClient().Delete().Resource("namespaces").Do(t.Context()).Error()
	assert.True(t, apierrors.IsMethodNotSupported(err), "deletecollection of namespaces: %v", err)
}

func TestWatchAndPaging(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	cms := clientset(t, srv).CoreV1().ConfigMaps("default")
	ctx := t.Context()

	w, err := cms.Watch(ctx, metav1.ListOptions{LabelSelector: "batch=1"})
	require.NoError(t, err)
	defer w.Stop()

	const n = 25
	for i := range n {
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("cm-%02d", i), Labels: map[string]string{"batch": "1"}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	deadline := time.After(10 * time.Second)
	for i := range n {
		select {
		case ev := <-w.ResultChan():
			require.Equal(t, watch.Added, ev.Type)
			assert.Equal(t, fmt.Sprintf("cm-%02d", i), ev.Object.(*corev1.ConfigMap).Name)
		case <-deadline:
			t.Fatalf("got %d of %d watch events", i, n)
		}
	}

	var names []string
	opts := metav1.ListOptions{Limit: 10, LabelSelector: "batch=1"}
	pages := 0
	for {
		page, err := cms.List(ctx, opts)
		require.NoError(t, err)
		pages++
		for _, cm := range page.Items {
			names = append(names, cm.Name)
		}
		if page.Continue == "" {
			break
		}
		opts.Continue = page.Continue
	}
	assert.Equal(t, 3, pages)
	assert.Len(t, names, n)

	_, err = cms.List(ctx, metav1.ListOptions{Limit: 1, Continue: "not-a-token"})
	require.Error(t, err)
	assert.True(t, apierrors.IsBadRequest(err), "bad continue token: %v", err)

	_, err = cms.List(ctx, metav1.ListOptions{FieldSelector: "data.foo=bar"})
	require.Error(t, err)
	assert.True(t, apierrors.IsBadRequest(err), "unsupported field selector: %v", err)
}

func TestTableOutput(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	_, err := c.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "two"}, Data: map[string]string{"a": "1", "b": "2"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	raw, err := c.CoreV1().RESTClient().Get().Namespace("default").Resource("configmaps").
		Param("fieldSelector", "metadata.name!=kube-root-ca.crt").SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(t.Context())
	require.NoError(t, err)
	var table metav1.Table
	require.NoError(t, json.Unmarshal(raw, &table))
	var cols []string
	for _, c := range table.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	assert.Equal(t, []string{"Name", "Data", "Age"}, cols)
	require.Len(t, table.Rows, 1)
	assert.Equal(t, "two", table.Rows[0].Cells[0])
	assert.EqualValues(t, 2, table.Rows[0].Cells[1])

	// A DaemonSet's row carries its metadata as kube-apiserver's internal
	// object has it: without the annotation apps/v1 keeps its template
	// generation in, which its GET shows.
	ds, err := c.AppsV1().DaemonSets("default").Create(t.Context(), &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "d"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"deprecated.daemonset.template.generation": "1"}, ds.Annotations)
	raw, err = c.AppsV1().RESTClient().Get().Namespace("default").Resource("daemonsets").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(t.Context())
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &table))
	require.Len(t, table.Rows, 1)
	var row metav1.PartialObjectMetadata
	require.NoError(t, json.Unmarshal(table.Rows[0].Object.Raw, &row))
	assert.Equal(t, "d", row.Name)
	assert.Empty(t, row.Annotations)
}

func TestDiscovery(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t, apiservertest.WithCRDPaths("testdata/crds"))
	disco, err := srv.DiscoveryClient()
	require.NoError(t, err)
	_, lists, err := disco.ServerGroupsAndResources()
	require.NoError(t, err)
	found := map[string]metav1.APIResource{}
	for _, l := range lists {
		for _, r := range l.APIResources {
			found[l.GroupVersion+"/"+r.Name] = r
		}
	}
	for _, want := range []string{
		"v1/configmaps", "v1/namespaces", "v1/namespaces/status", "v1/secrets", "v1/serviceaccounts", "v1/events",
		"apps/v1/deployments", "apps/v1/deployments/status", "apps/v1/deployments/scale",
		"coordination.k8s.io/v1/leases", "events.k8s.io/v1/events", "apiextensions.k8s.io/v1/customresourcedefinitions",
		"apiregistration.k8s.io/v1/apiservices", "example.kubeembed.dev/v1/widgets",
	} {
		assert.Contains(t, found, want)
	}
	assert.Equal(t, []string{"cm"}, found["v1/configmaps"].ShortNames)
	assert.Equal(t, []string{"all"}, found["apps/v1/deployments"].Categories)
	assert.Equal(t, []string{"wd"}, found["example.kubeembed.dev/v1/widgets"].ShortNames)
}

func TestCRDValidationDefaultingAndFirstCreate(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t, apiservertest.WithCRDPaths("testdata/crds/widgets.yaml"))
	dyn, err := srv.DynamicClient()
	require.NoError(t, err)
	widgets := dyn.Resource(widgetGVR).Namespace("default")
	ctx := t.Context()

	widget := func(name string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.kubeembed.dev/v1", "kind": "Widget",
			"metadata": map[string]any{"name": name}, "spec": spec,
		}}
	}
	start := time.Now()
	created, err := widgets.Create(ctx, widget("small", map[string]any{"size": int64(3)}), metav1.CreateOptions{})
	require.NoError(t, err)
	// The first create must not pay apiextensions' 2 s "just established" delay.
	assert.Less(t, time.Since(start), 2*time.Second, "first custom resource create")
	maxSize, _, _ := unstructured.NestedInt64(created.Object, "spec", "maxSize")
	assert.EqualValues(t, 10, maxSize, "schema default")

	for _, tt := range []struct {
		name, field string
		spec        map[string]any
	}{
		{"missing-required", "spec.size", map[string]any{}},
		{"enum", "spec.color", map[string]any{"size": int64(1), "color": "pink"}},
		{"cel", "spec", map[string]any{"size": int64(11)}},
	} {
		_, err := widgets.Create(ctx, widget(tt.name, tt.spec), metav1.CreateOptions{})
		require.Error(t, err, tt.name)
		st := statusOf(t, err)
		assert.Equal(t, int32(http.StatusUnprocessableEntity), st.Code, tt.name)
		require.NotNil(t, st.Details, tt.name)
		var fields []string
		for _, c := range st.Details.Causes {
			fields = append(fields, c.Field)
		}
		assert.Contains(t, fields, tt.field, "%s: %s", tt.name, st.Message)
	}
}

func TestLeaderElection(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	testLeaderElection(t, srv)
}

func TestParallelServersAreIsolated(t *testing.T) {
	t.Parallel()
	const n = 8
	servers := make([]*apiserver.Server, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			srv, err := apiserver.New(apiserver.Options{})
			if err != nil {
				errs[i] = err
				return
			}
			servers[i] = srv
			errs[i] = srv.Start(t.Context())
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, s := range servers {
			if s != nil {
				assert.NoError(t, s.Close())
			}
		}
	})
	for i, err := range errs {
		require.NoError(t, err, "server %d", i)
	}
	for i, srv := range servers {
		c := clientset(t, srv)
		_, err := c.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("server-%d", i)}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for i, srv := range servers {
		list, err := clientset(t, srv).CoreV1().ConfigMaps("default").List(t.Context(),
			metav1.ListOptions{FieldSelector: "metadata.name!=kube-root-ca.crt"})
		require.NoError(t, err)
		require.Len(t, list.Items, 1, "server %d sees only its own objects", i)
		assert.Equal(t, fmt.Sprintf("server-%d", i), list.Items[0].Name)
	}
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	anon := &rest.Config{Host: srv.URL(), TLSClientConfig: rest.TLSClientConfig{CAData: srv.CACert()}}
	c, err := kubernetes.NewForConfig(anon)
	require.NoError(t, err)
	_, err = c.CoreV1().ConfigMaps("default").List(t.Context(), metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "anonymous list: %v", err)
	assert.Contains(t, statusOf(t, err).Message, `User "system:anonymous" cannot list resource "configmaps"`)

	bad := rest.CopyConfig(anon)
	bad.BearerToken = "wrong"
	c, err = kubernetes.NewForConfig(bad)
	require.NoError(t, err)
	_, err = c.CoreV1().ConfigMaps("default").List(t.Context(), metav1.ListOptions{})
	assert.True(t, apierrors.IsUnauthorized(err), "wrong token: %v", err)

	// /readyz and /version are public, as on a real cluster.
	hc, err := rest.HTTPClientFor(anon)
	require.NoError(t, err)
	for _, p := range []string{"/readyz", "/version"} {
		resp, err := hc.Get(srv.URL() + p)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, p)
	}
}

func TestKubeconfig(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	kc, err := srv.Kubeconfig()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, kc, 0o600))
	c := clientFromKubeconfig(t, path)
	v, err := c.Discovery().ServerVersion()
	require.NoError(t, err)
	assert.Equal(t, "1", v.Major)
	assert.Equal(t, "37", v.Minor)
	// The release of the staging modules kubeembed is built with, as
	// kube-apiserver of that release reports it; kubectl parses it.
	assert.Equal(t, "v1.37.2", v.GitVersion)
	_, err = utilversion.ParseSemantic(v.GitVersion)
	assert.NoError(t, err)
	assert.Equal(t, runtime.Version(), v.GoVersion)
}

func TestInvalidOptions(t *testing.T) {
	t.Parallel()
	_, err := apiserver.New(apiserver.Options{
		Port:        -1,
		BindAddress: "not-an-ip",
		CRDPaths:    []string{"testdata/does-not-exist", "testdata/bad/not-a-crd.yaml"},
	})
	require.Error(t, err)
	msg := err.Error()
	for _, want := range []string{"Port -1", `BindAddress "not-an-ip"`, "testdata/does-not-exist", "not-a-crd.yaml: document 1", "is not an apiextensions.k8s.io/v1 CustomResourceDefinition"} {
		assert.Contains(t, msg, want)
	}
}

func TestCRDRejectedByTheAPI(t *testing.T) {
	t.Parallel()
	srv, err := apiserver.New(apiserver.Options{CRDPaths: []string{"testdata/bad/invalid-crd.yaml"}})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, srv.Close()) })
	err = srv.Start(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "gadgets.example.kubeembed.dev")
	assert.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
}

func TestPortInUse(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	port := srv.URL()[strings.LastIndex(srv.URL(), ":")+1:]
	var p int
	_, err := fmt.Sscan(port, &p)
	require.NoError(t, err)
	_, err = apiserver.New(apiserver.Options{Port: p})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "address already in use")
}

func TestCloseTwice(t *testing.T) {
	t.Parallel()
	srv, err := apiserver.New(apiserver.Options{})
	require.NoError(t, err)
	require.NoError(t, srv.Start(t.Context()))
	addr := strings.TrimPrefix(srv.URL(), "https://")
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err, "the listener accepts before Close")
	_ = conn.Close()

	require.NoError(t, srv.Close())
	require.NoError(t, srv.Close())
	_, err = net.Dial("tcp", addr)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED, "the listener is closed")
}

func TestCloseUnstarted(t *testing.T) {
	t.Parallel()
	srv, err := apiserver.New(apiserver.Options{})
	require.NoError(t, err)
	require.NoError(t, srv.Close())
}

// A Start whose context ends before the server is ready returns its error,
// and Close then ends the server while its post-start hooks may still run.
// The process goes on: genericapiserver ends it (klog.Fatalf) when a hook
// returns an error, and the server's own hooks returned the stop's errors;
// until 2026-12-06 this exited the test process with status 255, saying
// nothing. Deadlines from 5 to 120 ms, so that some fall while the hooks
// run. (Goroutines: kubeembed's controllers that never ran are shut down,
// TestControllerSetShutsDownTheControllersThatNeverRan; the controllers
// the libraries make as the tiers are built, ~13 queues, keep theirs when
// the chain never ran, as their Run is what ends them.)
func TestCloseAfterAnInterruptedStart(t *testing.T) {
	t.Parallel()
	interrupted := 0
	for d := 5 * time.Millisecond; d <= 120*time.Millisecond; d += 5 * time.Millisecond {
		srv, err := apiserver.New(apiserver.Options{})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), d)
		if err := srv.Start(ctx); err != nil {
			require.ErrorIs(t, err, context.DeadlineExceeded)
			interrupted++
		}
		cancel()
		require.NoError(t, srv.Close())
	}
	require.NotZero(t, interrupted, "no Start was cut short: the test tested nothing")
}
