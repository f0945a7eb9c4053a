package apiservertest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/controllers/kubelet"
	"github.com/kubeembed/apiserver/faults"
	"github.com/kubeembed/apiserver/internal/inproc"
)

// uniqueOptions are options no other test of the package starts a server
// with, so that the server a test hands back is the next one's. Servers
// on etcd are not reused (its backend takes no snapshots): the test skips.
func uniqueOptions(t *testing.T) Option {
	if os.Getenv(EtcdEnv) != "" {
		t.Skip(EtcdEnv + " is set: servers on etcd are not reused")
	}
	set := WithOptions(apiserver.Options{AdminToken: "pool-" + randomName(), Nodes: []controllers.Node{{Name: "pool-a"}, {Name: "pool-b"}}})
	reuse := WithReuse()
	return func(o *apiserver.Options) { set(o); reuse(o) }
}

// A test leaves behind every kind of state a server has; the next test
// with the same options gets the same server, and none of that state: no
// object, namespace, CRD, webhook, fault rule, recorded request, user's
// RBAC binding, node or kubelet rule, and the first test's clients and
// watches are cut off.
func TestReusedServerKeepsNothingOfTheLastTest(t *testing.T) {
	t.Parallel()
	opt := uniqueOptions(t)
	first := &fakeTB{ctx: t.Context()}
	srv := Start(first, opt)
	require.Empty(t, first.fatal)
	left := leaveEverything(t, srv)
	first.runCleanups()

	second := &fakeTB{ctx: t.Context()}
	again := Start(second, opt)
	require.Empty(t, second.fatal)
	defer second.runCleanups()
	require.True(t, srv == again, "the server was handed back and reused; the first test logged %q", first.logs)

	for _, w := range left.watches {
		assertEnds(t, w)
	}
	_, err := left.client.CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{})
	assert.True(t, errors.Is(err, inproc.ErrClosed), "the last test's client is cut off: %v", err)
	assertPristine(t, again)
}

// assertEnds reads w's events until it ends, failing after 10 s.
func assertEnds(t *testing.T, w watch.Interface) {
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-w.ResultChan():
			if !ok {
				return
			}
		case <-deadline:
			t.Error("the last test's watch did not end")
			return
		}
	}
}

// left is what leaveEverything leaves open.
type left struct {
	client  kubernetes.Interface
	watches []watch.Interface // in process, over the network
}

// leaveEverything changes every kind of state of srv a test can change.
func leaveEverything(t *testing.T, srv *apiserver.Server) left {
	c, err := srv.Clientset()
	require.NoError(t, err)
	ctx := t.Context()
	_, err = c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "leak"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "leak"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "leak"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// A ReplicaSet the restore deletes after its pods (keys in order):
	// its controller recreates them meanwhile, which a second restore
	// deletes.
	_, err = c.AppsV1().ReplicaSets("default").Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "leak"},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(3)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "leak"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "leak"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "leak"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "leaky"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	k := srv.Kubelet()
	_, err = k.AddNode(ctx, controllers.Node{Name: "pool-added"})
	require.NoError(t, err)
	require.NoError(t, k.RemoveNode(ctx, "pool-b"))
	require.NoError(t, k.SetNodeReady(ctx, "pool-a", false, ""))
	k.AddRule(kubelet.Rule{Exit: &kubelet.Exit{Code: 3}})
	k.SetLogs("default", "later", "app", "a log of the last test")
	srv.Faults().Add(faults.Rule{Match: faults.Match{Verb: "get", Resource: "secrets"}, Action: faults.Fail(apierrors.NewServiceUnavailable("leak"))})
	w, err := c.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	network, err := kubernetes.NewForConfig(srv.RESTConfig())
	require.NoError(t, err)
	nw, err := network.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	// The controllers publish kube-root-ca.crt in namespace leak before
	// ConfigMaps are denied: afterwards they would retry it for ever, and
	// WaitIdle wait for them.
	WaitIdle(t, srv)
	denyConfigMaps(t, srv, c)
	WaitIdle(t, srv)
	return left{client: c, watches: []watch.Interface{w, nw}}
}

