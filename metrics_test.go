package apiserver_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// scrape returns the value of each sample of name on srv's /metrics, keyed
// by its labels as "k=v,k=v" (sorted as exposed).
func scrape(t *testing.T, body, name string) map[string]float64 {
	t.Helper()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	require.NoError(t, err)
	out := map[string]float64{}
	for _, m := range families[name].GetMetric() {
		var labels []string
		for _, l := range m.GetLabel() {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
		out[strings.Join(labels, ",")] = v
	}
	return out
}

// Each server has its own /metrics, with kube-apiserver's names and labels:
// two servers in one process do not add up each other's requests.
func TestMetricsPerServer(t *testing.T) {
	t.Parallel()
	// New servers: /metrics counts every request since Start, and the
	// counts below are absolute (a reused server counted an earlier
	// test's creates once here).
	srv, other := apiservertest.Start(t, apiservertest.WithNewServer()), apiservertest.Start(t, apiservertest.WithNewServer())
	// The server's own requests count too, as kube-apiserver's loopback
	// requests do: compare with what was counted before, once the
	// controllers have published kube-root-ca.crt in each namespace.
	apiservertest.WaitIdle(t, srv)
	_, body := get(t, srv.RESTConfig(), "/metrics")
	before := scrape(t, body, "apiserver_request_total")
	cms := clientset(t, srv).CoreV1().ConfigMaps("default")
	for i := range 3 {
		_, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm-", i)}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-0"}}, metav1.CreateOptions{})
	require.Error(t, err, "exists: a 409")
	_, err = clientset(t, other).CoreV1().ConfigMaps("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)

	code, body := get(t, srv.RESTConfig(), "/metrics")
	require.Equal(t, http.StatusOK, code)
	requests := scrape(t, body, "apiserver_request_total")
	for k, v := range before {
		requests[k] -= v
	}
	// kube-apiserver's scope of a create is "resource", of a list
	// "namespace".
	const labels = "code=%d,component=apiserver,dry_run=,group=,resource=configmaps,scope=%s,subresource=,verb=%s,version=v1"
	assert.Equal(t, 3.0, requests[fmt.Sprintf(labels, 201, "resource", "POST")], "creates, by code")
	assert.Equal(t, 1.0, requests[fmt.Sprintf(labels, 409, "resource", "POST")])
	assert.Zero(t, requests[fmt.Sprintf(labels, 200, "namespace", "LIST")], "the other server's list is not counted here")
	durations := scrape(t, body, "apiserver_request_duration_seconds")
	assert.Equal(t, 10.0, durations["component=apiserver,dry_run=,group=,resource=configmaps,scope=resource,subresource=,verb=POST,version=v1"],
		"the server's six (legacy token tracking, extension-apiserver-authentication, kube-root-ca.crt in four namespaces), and four")
	objects := scrape(t, body, "apiserver_resource_objects")
	assert.Equal(t, 9.0, objects["group=,resource=configmaps"], "three, kube-system's legacy token tracking and authentication info, four kube-root-ca.crt")
	assert.Equal(t, 4.0, objects["group=,resource=namespaces"], "the system namespaces")
	// Its former name, deprecated in 1.34, is hidden from 1.37 on, as
	// kube-apiserver hides it.
	assert.NotContains(t, body, "apiserver_storage_objects")
	// The controllers' work queues, kube-controller-manager's names.
	assert.GreaterOrEqual(t, scrape(t, body, "workqueue_adds_total")["name=root_ca_cert_publisher"], 4.0, "a namespace each")
	depth, ok := scrape(t, body, "workqueue_depth")["name=garbage_collector_attempt_to_delete"]
	assert.True(t, ok, "the garbage collector's queue is reported")
	assert.Zero(t, depth, "idle")
	_, otherBody := get(t, other.RESTConfig(), "/metrics")
	assert.Equal(t, 1.0, scrape(t, otherBody, "apiserver_request_total")[fmt.Sprintf(labels, 200, "namespace", "LIST")])
}
