package apiserver_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// Discovery lists componentstatuses, nodes/proxy and services/proxy as
// kube-apiserver v1.37 does.
func TestDiscoveryOfProxiesAndComponentStatuses(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Profile: apiserver.ProfileEnvtest}))
	list, err := clientset(t, srv).Discovery().ServerResourcesForGroupVersion("v1")
	require.NoError(t, err)
	got := map[string]metav1.APIResource{}
	for _, r := range list.APIResources {
		got[r.Name] = r
	}
	proxyVerbs := metav1.Verbs{"create", "delete", "get", "patch", "update"}
	for _, want := range []metav1.APIResource{
		{Name: "componentstatuses", SingularName: "componentstatus", Kind: "ComponentStatus", ShortNames: []string{"cs"}, Verbs: metav1.Verbs{"get", "list"}},
		{Name: "nodes/proxy", Kind: "NodeProxyOptions", Verbs: proxyVerbs},
		{Name: "services/proxy", Namespaced: true, Kind: "ServiceProxyOptions", Verbs: proxyVerbs},
		{Name: "pods/proxy", Namespaced: true, Kind: "PodProxyOptions", Verbs: proxyVerbs},
	} {
		assert.Equal(t, want, got[want.Name])
	}
}

// services/proxy reaches what the test serves at a ready pod of the
// Service, by the Service's port name or number; the errors are
// kube-apiserver's.
func TestServiceProxy(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	ctx := t.Context()
	createWeb(t, c, "web-0")
	srv.Kubelet().HandleProxy("default", "web-0", 8080, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s from %s", r.Method, r.URL.Path, r.Header.Get("X-Forwarded-Uri"))
	}))
	serviceSlice(t, c, "web", func(s *discoveryv1.EndpointSlice) bool {
		return len(s.Endpoints) == 1 && *s.Endpoints[0].Conditions.Ready
	})
	services := c.CoreV1().Services("default")

	// The server reads EndpointSlices from its informer, as kube-apiserver
	// does: a few milliseconds behind the watch above.
	var got []byte
	var err error
	require.EventuallyWithT(t, func(t *assert.CollectT) {
		got, err = services.ProxyGet("", "web", "http", "hello", nil).DoRaw(ctx)
		assert.NoError(t, err)
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, "GET /hello from /api/v1/namespaces/default/services/web:http/proxy/hello", string(got))
	got, err = services.ProxyGet("http", "web", "80", "", nil).DoRaw(ctx)
	require.NoError(t, err)
	assert.Equal(t, "GET / from /api/v1/namespaces/default/services/http:web:80/proxy/", string(got))

	for _, tc := range []struct {
		name, port string
		code       int32
		message    string
	}{
		{"web", "", http.StatusServiceUnavailable, `no endpoints available for service "web"`}, // its only port has a name
		{"web", "81", http.StatusServiceUnavailable, `no service port 81 found for service "web"`},
		{"missing", "80", http.StatusNotFound, `services "missing" not found`},
		// Without a port number the Service is not read: it has no endpoints.
		{"missing", "", http.StatusServiceUnavailable, `no endpoints available for service "missing"`},
	} {
		_, err := services.ProxyGet("", tc.name, tc.port, "", nil).Stream(ctx)
		status := statusOf(t, err)
		assert.Equal(t, tc.code, status.Code, "%s:%s", tc.name, tc.port)
		assert.Equal(t, tc.message, status.Message, "%s:%s", tc.name, tc.port)
	}
}

// A Service whose pods are not ready has no endpoint to proxy to.
func TestServiceProxyWithoutReadyEndpoints(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	ctx := t.Context()
	_, err := c.CoreV1().Services("default").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "none"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "none"}, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	serviceSlice(t, c, "none", func(*discoveryv1.EndpointSlice) bool { return true })
	_, err = c.CoreV1().Services("default").ProxyGet("", "none", "80", "", nil).Stream(ctx)
	status := statusOf(t, err)
	assert.Equal(t, int32(http.StatusServiceUnavailable), status.Code)
	assert.Equal(t, `no endpoints available for service "none"`, status.Message)
}

