package controlplane

// /metrics of one server: kube-apiserver's names and labels, in a registry
// of the server's own (k8s.io/apiserver's metrics live in a process-wide
// registry, where two servers would add up each other's requests).

import (
	"context"
	"maps"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/metrics"
	"k8s.io/apiserver/pkg/endpoints/request"
	k8sstorage "k8s.io/apiserver/pkg/storage"
	"k8s.io/client-go/util/workqueue"

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
	// objects counts what backend stores.
	objects *objectCounts
	// queues are the work queue metrics of the server's controllers.
	queues queueMetrics
}

// newServerMetrics returns the metrics of a server storing in backend.
func newServerMetrics(backend storage.Backend) *serverMetrics {
	m := &serverMetrics{
		objects:  &objectCounts{backend: backend, prefixes: map[schema.GroupResource]string{}},
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "apiserver_request_total",
			Help: "[STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code."},
			append(append([]string{}, requestLabels...), "code")),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "apiserver_request_duration_seconds",
			Help:    "[STABLE] Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
			Buckets: []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60}},
			requestLabels),
	}
	m.queues = newQueueMetrics()
	m.registry.MustRegister(m.requests, m.latency, m.objects)
	m.queues.register(m.registry)
	return m
}

// queueMetrics are client-go's work queue metrics under the names and
// labels kube-controller-manager serves them with (component-base's
// workqueue provider, which registers in the process-wide registry).
type queueMetrics struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, work              *prometheus.HistogramVec
}

func newQueueMetrics() queueMetrics {
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: name, Help: "[ALPHA] " + help}, []string{"name"})
	}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "workqueue", Name: name, Help: "[ALPHA] " + help}, []string{"name"})
	}
	histogram := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "workqueue", Name: name, Help: "[ALPHA] " + help,
			Buckets: prometheus.ExponentialBuckets(10e-9, 10, 10)}, []string{"name"})
	}
	return queueMetrics{
		depth:   gauge("depth", "Current depth of workqueue"),
		adds:    counter("adds_total", "Total number of adds handled by workqueue"),
		latency: histogram("queue_duration_seconds", "How long in seconds an item stays in workqueue before being requested."),
		work:    histogram("work_duration_seconds", "How long in seconds processing an item from workqueue takes."),
		unfinished: gauge("unfinished_work_seconds", "How many seconds of work has done that is in progress and hasn't been observed by work_duration. "+
			"Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases."),
		longest: gauge("longest_running_processor_seconds", "How many seconds has the longest running processor for workqueue been running."),
		retries: counter("retries_total", "Total number of retries handled by workqueue"),
	}
}

func (q queueMetrics) register(r *prometheus.Registry) {
	r.MustRegister(q.depth, q.adds, q.latency, q.work, q.unfinished, q.longest, q.retries)
}

func (q queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return q.depth.WithLabelValues(name)
}
func (q queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return q.adds.WithLabelValues(name)
}
func (q queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return q.latency.WithLabelValues(name)
}
func (q queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return q.work.WithLabelValues(name)
}
func (q queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.unfinished.WithLabelValues(name)
}
func (q queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.longest.WithLabelValues(name)
}
func (q queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return q.retries.WithLabelValues(name)
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

// objectCounts is apiserver_resource_objects: the number of objects of
// each resource stored through the backends count wraps, read from the
// backend when scraped. Its former name, apiserver_storage_objects, was
// deprecated in 1.34 and kube-apiserver 1.37 hides it, as here.
type objectCounts struct {
	backend  storage.Backend
	mu       sync.Mutex
	prefixes map[schema.GroupResource]string // -> key prefix
}

// count returns b noting the key prefix of each store it makes.
func (o *objectCounts) count(b storage.Backend) storage.Backend {
	return countedBackend{Backend: b, counts: o}
}

type countedBackend struct {
	storage.Backend
	counts *objectCounts
}

// Store implements storage.Backend.
func (c countedBackend) Store(cfg storage.ResourceConfig) (k8sstorage.Interface, error) {
	c.counts.mu.Lock()
	c.counts.prefixes[cfg.GroupResource] = path.Join("/", cfg.Prefix, cfg.ResourcePrefix) + "/"
	c.counts.mu.Unlock()
	return c.Backend.Store(cfg)
}

var resourceObjectsDesc = prometheus.NewDesc("apiserver_resource_objects",
	"[ALPHA] Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.",
	[]string{"group", "resource"}, nil)

// Describe implements prometheus.Collector.
func (o *objectCounts) Describe(ch chan<- *prometheus.Desc) {
	ch <- resourceObjectsDesc
}

// Collect implements prometheus.Collector: counts read when scraped, -1
// where the backend cannot count.
func (o *objectCounts) Collect(ch chan<- prometheus.Metric) {
	o.mu.Lock()
	prefixes := maps.Clone(o.prefixes)
	o.mu.Unlock()
	counter, canCount := o.backend.(storage.Counter)
	for gr, prefix := range prefixes {
		n := int64(-1)
		if canCount {
			if c, err := counter.Count(context.Background(), prefix); err == nil {
				n = c
			}
		}
		ch <- prometheus.MustNewConstMetric(resourceObjectsDesc, prometheus.GaugeValue, float64(n), gr.Group, gr.Resource)
	}
}

// handler serves the registry in Prometheus' text format.
func (m *serverMetrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}
