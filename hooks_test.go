package apiserver_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/storage/memory"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// fetch returns the status, headers and body of a GET of path, anonymous
// (cfg without credentials) or authenticated.
func fetch(t *testing.T, cfg *rest.Config, path string) (int, http.Header, string) {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	resp, err := hc.Get(cfg.Host + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(body)
}

// get returns the status and body of a GET of path.
func get(t *testing.T, cfg *rest.Config, path string) (int, string) {
	t.Helper()
	code, _, body := fetch(t, cfg, path)
	return code, body
}

// hooksListed returns the post-start hooks a verbose health listing
// (/healthz, /livez, /readyz) names.
func hooksListed(t *testing.T, cfg *rest.Config, path string) []string {
	t.Helper()
	code, body := get(t, cfg, path+"?verbose")
	require.Equal(t, http.StatusOK, code, body)
	var hooks []string
	for _, line := range strings.Split(body, "\n") {
		if name, ok := strings.CutPrefix(line, "[+]poststarthook/"); ok {
			hooks = append(hooks, strings.TrimSuffix(name, " ok"))
		}
	}
	return hooks
}

// The checks and hooks kube-apiserver v1.37.2 reports by name, that apply
// to a server without nodes (docs/architecture.md lists the others).
func TestHealthChecksByName(t *testing.T) {
	t.Parallel()
	cfg := apiservertest.Start(t).RESTConfig()
	hooks := []string{"start-apiserver-admission-initializer", "generic-apiserver-start-informers",
		"storage-object-count-tracker-hook", "start-apiextensions-informers", "start-apiextensions-controllers",
		"crd-informer-synced", "start-system-namespaces-controller", "start-kube-apiserver-identity-lease-controller",
		"start-kube-apiserver-identity-lease-garbage-collector", "storage-readiness", "start-legacy-token-tracking-controller",
		"start-cluster-authentication-info-controller",
		"scheduling/bootstrap-system-priority-classes", "bootstrap-controller", "start-kubernetes-service-cidr-controller", "start-service-ip-repair-controllers",
		"start-kube-aggregator-informers", "apiservice-status-local-available-controller", "apiservice-status-remote-available-controller",
		"apiservice-registration-controller", "priority-and-fairness-config-consumer", "priority-and-fairness-filter",
		"priority-and-fairness-config-producer",
		"apiservice-discovery-controller", "kube-apiserver-autoregistration", "apiservice-openapiv3-controller",
		// Required by Kubernetes' e2e "health handlers should contain
		// necessary checks" (test/e2e/apimachinery/health_handlers.go).
		"apiservice-openapi-controller"}
	for path, checks := range map[string][]string{
		// autoregister-completion in all three, as kube-apiserver v1.37.2
		// lists it (a boot-sequence check).
		"/healthz": {"ping", "log", "loopback-serving-certificate", "etcd", "autoregister-completion"},
		"/livez":   {"ping", "log", "loopback-serving-certificate", "etcd", "autoregister-completion"},
		"/readyz":  {"ping", "log", "etcd", "etcd-readiness", "informer-sync", "autoregister-completion", "shutdown"},
	} {
		code, body := get(t, cfg, path+"?verbose")
		require.Equal(t, http.StatusOK, code, body)
		for _, c := range checks {
			assert.Contains(t, body, "[+]"+c+" ok\n", path)
		}
		for _, h := range hooks {
			assert.Contains(t, body, "[+]poststarthook/"+h+" ok\n", path)
		}
		assert.True(t, strings.HasSuffix(body, path[1:]+" check passed\n"), body)
	}
	_, body := get(t, cfg, "/readyz?verbose")
	assert.NotContains(t, body, "loopback-serving-certificate", "of /healthz and /livez only, as kube-apiserver's")
	code, body := get(t, cfg, "/readyz/etcd")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok", body)
	_, body = get(t, cfg, "/readyz?verbose&exclude=etcd")
	assert.Contains(t, body, "[+]etcd excluded: ok\n")
	code, _ = get(t, cfg, "/readyz/no-such-check")
	assert.Equal(t, http.StatusNotFound, code)
}

// Every check a verbose health listing names has its own path, listed at
// the root and answering ok, as kube-apiserver serves them, on a server
// whose core tier shares an earlier server's OpenAPI (every server but the
// process's first: its tier does not install the paths that the
// aggregator serves in front of it).
func TestEveryHealthCheckHasItsPath(t *testing.T) {
	t.Parallel()
	cfg := apiservertest.Start(t, apiservertest.WithNewServer()).RESTConfig()
	_, root := get(t, cfg, "/")
	var listed struct{ Paths []string }
	require.NoError(t, json.Unmarshal([]byte(root), &listed), "%.300s", root)
	for _, path := range []string{"/healthz", "/livez", "/readyz"} {
		code, body := get(t, cfg, path+"?verbose")
		require.Equal(t, http.StatusOK, code, body)
		checks := 0
		for _, line := range strings.Split(body, "\n") {
			name, ok := strings.CutPrefix(line, "[+]")
			if !ok {
				continue
			}
			checks++
			name = strings.TrimSuffix(name, " ok")
			assert.Contains(t, listed.Paths, path+"/"+name)
			code, body := get(t, cfg, path+"/"+name)
			assert.Equal(t, http.StatusOK, code, path+"/"+name)
			assert.Equal(t, "ok", body, path+"/"+name)
		}
		assert.Greater(t, checks, 40, path)
	}
}

// The objects the hooks create exist when Start returns, as on a cluster.
// On a new server: a reused one is restored to its snapshot after start,
// whose identity Lease renewal and legacy-token "since" date are as old as
// the server.
func TestHookObjects(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t, apiservertest.WithNewServer())
	c := clientset(t, srv)
	ctx := t.Context()

	leases, err := c.CoordinationV1().Leases(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: "apiserver.kubernetes.io/identity=kube-apiserver"})
	require.NoError(t, err)
	require.Len(t, leases.Items, 1, "the server's identity lease")
	lease := leases.Items[0]
	assert.True(t, strings.HasPrefix(lease.Name, "apiserver-"), lease.Name)
	assert.True(t, strings.HasPrefix(*lease.Spec.HolderIdentity, lease.Name+"_"), *lease.Spec.HolderIdentity)
	assert.Equal(t, int32(3600), *lease.Spec.LeaseDurationSeconds)
	assert.WithinDuration(t, time.Now(), lease.Spec.RenewTime.Time, time.Minute)

	cm, err := c.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, "kube-apiserver-legacy-service-account-token-tracking", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, time.Now().UTC().Format(time.DateOnly), cm.Data["since"])

	u, err := url.Parse(srv.URL())
	require.NoError(t, err)
	p, err := strconv.Atoi(u.Port())
	require.NoError(t, err)
	port := int32(p)
	ep, err := c.CoreV1().Endpoints("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: apiserver.LocalEndpointIP}},
		Ports: []corev1.EndpointPort{{Name: "https", Port: port, Protocol: corev1.ProtocolTCP}}}}, ep.Subsets)
	slice, err := c.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "kubernetes", slice.Labels["kubernetes.io/service-name"])
	assert.Equal(t, []string{apiserver.LocalEndpointIP}, slice.Endpoints[0].Addresses)
	assert.Equal(t, port, *slice.Ports[0].Port)
}