// nodes/proxy reaches the node's (simulated) kubelet; an unknown node is
// a 404.
func TestNodeProxy(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	ctx := t.Context()
	pod, err := c.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{NodeName: "node-0", Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	srv.Kubelet().SetLogs("default", pod.Name, "app", "started\n")
	nodeProxy := func(node string, path ...string) ([]byte, error) {
		// Stream: its error is the Status the server answered.
		body, err := c.CoreV1().RESTClient().Get().Resource("nodes").Name(node).SubResource(append([]string{"proxy"}, path...)...).Stream(ctx)
		if err != nil {
			return nil, err
		}
		defer body.Close()
		return io.ReadAll(body)
	}

	got, err := nodeProxy("node-0", "containerLogs", "default", "p", "app")
	require.NoError(t, err)
	assert.Equal(t, "started\n", string(got))
	got, err = nodeProxy("node-0:10250", "containerLogs", "default", "p", "app")
	require.NoError(t, err)
	assert.Equal(t, "started\n", string(got))

	_, err = nodeProxy("node-0", "stats", "summary")
	assert.Equal(t, int32(http.StatusNotFound), statusOf(t, err).Code, "a path the simulated kubelet does not serve")
	_, err = nodeProxy("nope", "healthz")
	status := statusOf(t, err)
	assert.Equal(t, int32(http.StatusNotFound), status.Code)
	assert.Equal(t, `nodes "nope" not found`, status.Message)
	_, err = nodeProxy("node-0:10255", "healthz")
	status = statusOf(t, err)
	assert.Equal(t, int32(http.StatusServiceUnavailable), status.Code)
	assert.Contains(t, status.Message, "connect: connection refused", "another port of the node, where nothing listens")
}

// componentstatuses: the in-process scheduler and kube-controller-manager's
// controllers are healthy when they run; memory storage is no etcd.
func TestComponentStatuses(t *testing.T) {
	t.Parallel()
	for profile, want := range map[apiserver.Profile][]corev1.ComponentStatus{
		apiserver.ProfileCluster: {healthy("controller-manager"), healthy("scheduler")},
		apiserver.ProfileEnvtest: {
			unhealthy("controller-manager", "kube-controller-manager does not run: none of its controllers is in this server's Controllers"),
			unhealthy("scheduler", `kube-scheduler does not run: kubeembed's scheduler (controller "scheduler") is not in this server's Controllers`),
		},
	} {
		t.Run(string(profile), func(t *testing.T) {
			t.Parallel()
			srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Profile: profile}))
			c := clientset(t, srv)
			list, err := c.CoreV1().ComponentStatuses().List(t.Context(), metav1.ListOptions{})
			require.NoError(t, err)
			scheduler := want[1]
			if os.Getenv(apiservertest.EtcdEnv) != "" { // stored in etcd: etcd-0 too, listed by name
				want = []corev1.ComponentStatus{want[0], healthy("etcd-0"), scheduler}
			}
			assert.Equal(t, want, list.Items)
			got, err := c.CoreV1().ComponentStatuses().Get(t.Context(), "scheduler", metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, scheduler, *got)
			_, err = c.CoreV1().ComponentStatuses().Get(t.Context(), "etcd-1", metav1.GetOptions{})
			status := statusOf(t, err)
			assert.Equal(t, int32(http.StatusNotFound), status.Code)
			assert.Equal(t, `componentstatus "etcd-1" not found`, status.Message)
			list, err = c.CoreV1().ComponentStatuses().List(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=scheduler"})
			require.NoError(t, err)
			assert.Equal(t, []corev1.ComponentStatus{scheduler}, list.Items)
		})
	}
}

