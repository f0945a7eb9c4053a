package apiservertest

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/metricsapi"
)

// Metrics is a metrics.k8s.io/v1beta1 API server fed by the test, served
// as metrics-server is: an aggregated API behind the Service
// kube-system/metrics-server and its APIService v1beta1.metrics.k8s.io
// (metricsapi.Serve, with the test's values as its Source). The metrics
// clientset (k8s.io/metrics), kubectl top and HPA logic read it through
// the API server. Its methods are safe for concurrent use.
type Metrics struct {
	// handler serves the values; its client reads the pods and nodes a
	// label selector picks.
	handler http.Handler
	mu      sync.Mutex
	pods    map[string]metricsv1beta1.PodMetrics // by namespace/name
	nodes   map[string]metricsv1beta1.NodeMetrics
}

// serveTimeout bounds ServeMetrics' wait for the aggregator.
const serveTimeout = 30 * time.Second

// ServeMetrics serves a Metrics as srv's metrics.k8s.io until the test
// ends; it returns once the APIService is Available (the aggregator has
// checked it, as it checks metrics-server) and the aggregator's proxy
// serves it (it learns the availability through its informer). At the
// end of the test the APIService is deleted before the handler stops.
func ServeMetrics(t TB, srv *apiserver.Server) *Metrics {
	t.Helper()
	admin, err := srv.Clientset()
	if err != nil {
		t.Fatalf("ServeMetrics: %v", err)
	}
	m := &Metrics{pods: map[string]metricsv1beta1.PodMetrics{}, nodes: map[string]metricsv1beta1.NodeMetrics{}}
	m.handler = metricsapi.Handler(admin, m)
	ctx, cancel := context.WithTimeout(t.Context(), serveTimeout)
	defer cancel()
	served, err := metricsapi.Serve(ctx, srv, metricsapi.Options{Source: m})
	if err != nil {
		t.Fatalf("ServeMetrics: %v", err)
	}
	t.Cleanup(func() {
		if err := served.Close(); err != nil {
			t.Logf("ServeMetrics: stop: %v", err) // the test may have closed srv first
		}
	})
	return m
}

// SetPodMetrics sets the usage of the containers of pod namespace/name
// (container name to usage), as measured now; nil removes the pod.
func (m *Metrics) SetPodMetrics(namespace, name string, containers map[string]corev1.ResourceList) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := namespace + "/" + name
	if containers == nil {
		delete(m.pods, key)
		return
	}
	pm := metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, CreationTimestamp: metav1.Now()},
		Timestamp: metav1.Now(), Window: metav1.Duration{Duration: 15 * time.Second}}
	for _, c := range slices.Sorted(maps.Keys(containers)) {
		pm.Containers = append(pm.Containers, metricsv1beta1.ContainerMetrics{Name: c, Usage: containers[c].DeepCopy()})
	}
	m.pods[key] = pm
}

// SetNodeMetrics sets the usage of node name, as measured now; nil removes
// the node.
func (m *Metrics) SetNodeMetrics(name string, usage corev1.ResourceList) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if usage == nil {
		delete(m.nodes, name)
		return
	}
	m.nodes[name] = metricsv1beta1.NodeMetrics{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.Now()},
		Timestamp: metav1.Now(), Window: metav1.Duration{Duration: 15 * time.Second}, Usage: usage.DeepCopy()}
}

// PodMetrics returns the pods' metrics set (metricsapi.Source).
func (m *Metrics) PodMetrics(context.Context) ([]metricsv1beta1.PodMetrics, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]metricsv1beta1.PodMetrics, 0, len(m.pods))
	for _, pm := range m.pods {
		out = append(out, *pm.DeepCopy())
	}
	return out, nil
}

// NodeMetrics returns the nodes' metrics set (metricsapi.Source).
func (m *Metrics) NodeMetrics(context.Context) ([]metricsv1beta1.NodeMetrics, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]metricsv1beta1.NodeMetrics, 0, len(m.nodes))
	for _, nm := range m.nodes {
		out = append(out, *nm.DeepCopy())
	}
	return out, nil
}

// ServeHTTP serves metrics.k8s.io/v1beta1 from the values set, as
// metricsapi.Handler does.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.handler.ServeHTTP(w, r) }
