package metricsapi_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/internal/certs"
	"github.com/kubeembed/apiserver/internal/leaktest"
	"github.com/kubeembed/apiserver/metricsapi"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

func requests(cpu, memory string) corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{Requests: corev1.ResourceList{}}
	if cpu != "" {
		r.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		r.Requests[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	return r
}

// serve serves the simulation for srv until the test ends.
func serve(t *testing.T, srv *apiserver.Server) *metricsapi.Server {
	m, err := metricsapi.Serve(t.Context(), srv, metricsapi.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, m.Close()) })
	return m
}

// The simulation: a Running pod's containers (a sidecar too) use what they
// request, 0 of what they do not; a pod that does not run has no metrics;
// the node uses the sum. Label selectors pick the server's pods.
func TestRequestsAsUsage(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	serve(t, srv)
	c, err := srv.Clientset()
	require.NoError(t, err)
	pods := []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}}, Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "proxy", Image: "envoy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
				Resources: requests("50m", "32Mi")}, {Name: "init", Image: "busybox", Resources: requests("2", "1Gi")}},
			Containers: []corev1.Container{{Name: "app", Image: "nginx", Resources: requests("250m", "64Mi")}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "bare"}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "busybox"}, {Name: "cpu", Image: "busybox", Resources: requests("100m", "")}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "unschedulable"}, Spec: corev1.PodSpec{NodeSelector: map[string]string{"no": "such"},
			Containers: []corev1.Container{{Name: "app", Image: "busybox", Resources: requests("1", "1Gi")}}}},
	}
	for _, p := range pods {
		_, err := c.CoreV1().Pods("default").Create(t.Context(), p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	apiservertest.WaitIdle(t, srv)

	mc, err := metricsclient.NewForConfig(srv.RESTConfig())
	require.NoError(t, err)
	list, err := mc.MetricsV1beta1().PodMetricses("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	got := map[string]string{}
	for _, pm := range list.Items {
		for _, ct := range pm.Containers {
			got[pm.Name+"/"+ct.Name] = ct.Usage.Cpu().String() + " " + ct.Usage.Memory().String()
		}
	}
	assert.Equal(t, map[string]string{"web/proxy": "50m 32Mi", "web/app": "250m 64Mi", "bare/app": "0 0", "bare/cpu": "100m 0"}, got)

	web, err := mc.MetricsV1beta1().PodMetricses("default").List(t.Context(), metav1.ListOptions{LabelSelector: "app=web"})
	require.NoError(t, err)
	require.Len(t, web.Items, 1)
	assert.Equal(t, "web", web.Items[0].Name)
	_, err = mc.MetricsV1beta1().PodMetricses("default").Get(t.Context(), "unschedulable", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "a pod that does not run: %v", err)

	node, err := mc.MetricsV1beta1().NodeMetricses().Get(t.Context(), "node-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "400m", node.Usage.Cpu().String())
	assert.Equal(t, "96Mi", node.Usage.Memory().String())
}

// Serve takes over what a process that did not Close left (an APIService
// with another CA: the aggregator logs its failed checks until then);
// Close deletes the APIService and what Serve created, not a Service that
// was there, and can be called again.
func TestServeTakesOverAndCloseRemoves(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c, err := srv.Clientset()
	require.NoError(t, err)
	agg, err := aggregatorclient.NewForConfig(srv.RESTConfig())
	require.NoError(t, err)
	stale, err := certs.NewCA("a CA of the last run")
	require.NoError(t, err)
	_, err = agg.ApiregistrationV1().APIServices().Create(t.Context(), &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: metricsapi.APIServiceName},
		Spec: apiregistrationv1.APIServiceSpec{Group: "metrics.k8s.io", Version: "v1beta1", CABundle: stale.CertPEM,
			Service:              &apiregistrationv1.ServiceReference{Namespace: metricsapi.Namespace, Name: metricsapi.ServiceName},
			GroupPriorityMinimum: 100, VersionPriority: 100}}, metav1.CreateOptions{})
	require.NoError(t, err)

	m, err := metricsapi.Serve(t.Context(), srv, metricsapi.Options{})
	require.NoError(t, err)
	mc, err := metricsclient.NewForConfig(srv.RESTConfig())
	require.NoError(t, err)
	_, err = mc.MetricsV1beta1().NodeMetricses().List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.NoError(t, m.Close())
	require.NoError(t, m.Close(), "again")
	_, err = agg.ApiregistrationV1().APIServices().Get(t.Context(), metricsapi.APIServiceName, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "APIService: %v", err)
	assertGone(t, c, "metrics-server-kubeembed")
	_, err = c.CoreV1().Services(metricsapi.Namespace).Get(t.Context(), metricsapi.ServiceName, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the Service Serve created: %v", err)

	// A Service that was there stays.
	_, err = c.CoreV1().Services(metricsapi.Namespace).Create(t.Context(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: metricsapi.ServiceName},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	m, err = metricsapi.Serve(t.Context(), srv, metricsapi.Options{})
	require.NoError(t, err)
	require.NoError(t, m.Close())
	_, err = c.CoreV1().Services(metricsapi.Namespace).Get(t.Context(), metricsapi.ServiceName, metav1.GetOptions{})
	assert.NoError(t, err, "the Service that was there")
	assertGone(t, c, "metrics-server-kubeembed")
}

func assertGone(t *testing.T, c kubernetes.Interface, slice string) {
	t.Helper()
	_, err := c.DiscoveryV1().EndpointSlices(metricsapi.Namespace).Get(t.Context(), slice, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "EndpointSlice %s: %v", slice, err)
}

// Close, then the server's Close, end every goroutine Serve started, and
// nothing is logged at warn level or above. Serial: goleak looks at every
// goroutine of the process (the parallel tests wait for it).
func TestCloseLeavesNothing(t *testing.T) {
	warm, err := apiserver.New(apiserver.Options{})
	require.NoError(t, err)
	require.NoError(t, warm.Start(t.Context()))
	// Idle first: a server closed right after Start can hold its Close
	// 10 s per kubelet start-up event still queued ("Server rejected event
	// (will not retry!)"), with or without metrics.k8s.io.
	require.NoError(t, warm.WaitIdle(t.Context()))
	require.NoError(t, warm.Close())

	before := leaktest.IgnoreCurrent(t)
	core, logs := observer.New(zapcore.WarnLevel)
	srv, err := apiserver.New(apiserver.Options{Logger: zap.New(core)})
	require.NoError(t, err)
	require.NoError(t, srv.Start(t.Context()))
	m, err := metricsapi.Serve(t.Context(), srv, metricsapi.Options{Logger: zap.New(core)})
	require.NoError(t, err)
	mc, err := metricsclient.NewForConfig(srv.RESTConfig())
	require.NoError(t, err)
	for range 3 { // connections of the aggregator's proxy to the handler
		_, err = mc.MetricsV1beta1().PodMetricses("").List(t.Context(), metav1.ListOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, m.Close())
	require.NoError(t, srv.WaitIdle(t.Context()))
	require.NoError(t, srv.Close())

	leaktest.VerifyNone(t, before,
		// client-go keeps idle HTTP/2 connections of its cached transports
		// until they time out; they belong to clients, not the server.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
	)
	for _, e := range logs.All() {
		t.Errorf("logged: %s %s %v", e.Level, e.Message, e.ContextMap())
	}
}