// waitFor watches objects until one matches cond, for at most 10 s.
func waitFor(t *testing.T, w watch.Interface, cond func(watch.Event) bool) {
	t.Helper()
	defer w.Stop()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			require.True(t, ok, "watch closed")
			if cond(ev) {
				return
			}
		case <-timeout:
			t.Fatal("condition not met within 10 s")
		}
	}
}

// What the hooks create, they keep: a deleted system namespace comes back,
// the kubernetes endpoints are put back.
func TestHooksKeepTheirObjects(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	ctx := t.Context()
	keepEndpoints(t, c)

	// The namespace controller deletes it; the hook puts it back.
	ns, err := c.CoreV1().Namespaces().Get(ctx, corev1.NamespaceNodeLease, metav1.GetOptions{})
	require.NoError(t, err)
	w, err := c.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{ResourceVersion: ns.ResourceVersion,
		FieldSelector: fields.OneTermEqualSelector("metadata.name", ns.Name).String()})
	require.NoError(t, err)
	require.NoError(t, c.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}))
	deleted := false
	waitFor(t, w, func(ev watch.Event) bool {
		deleted = deleted || ev.Type == watch.Deleted
		return deleted && ev.Type == watch.Added
	})
}

func keepEndpoints(t *testing.T, c kubernetes.Interface) {
	t.Helper()
	ctx := t.Context()
	ep, err := c.CoreV1().Endpoints("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	require.NoError(t, err)
	want := ep.Subsets
	w, err := c.CoreV1().Endpoints("default").Watch(ctx, metav1.ListOptions{ResourceVersion: ep.ResourceVersion,
		FieldSelector: fields.OneTermEqualSelector("metadata.name", "kubernetes").String()})
	require.NoError(t, err)
	ep.Subsets[0].Addresses[0].IP = "10.9.9.9"
	_, err = c.CoreV1().Endpoints("default").Update(ctx, ep, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitFor(t, w, func(ev watch.Event) bool {
		e, ok := ev.Object.(*corev1.Endpoints)
		return ok && assert.ObjectsAreEqual(want, e.Subsets)
	})
}

// apiservice-status-remote-available-controller reports an APIService whose
// Service is missing as kube-apiserver does.
func TestRemoteAPIServiceUnavailable(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c, err := apiregistrationclient.NewForConfig(srv.RESTConfig())
	require.NoError(t, err)
	_, err = c.ApiregistrationV1().APIServices().Create(t.Context(), &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1beta1.metrics.k8s.io"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "metrics.k8s.io", Version: "v1beta1", GroupPriorityMinimum: 100, VersionPriority: 100,
			InsecureSkipTLSVerify: true, Service: &apiregistrationv1.ServiceReference{Namespace: "kube-system", Name: "metrics-server"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c2 *assert.CollectT) {
		svc, err := c.ApiregistrationV1().APIServices().Get(t.Context(), "v1beta1.metrics.k8s.io", metav1.GetOptions{})
		require.NoError(c2, err)
		require.Len(c2, svc.Status.Conditions, 1)
		cond := svc.Status.Conditions[0]
		assert.Equal(c2, apiregistrationv1.Available, cond.Type)
		assert.Equal(c2, apiregistrationv1.ConditionFalse, cond.Status)
		assert.Equal(c2, "ServiceNotFound", cond.Reason)
		assert.Equal(c2, `service/metrics-server in "kube-system" is not present`, cond.Message)
	}, 10*time.Second, 10*time.Millisecond)
}

// start-service-ip-repair-controllers: a server on storage that already
// holds services does not hand their cluster IPs and node ports out again.
func TestServiceIPRepair(t *testing.T) {
	t.Parallel()
	backend := memory.NewBackend(memory.Options{})
	t.Cleanup(func() { _ = backend.Close() })
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
		ClusterIP: "10.0.0.50", Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080}}}}
	first := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Storage: backend}))
	_, err := clientset(t, first).CoreV1().Services("default").Create(t.Context(), svc, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, first.Close())

	second := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Storage: backend}))
	c := clientset(t, second).CoreV1().Services("default")
	_, err = c.Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err, "the second server serves the first one's objects")
	kubernetes, err := c.Get(t.Context(), "kubernetes", metav1.GetOptions{})
	require.NoError(t, err)
	u, err := url.Parse(second.URL())
	require.NoError(t, err)
	assert.Equal(t, u.Port(), kubernetes.Spec.Ports[0].TargetPort.String(), "default/kubernetes points at the server that runs")
	same := svc.DeepCopy()
	same.Name = "web-2"
	_, err = c.Create(t.Context(), same, metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "the cluster IP is taken: %v", err)
	assert.ErrorContains(t, err, "10.0.0.50")
	same.Spec.ClusterIP = ""
	_, err = c.Create(t.Context(), same, metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "the node port is taken: %v", err)
	assert.ErrorContains(t, err, "30080")
}