// kubectl get cs prints kube-apiserver's table, and the deprecation
// warning.
func TestKubectlGetComponentStatuses(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Profile: apiserver.ProfileEnvtest}))
	kubectl := kubectlFor(t, srv)
	stdout, stderr, err := kubectl("get", "cs")
	require.NoError(t, err, stderr)
	assert.Equal(t, "Warning: v1 ComponentStatus is deprecated in v1.19+", stderr)
	// With KUBEEMBED_TEST_ETCD, etcd-0 is healthy between the two.
	stdout = regexp.MustCompile(`(?m)^etcd-0 .*\n`).ReplaceAllString(stdout, "")
	assert.Equal(t, ""+
		"NAME                 STATUS      MESSAGE   ERROR\n"+
		`controller-manager   Unhealthy             kube-controller-manager does not run: none of its controllers is in this server's Controllers`+"\n"+
		`scheduler            Unhealthy             kube-scheduler does not run: kubeembed's scheduler (controller "scheduler") is not in this server's Controllers`,
		stdout)
}

func healthy(name string) corev1.ComponentStatus {
	return corev1.ComponentStatus{ObjectMeta: metav1.ObjectMeta{Name: name},
		Conditions: []corev1.ComponentCondition{{Type: corev1.ComponentHealthy, Status: corev1.ConditionTrue, Message: "ok"}}}
}

func unhealthy(name, err string) corev1.ComponentStatus {
	return corev1.ComponentStatus{ObjectMeta: metav1.ObjectMeta{Name: name},
		Conditions: []corev1.ComponentCondition{{Type: corev1.ComponentHealthy, Status: corev1.ConditionFalse, Error: err}}}
}

// The bootstrap roles name services/proxy (edit and admin may use it, view
// may not), nodes/proxy (system:kubelet-api-admin) and no role but
// cluster-admin's "*" names componentstatuses, as kube-apiserver's.
func TestProxiesAndComponentStatusesRBAC(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	admin := clientset(t, srv)
	for user, role := range map[string]string{"editor": "edit", "viewer": "view"} {
		bind(t, admin, "default", user, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user})
	}
	bind(t, admin, "", "kubelet-api", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "apiserver-kubelet-client"})
	editor, viewer := apiservertest.ClientsetFor(t, srv, "editor"), apiservertest.ClientsetFor(t, srv, "viewer")
	kubeletClient := apiservertest.ClientsetFor(t, srv, "apiserver-kubelet-client")
	ctx := t.Context()

	_, err := editor.CoreV1().Services("default").ProxyGet("", "missing", "80", "", nil).Stream(ctx)
	assert.Equal(t, int32(http.StatusNotFound), statusOf(t, err).Code, "edit may proxy to services")
	_, err = viewer.CoreV1().Services("default").ProxyGet("", "missing", "80", "", nil).Stream(ctx)
	requireForbidden(t, err, `services "missing:80" is forbidden: User "viewer" cannot get resource "services/proxy" in API group "" in the namespace "default"`)

	nodeProxy := func(c kubernetes.Interface) error {
		_, err := c.CoreV1().RESTClient().Get().Resource("nodes").Name("node-0").SubResource("proxy", "containerLogs").Stream(ctx)
		return err
	}
	assert.Equal(t, int32(http.StatusNotFound), statusOf(t, nodeProxy(kubeletClient)).Code, "the kubelet's 404 for a path it does not serve")
	requireForbidden(t, nodeProxy(editor), `nodes "node-0" is forbidden: User "editor" cannot get resource "nodes/proxy" in API group "" at the cluster scope`)

	_, err = admin.CoreV1().ComponentStatuses().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	_, err = editor.CoreV1().ComponentStatuses().List(ctx, metav1.ListOptions{})
	requireForbidden(t, err, `componentstatuses is forbidden: User "editor" cannot list resource "componentstatuses" in API group "" at the cluster scope`)
}
