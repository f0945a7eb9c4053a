package apiserver

// /metrics of one server: kube-apiserver's names and labels, in a registry
// of the server's own (k8s.io/apiserver's metrics live in a process-wide
// registry, where two servers would add up each other's requests).

import (
	"context"
	"maps"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apiserver/pkg/endpoints/metrics"
	"k8s.io/apiserver/pkg/endpoints/request"
	k8sstorage "k8s.io/apiserver/pkg/storage"

	"github.com/kubeembed/apiserver/internal/capture"
	"github.com/kubeembed/apiserver/storage"
)

// requestLabels are apiserver_request_total's, without code.
var requestLabels = []string{"verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component"}

// serverMetrics are a server's metrics.
type serverMetrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newServerMetrics(objects *storedResources) *serverMetrics {
	m := &serverMetrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "apiserver_request_total",
			Help: "[STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code."},
			append(append([]string{}, requestLabels...), "code")),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "apiserver_request_duration_seconds",
			Help:    "[STABLE] Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
			Buckets: []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60}},
			requestLabels),
	}
	m.registry.MustRegister(m.requests, m.latency, objects)
	return m
}

// instrument counts and times the resource requests h serves (inside
// authentication, where kube-apiserver's request information is known), the
// server's own included, as kube-apiserver counts its loopback requests.
func (m *serverMetrics) instrument(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, ok := request.RequestInfoFrom(r.Context())
		if !ok || !info.IsResourceRequest {
			h.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		answer := &capture.Writer{ResponseWriter: w}
		defer func() {
			labels := []string{metricVerb(r, info), dryRun(r), info.APIGroup, info.APIVersion, info.Resource, info.Subresource,
				metrics.CleanScope(info), "apiserver"}
			m.latency.WithLabelValues(labels...).Observe(time.Since(start).Seconds())
			code := answer.Code
			if code == 0 {
				code = http.StatusOK // nothing written (or dropped)
			}
			m.requests.WithLabelValues(append(labels, strconv.Itoa(code))...).Inc()
		}()
		h.ServeHTTP(answer.Wrap(), r)
	})
}

// metricVerb is the verb label kube-apiserver reports: its route's verb
// (LIST, POST, PUT, ...), WATCH, APPLY or CONNECT.
func metricVerb(r *http.Request, info *request.RequestInfo) string {
	verb := map[string]string{"create": "POST", "update": "PUT", "deletecollection": "DELETECOLLECTION"}[info.Verb]
	if verb == "" {
		verb = strings.ToUpper(info.Verb)
	}
	return metrics.CleanVerb(verb, r, info)
}

func dryRun(r *http.Request) string {
	if v := r.URL.Query()["dryRun"]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// storedResources is every resource stored through the backend, for
// apiserver_storage_objects: a Backend that notes each store it makes.
type storedResources struct {
	storage.Backend
	mu       sync.Mutex
	prefixes map[string]string // resource label -> key prefix
}

func newStoredResources(b storage.Backend) *storedResources {
	return &storedResources{Backend: b, prefixes: map[string]string{}}
}

// Store implements storage.Backend.
func (s *storedResources) Store(cfg storage.ResourceConfig) (k8sstorage.Interface, error) {
	s.mu.Lock()
	s.prefixes[cfg.GroupResource.String()] = path.Join("/", cfg.Prefix, cfg.ResourcePrefix) + "/"
	s.mu.Unlock()
	return s.Backend.Store(cfg)
}

var storageObjectsDesc = prometheus.NewDesc("apiserver_storage_objects",
	"[STABLE] Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.",
	[]string{"resource"}, nil)

// Describe implements prometheus.Collector.
func (s *storedResources) Describe(ch chan<- *prometheus.Desc) { ch <- storageObjectsDesc }

// Collect implements prometheus.Collector: counts read when scraped, -1
// where the backend cannot count.
func (s *storedResources) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	prefixes := maps.Clone(s.prefixes)
	s.mu.Unlock()
	counter, canCount := s.Backend.(storage.Counter)
	for _, name := range slices.Sorted(maps.Keys(prefixes)) {
		n := int64(-1)
		if canCount {
			if c, err := counter.Count(context.Background(), prefixes[name]); err == nil {
				n = c
			}
		}
		ch <- prometheus.MustNewConstMetric(storageObjectsDesc, prometheus.GaugeValue, float64(n), name)
	}
}

// handler serves the registry in Prometheus' text format.
func (m *serverMetrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}