// createCRD serves widgets.<group>/v1, in discovery and /openapi/v3.
func createCRD(t *testing.T, srv *apiserver.Server, group string) {
	x, err := srv.APIExtensionsClientset()
	require.NoError(t, err)
	_, err = x.ApiextensionsV1().CustomResourceDefinitions().Create(t.Context(), &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	d, err := srv.DiscoveryClient()
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := d.ServerResourcesForGroupVersion(group + "/v1")
		return err == nil && openAPIV3Paths(t, srv)["apis/"+group+"/v1"]
	}, 10*time.Second, time.Millisecond, "the CRD is served")
}

// openAPIV3Paths are the paths of srv's /openapi/v3.
func openAPIV3Paths(t *testing.T, srv *apiserver.Server) map[string]bool {
	c, err := srv.Clientset()
	require.NoError(t, err)
	raw, err := c.Discovery().RESTClient().Get().AbsPath("/openapi/v3").DoRaw(t.Context())
	require.NoError(t, err)
	var root struct {
		Paths map[string]any `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(raw, &root))
	paths := map[string]bool{}
	for p := range root.Paths {
		paths[p] = true
	}
	return paths
}

// denyConfigMaps installs a webhook that refuses every ConfigMap created
// (it calls a Service that does not exist, failing closed) and waits until
// it does.
func denyConfigMaps(t *testing.T, srv *apiserver.Server, c kubernetes.Interface) {
	_, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(t.Context(), &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "leak"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "deny.leak.example.com",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "default", Name: "nowhere"}},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := c.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}}, metav1.CreateOptions{})
		return err != nil
	}, 10*time.Second, time.Millisecond, "the webhook refuses ConfigMaps")
}

// assertPristine checks that srv shows none of leaveEverything's state.
func assertPristine(t *testing.T, srv *apiserver.Server) {
	assert.Zero(t, srv.Recorder().Count(), "no request of the last test is recorded")
	c, err := srv.Clientset()
	require.NoError(t, err)
	ctx := t.Context()
	network, err := kubernetes.NewForConfig(srv.RESTConfig())
	require.NoError(t, err)
	_, err = network.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
	require.NoError(t, err, "network clients connect")
	_, err = c.CoreV1().Namespaces().Get(ctx, "leak", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "namespace: %v", err)
	cms, err := c.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, cm := range cms.Items {
		assert.Equal(t, "kube-root-ca.crt", cm.Name, "only the server's own ConfigMap")
	}
	_, err = c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "now"}}, metav1.CreateOptions{})
	assert.NoError(t, err, "no webhook of the last test")
	_, err = c.CoreV1().Secrets("default").Get(ctx, "none", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no fault rule of the last test: %v", err)
	assertCRDsGone(t, srv)
	leaky := ClientsetFor(t, srv, "leaky")
	_, err = leaky.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "the last test's binding is gone: %v", err)
	assertNodesAsStarted(t, srv, c)
}

// assertNodesAsStarted: the initial nodes, Ready, and a pod runs on them
// with no rule of the last test.
func assertNodesAsStarted(t *testing.T, srv *apiserver.Server, c kubernetes.Interface) {
	ctx := t.Context()
	assert.Equal(t, []string{"pool-a", "pool-b"}, srv.Kubelet().Nodes())
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var names []string
	for _, n := range nodes.Items {
		names = append(names, n.Name)
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				assert.Equal(t, corev1.ConditionTrue, cond.Status, "%s Ready", n.Name)
			}
		}
	}
	assert.ElementsMatch(t, []string{"pool-a", "pool-b"}, names)
	_, err = c.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "later"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	WaitIdle(t, srv)
	pods, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, pods.Items, 1, "no pod of the last test")
	p := &pods.Items[0]
	require.Equal(t, "later", p.Name)
	assert.Equal(t, corev1.PodRunning, p.Status.Phase, "no exit rule of the last test")
	logs, err := c.CoreV1().Pods("default").GetLogs("later", &corev1.PodLogOptions{}).DoRaw(ctx)
	require.NoError(t, err)
	assert.Empty(t, string(logs), "no log of the last test")
}

// Network clients of one TLS configuration share their connections
// (client-go caches transports): the next test's first request goes on the
// connection the last test left idle, which the reset kept open. Closing
// it made that request fail now and then ("unexpected EOF") when the
// client had not yet seen the close.
func TestReusedServerKeepsIdleConnections(t *testing.T) {
	t.Parallel()
	opt := uniqueOptions(t)
	get := func(srv *apiserver.Server) (reused bool) {
		hc, err := rest.HTTPClientFor(srv.RESTConfig())
		require.NoError(t, err)
		trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused }}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodGet, srv.URL()+"/version", nil)
		require.NoError(t, err)
		resp, err := hc.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.NoError(t, resp.Body.Close())
		return reused
	}
	first := &fakeTB{ctx: t.Context()}
	srv := Start(first, opt)
	get(srv)
	first.runCleanups()

	second := &fakeTB{ctx: t.Context()}
	again := Start(second, opt)
	defer second.runCleanups()
	require.True(t, srv == again, "the server was handed back and reused; the first test logged %q", first.logs)
	assert.True(t, get(again), "the next test's request goes on the connection the last test left idle")
}

// Reset forgets the CRDs made since the snapshot, those the restore
// deletes and one the test deleted itself, in discovery and /openapi/v3
// (whose paths the aggregator refreshes once a second, after discovery).
func TestResetForgetsCRDs(t *testing.T) {
	t.Parallel()
	if os.Getenv(EtcdEnv) != "" {
		t.Skip(EtcdEnv + " is set: the etcd backend takes no snapshots")
	}
	srv := Start(t, WithNewServer())
	WaitIdle(t, srv)
	snap, err := srv.Snapshot()
	require.NoError(t, err)
	createCRD(t, srv, "leak.example.com")
	createCRD(t, srv, "gone.example.com")
	x, err := srv.APIExtensionsClientset()
	require.NoError(t, err)
	require.NoError(t, x.ApiextensionsV1().CustomResourceDefinitions().Delete(t.Context(), "widgets.gone.example.com", metav1.DeleteOptions{}))
	ctx, cancel := context.WithTimeout(t.Context(), resetTimeout)
	defer cancel()
	require.NoError(t, srv.Reset(ctx, snap))
	assertCRDsGone(t, srv)
}

// assertCRDsGone: neither CRD of TestResetForgetsCRDs is served.
func assertCRDsGone(t *testing.T, srv *apiserver.Server) {
	d, err := srv.DiscoveryClient()
	require.NoError(t, err)
	paths := openAPIV3Paths(t, srv)
	for _, group := range []string{"leak.example.com", "gone.example.com"} {
		_, err = d.ServerResourcesForGroupVersion(group + "/v1")
		assert.True(t, apierrors.IsNotFound(err), "the last test's CRD is not served: %v", err)
		assert.NotContains(t, paths, "apis/"+group+"/v1", "nor in /openapi/v3")
	}
}

// A server whose test failed, that its test closed, or whose test wrote a
// CRD is not handed to the next test; options that differ never share a
// server.
func TestServersNotReused(t *testing.T) {
	t.Parallel()
	opt := uniqueOptions(t)
	failing := &fakeTB{ctx: t.Context()}
	srv := Start(failing, opt)
	failing.Fatalf("the test failed")
	failing.runCleanups()

	closing := &fakeTB{ctx: t.Context()}
	next := Start(closing, opt)
	require.True(t, srv != next, "a failed test's server is closed")
	require.NoError(t, next.Close())
	closing.runCleanups()

	other := &fakeTB{ctx: t.Context()}
	third := Start(other, opt)
	require.True(t, next != third, "a closed server is not reused")
	other.runCleanups()
	another := &fakeTB{ctx: t.Context()}
	fourth := Start(another, uniqueOptions(t))
	assert.True(t, third != fourth, "other options, another server")
	another.runCleanups()

	crds := &fakeTB{ctx: t.Context()}
	fifth := Start(crds, opt)
	createCRD(t, fifth, "leak.example.com")
	crds.runCleanups()
	after := &fakeTB{ctx: t.Context()}
	sixth := Start(after, opt)
	defer after.runCleanups()
	assert.True(t, fifth != sixth, "a server whose test wrote a CRD is closed")
	assertCRDsGone(t, sixth)
}

// BenchmarkStartReused is the per-test cost of a server of Start's default
// (take from the pool, then Reset at the test's end, after a test that
// wrote one ConfigMap) against a new server (WithNewServer).
func BenchmarkStartReused(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []Option
	}{{"reused", nil}, {"new", []Option{WithNewServer()}}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				tb := &fakeTB{ctx: b.Context()}
				srv := Start(tb, bc.opts...)
				c, err := srv.Clientset()
				require.NoError(b, err)
				_, err = c.CoreV1().ConfigMaps("default").Create(b.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "one"}}, metav1.CreateOptions{})
				require.NoError(b, err)
				tb.runCleanups()
			}
		})
	}
}
