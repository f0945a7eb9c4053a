package apiserver_test

import (
	"crypto/x509"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/kubeembed/apiserver/testing/apiservertest"
)

func usage(cpu, memory string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
}

// metrics.k8s.io served by the test (apiservertest.ServeMetrics) is read
// through the aggregator's proxy with the metrics clientset: get, list in
// a namespace, label selectors on the server's pods, nodes.
func TestMetricsAPI(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	m := apiservertest.ServeMetrics(t, srv)
	c := clientset(t, srv)
	for _, name := range []string{"web-1", "db-1"} {
		_, err := c.CoreV1().Pods("default").Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{"app": strings.TrimSuffix(name, "-1")}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	m.SetPodMetrics("default", "web-1", map[string]corev1.ResourceList{"c": usage("250m", "64Mi")})
	m.SetPodMetrics("default", "db-1", map[string]corev1.ResourceList{"c": usage("1", "1Gi")})
	m.SetNodeMetrics("node-1", usage("2", "4Gi"))

	mc, err := metricsclient.NewForConfig(srv.RESTConfig())
	require.NoError(t, err)
	pm, err := mc.MetricsV1beta1().PodMetricses("default").Get(t.Context(), "web-1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "250m", pm.Containers[0].Usage.Cpu().String())
	list, err := mc.MetricsV1beta1().PodMetricses("default").List(t.Context(), metav1.ListOptions{LabelSelector: "app=db"})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	assert.Equal(t, "db-1", list.Items[0].Name)
	nodes, err := mc.MetricsV1beta1().NodeMetricses().List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, nodes.Items, 1)
	assert.Equal(t, "4Gi", nodes.Items[0].Usage.Memory().String())
	_, err = mc.MetricsV1beta1().PodMetricses("default").Get(t.Context(), "nosuch", metav1.GetOptions{})
	assert.Equal(t, `pods.metrics.k8s.io "nosuch" not found`, err.Error())

	if run := kubectlFor(t, srv); run != nil {
		out, stderr, err := run("top", "pods", "-n", "default")
		require.NoError(t, err, stderr)
		assert.Regexp(t, `(?s)NAME\s+CPU\(cores\)\s+MEMORY\(bytes\).*db-1\s+1000m\s+1024Mi.*web-1\s+250m\s+64Mi`, out)
	}
}

// An APIService whose Service is missing, or has no EndpointSlices, is not
// Available, with kube-aggregator's reasons.
func TestAPIServiceUnavailable(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	_, err := c.CoreV1().Services("kube-system").Create(t.Context(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "empty"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443, TargetPort: intstr.FromInt32(9443)}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	agg, err := aggregatorclient.NewForConfig(srv.RESTConfig())
	require.NoError(t, err)
	for _, s := range []struct{ group, service string }{{"missing.example.com", "missing"}, {"empty.example.com", "empty"}} {
		_, err := agg.ApiregistrationV1().APIServices().Create(t.Context(), &apiregistrationv1.APIService{
			ObjectMeta: metav1.ObjectMeta{Name: "v1." + s.group},
			Spec: apiregistrationv1.APIServiceSpec{Group: s.group, Version: "v1", InsecureSkipTLSVerify: true,
				Service:              &apiregistrationv1.ServiceReference{Namespace: "kube-system", Name: s.service},
				GroupPriorityMinimum: 100, VersionPriority: 100}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	want := map[string][2]string{
		"v1.missing.example.com": {"ServiceNotFound", `service/missing in "kube-system" is not present`},
		"v1.empty.example.com":   {"EndpointsNotFound", `cannot find endpointslices for service/empty in "kube-system"`},
	}
	for name, w := range want {
		var cond apiregistrationv1.APIServiceCondition
		require.Eventually(t, func() bool {
			svc, err := agg.ApiregistrationV1().APIServices().Get(t.Context(), name, metav1.GetOptions{})
			require.NoError(t, err)
			for _, c := range svc.Status.Conditions {
				if c.Type == apiregistrationv1.Available && c.Reason == w[0] {
					cond = c
					return true
				}
			}
			return false
		}, 30*time.Second, 10*time.Millisecond, name)
		assert.Equal(t, apiregistrationv1.ConditionFalse, cond.Status)
		assert.Equal(t, w[1], cond.Message, name)
	}
}

// whoami is an aggregated API server of whoami.example.com/v1 that trusts
// the request headers of a client certificate of the front-proxy CA named
// in extension-apiserver-authentication, as one built on k8s.io/apiserver
// does, and answers with the user they name.
func whoami(frontProxyCA []byte, allowed string) http.HandlerFunc {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(frontProxyCA)
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/apis/whoami.example.com/v1" {
			_ = json.NewEncoder(w).Encode(&metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
				GroupVersion: "whoami.example.com/v1", APIResources: []metav1.APIResource{{Name: "users", Kind: "User", Verbs: metav1.Verbs{"get"}}}})
			return
		}
		certs := r.TLS.PeerCertificates
		if len(certs) == 0 || certs[0].Subject.CommonName != allowed {
			http.Error(w, "not the front proxy", http.StatusUnauthorized)
			return
		}
		if _, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"user": r.Header.Get("X-Remote-User"), "groups": r.Header.Values("X-Remote-Group")})
	}
}

// The aggregator calls an aggregated API server with the front proxy's
// client certificate and the user in request headers, which the server
// verifies with what extension-apiserver-authentication publishes.
func TestAggregatorFrontProxy(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	var info *corev1.ConfigMap
	require.Eventually(t, func() bool { // the post-start hook publishes it
		var err error
		info, err = c.CoreV1().ConfigMaps("kube-system").Get(t.Context(), "extension-apiserver-authentication", metav1.GetOptions{})
		return err == nil
	}, 10*time.Second, 5*time.Millisecond)
	var allowed []string
	require.NoError(t, json.Unmarshal([]byte(info.Data["requestheader-allowed-names"]), &allowed))
	require.Len(t, allowed, 1)
	assert.Equal(t, `["X-Remote-User"]`, info.Data["requestheader-username-headers"])

	ca := apiservertest.ServeService(t, srv, "kube-system", "whoami", whoami([]byte(info.Data["requestheader-client-ca-file"]), allowed[0]))
	agg, err := aggregatorclient.NewForConfig(srv.RESTConfig())
	require.NoError(t, err)
	_, err = agg.ApiregistrationV1().APIServices().Create(t.Context(), &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1.whoami.example.com"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "whoami.example.com", Version: "v1", CABundle: ca,
			Service:              &apiregistrationv1.ServiceReference{Namespace: "kube-system", Name: "whoami"},
			GroupPriorityMinimum: 100, VersionPriority: 100}}, metav1.CreateOptions{})
	require.NoError(t, err)

	alice := apiservertest.ClientsetFor(t, srv, "alice", "system:masters")
	var body []byte
	require.Eventually(t, func() bool { // available once the aggregator has checked it
		body, err = alice.Discovery().RESTClient().Get().AbsPath("/apis/whoami.example.com/v1/users").DoRaw(t.Context())
		return err == nil
	}, 30*time.Second, 10*time.Millisecond, "through the aggregator: %v", err)
	assert.JSONEq(t, `{"user":"alice","groups":["system:masters","system:authenticated"]}`, string(body))
}
