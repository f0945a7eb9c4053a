package controlplane

// API Priority and Fairness' metrics of one server. k8s.io/apiserver's
// priority and fairness records them in package-level vectors (and its
// in-flight watermarks in package-level counters), which two servers of
// one process would share; kubeembed decorates the flowcontrol Interface
// instead, and sees each request classified, queued, dispatched or
// rejected, as upstream's queue sets note it.

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	epmetrics "k8s.io/apiserver/pkg/endpoints/metrics"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	fq "k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing"
	"k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing/eventclock"
	fqs "k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing/queueset"
	fcmetrics "k8s.io/apiserver/pkg/util/flowcontrol/metrics"
	fcrequest "k8s.io/apiserver/pkg/util/flowcontrol/request"
	kubeinformers "k8s.io/client-go/informers"
	flowcontrolclient "k8s.io/client-go/kubernetes/typed/flowcontrol/v1"
)

// Upstream's buckets (k8s.io/apiserver/pkg/util/flowcontrol/metrics).
var (
	flowDurationBuckets = []float64{0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30}
	flowSeatsBuckets    = []float64{1, 2, 4, 8, 16, 32, 64, 100}
)

// flowMetrics are the per-request families of priority and fairness, by
// priority level and flow schema, and the server's in-flight watermarks.
type flowMetrics struct {
	rejected, dispatched            *prometheus.CounterVec
	inqueue, inqueueSeats           *prometheus.GaugeVec
	executing, executingSeats       *prometheus.GaugeVec
	wait, execution, estimatedSeats *prometheus.HistogramVec
	inflight                        *watermarks
	limits                          *seatLimits
}

func newFlowMetrics(limits *seatLimits) *flowMetrics {
	byFlow := []string{"priority_level", "flow_schema"}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "apiserver", Subsystem: "flowcontrol", Name: name, Help: help},
			append(append([]string{}, byFlow...), labels...))
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "apiserver", Subsystem: "flowcontrol", Name: name, Help: help}, byFlow)
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "apiserver", Subsystem: "flowcontrol", Name: name, Help: help,
			Buckets: buckets}, append(append([]string{}, byFlow...), labels...))
	}
	return &flowMetrics{
		rejected:   counter("rejected_requests_total", "[BETA] Number of requests rejected by API Priority and Fairness subsystem", "reason"),
		dispatched: counter("dispatched_requests_total", "[BETA] Number of requests executed by API Priority and Fairness subsystem"),
		inqueue:    gauge("current_inqueue_requests", "[BETA] Number of requests currently pending in queues of the API Priority and Fairness subsystem"),
		inqueueSeats: gauge("current_inqueue_seats",
			"[ALPHA] Number of seats currently pending in queues of the API Priority and Fairness subsystem"),
		executing: gauge("current_executing_requests",
			"[BETA] Number of requests in initial (for a WATCH) or any (for a non-WATCH) execution stage in the API Priority and Fairness subsystem"),
		executingSeats: gauge("current_executing_seats",
			"[BETA] Concurrency (number of seats) occupied by the currently executing (initial stage for a WATCH, any stage otherwise) requests in the API Priority and Fairness subsystem"),
		wait: histogram("request_wait_duration_seconds", "[BETA] Length of time a request spent waiting in its queue", flowDurationBuckets, "execute"),
		execution: histogram("request_execution_seconds",
			"[ALPHA] Duration of initial stage (for a WATCH) or any (for a non-WATCH) stage of request execution in the API Priority and Fairness subsystem",
			flowDurationBuckets, "type"),
		estimatedSeats: histogram("work_estimated_seats",
			"[ALPHA] Number of estimated seats (maximum of initial and final seats) associated with requests in API Priority and Fairness", flowSeatsBuckets),
		inflight: newWatermarks(time.Now),
		limits:   limits,
	}
}

func (m *flowMetrics) register(r *prometheus.Registry) {
	r.MustRegister(m.rejected, m.dispatched, m.inqueue, m.inqueueSeats, m.executing, m.executingSeats,
		m.wait, m.execution, m.estimatedSeats, m.inflight, m.limits)
}

// priorityAndFairness returns API Priority and Fairness as
// utilflowcontrol.New builds it, its metrics in the server's registry:
// the same configuration, but for the vector its priority levels' seat
// gauges come from, which is upstream's wrapped to learn each level's
// current limit (see seatLimits).
func (m *serverMetrics) priorityAndFairness(informers kubeinformers.SharedInformerFactory, client flowcontrolclient.FlowcontrolV1Interface,
	serverConcurrencyLimit int) utilflowcontrol.Interface {
	limits := newSeatLimits(informers.Flowcontrol().V1().PriorityLevelConfigurations().Lister(), serverConcurrencyLimit)
	clock := eventclock.Real{}
	apf := utilflowcontrol.NewTestable(utilflowcontrol.TestableConfig{
		Name:                   "Controller",
		Clock:                  clock,
		AsFieldManager:         utilflowcontrol.ConfigConsumerAsFieldManager,
		FoundToDangling:        func(found bool) bool { return !found },
		InformerFactory:        informers,
		FlowcontrolClient:      client,
		ServerConcurrencyLimit: serverConcurrencyLimit,
		ReqsGaugeVec:           fcmetrics.PriorityLevelConcurrencyGaugeVec,
		ExecSeatsGaugeVec:      limits.observe(fcmetrics.PriorityLevelExecutionSeatsGaugeVec),
		QueueSetFactory:        fqs.NewQueueSetFactory(clock),
	})
	flow := newFlowMetrics(limits)
	flow.register(m.registry)
	return meteredFlowControl{Interface: apf, metrics: flow}
}

// meteredFlowControl is priority and fairness noting what it does with
// each request in the server's metrics.
type meteredFlowControl struct {
	utilflowcontrol.Interface
	metrics *flowMetrics
}

// Handle implements utilflowcontrol.Interface: the callbacks are
// upstream's points of note (classified, estimated, in and out of a
// queue, dispatched); a request it returns without dispatching was
// rejected.
func (f meteredFlowControl) Handle(ctx context.Context, digest utilflowcontrol.RequestDigest,
	noteFn func(*flowcontrolv1.FlowSchema, *flowcontrolv1.PriorityLevelConfiguration, string),
	workEstimator func() fcrequest.WorkEstimate, queueNoteFn fq.QueueNoteFn, execFn func()) {
	r := &flowRequest{metrics: f.metrics, kind: requestKind(digest), watch: digest.RequestInfo != nil && digest.RequestInfo.Verb == "watch"}
	f.Interface.Handle(ctx, digest,
		func(fs *flowcontrolv1.FlowSchema, pl *flowcontrolv1.PriorityLevelConfiguration, distinguisher string) {
			r.classified(fs, pl)
			noteFn(fs, pl, distinguisher)
		},
		func() fcrequest.WorkEstimate {
			estimate := workEstimator()
			r.estimated(estimate)
			return estimate
		},
		func(inQueue bool) {
			r.queued(inQueue)
			if queueNoteFn != nil {
				queueNoteFn(inQueue)
			}
		},
		func() { r.execute(execFn) })
	r.finished()
}

// requestKind is kube-apiserver's request_kind: get, list and watch are
// read-only, every other verb mutating.
func requestKind(digest utilflowcontrol.RequestDigest) int {
	if digest.RequestInfo != nil && readOnlyVerbs.Has(digest.RequestInfo.Verb) {
		return readOnly
	}
	return mutating
}

var readOnlyVerbs = sets.New("get", "list", "watch")

// flowRequest is one request through priority and fairness.
type flowRequest struct {
	metrics *flowMetrics
	kind    int
	watch   bool
	// pl and fs are the priority level's and flow schema's names; reject
	// says the level rejects rather than queues what it cannot serve.
	pl, fs         string
	exempt, reject bool
	seats          int
	// waitFrom is when a limited request starts to wait, as upstream
	// times it: once classified and estimated.
	waitFrom         time.Time
	wasQueued        bool
	inQueue, started bool
}

func (r *flowRequest) classified(fs *flowcontrolv1.FlowSchema, pl *flowcontrolv1.PriorityLevelConfiguration) {
	r.pl, r.fs = pl.Name, fs.Name
	r.exempt = pl.Spec.Type == flowcontrolv1.PriorityLevelEnablementExempt
	r.reject = !r.exempt && pl.Spec.Limited != nil && pl.Spec.Limited.LimitResponse.Type == flowcontrolv1.LimitResponseTypeReject
}

func (r *flowRequest) estimated(estimate fcrequest.WorkEstimate) {
	r.seats = estimate.MaxSeats()
	r.metrics.estimatedSeats.WithLabelValues(r.pl, r.fs).Observe(float64(r.seats))
	if !r.exempt {
		r.waitFrom = time.Now()
	}
}

func (r *flowRequest) queued(in bool) {
	delta := 1
	if !in {
		delta = -1
	}
	r.wasQueued = r.wasQueued || in
	r.inQueue = in
	r.metrics.inqueue.WithLabelValues(r.pl, r.fs).Add(float64(delta))
	r.metrics.inqueueSeats.WithLabelValues(r.pl, r.fs).Add(float64(delta * r.seats))
	r.metrics.inflight.add(waiting, r.kind, delta)
}

// execute runs the request's handler as dispatched, executing (for a
// watch: its initial stage, which is all of execFn) until it returns.
func (r *flowRequest) execute(execFn func()) {
	r.started = true
	m := r.metrics
	if !r.waitFrom.IsZero() {
		m.wait.WithLabelValues(r.pl, r.fs, "true").Observe(time.Since(r.waitFrom).Seconds())
	}
	m.dispatched.WithLabelValues(r.pl, r.fs).Inc()
	m.executing.WithLabelValues(r.pl, r.fs).Inc()
	m.executingSeats.WithLabelValues(r.pl, r.fs).Add(float64(r.seats))
	m.inflight.add(executing, r.kind, 1)
	start := time.Now()
	defer func() {
		stage := "regular"
		if r.watch {
			stage = "watch"
		}
		m.execution.WithLabelValues(r.pl, r.fs, stage).Observe(time.Since(start).Seconds())
		m.executing.WithLabelValues(r.pl, r.fs).Dec()
		m.executingSeats.WithLabelValues(r.pl, r.fs).Sub(float64(r.seats))
		m.inflight.add(executing, r.kind, -1)
	}()
	execFn()
}

// finished notes a request priority and fairness did not dispatch, with
// upstream's reason: it waited in a queue until its wait context ended
// (time-out), or it was turned away at once, by a level that rejects
// (concurrency-limit) or by a full queue (queue-full). Upstream's execute
// label of the wait is whether the request got into a queue.
func (r *flowRequest) finished() {
	if r.started || r.pl == "" {
		return
	}
	reason := "queue-full"
	switch {
	case r.wasQueued:
		reason = "time-out"
	case r.reject:
		reason = "concurrency-limit"
	}
	r.metrics.rejected.WithLabelValues(r.pl, r.fs, reason).Inc()
	if !r.waitFrom.IsZero() {
		queued := "false"
		if r.wasQueued {
			queued = "true"
		}
		r.metrics.wait.WithLabelValues(r.pl, r.fs, queued).Observe(time.Since(r.waitFrom).Seconds())
	}
}

// Request kinds and phases of the watermarks.
const (
	readOnly, mutating = 0, 1
	executing, waiting = 0, 1
)

// watermarks are apiserver_current_inflight_requests and
// apiserver_current_inqueue_requests: the most requests of each kind
// executing (waiting) at once during the last whole second, as upstream's
// filter reports them from a ticker; kubeembed rolls the seconds over when
// a request comes or the metrics are read, which needs no goroutine.
type watermarks struct {
	now func() time.Time
	mu  sync.Mutex
	// second is when the current second began; level the requests now,
	// high their most this second, last the most of the second before,
	// each by phase and kind.
	second            time.Time
	level, high, last [2][2]int
}

func newWatermarks(now func() time.Time) *watermarks {
	return &watermarks{now: now, second: now()}
}

func (w *watermarks) add(phase, kind, delta int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.roll()
	w.level[phase][kind] += delta
	w.high[phase][kind] = max(w.high[phase][kind], w.level[phase][kind])
}

// roll starts a new second if one has passed: upstream resets its marks to
// zero each second, so a second without any change reports zero.
func (w *watermarks) roll() {
	elapsed := w.now().Sub(w.second)
	if elapsed < time.Second {
		return
	}
	w.last = w.high
	if elapsed >= 2*time.Second {
		w.last = [2][2]int{}
	}
	w.high = [2][2]int{}
	w.second = w.second.Add(elapsed.Truncate(time.Second))
}

var (
	inflightDesc = prometheus.NewDesc("apiserver_current_inflight_requests",
		"[STABLE] Maximal number of currently used inflight request limit of this apiserver per request kind in last second.",
		[]string{"request_kind"}, nil)
	inqueueDesc = prometheus.NewDesc("apiserver_current_inqueue_requests",
		"[ALPHA] Maximal number of queued requests in this apiserver per request kind in last second.",
		[]string{"request_kind"}, nil)
)

// Describe implements prometheus.Collector.
func (w *watermarks) Describe(ch chan<- *prometheus.Desc) {
	ch <- inflightDesc
	ch <- inqueueDesc
}

// Collect implements prometheus.Collector.
func (w *watermarks) Collect(ch chan<- prometheus.Metric) {
	w.mu.Lock()
	w.roll()
	last := w.last
	w.mu.Unlock()
	for phase, desc := range []*prometheus.Desc{executing: inflightDesc, waiting: inqueueDesc} {
		for kind, name := range []string{readOnly: epmetrics.ReadOnlyKind, mutating: epmetrics.MutatingKind} {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(last[phase][kind]), name)
		}
	}
}

// limitGauge is a priority level's gauge of seats in use, noting the
// denominator priority and fairness gives it.
type limitGauge struct {
	fcmetrics.RatioedGauge
	denominator atomic.Uint64 // float64 bits
}

// SetDenominator implements fcmetrics.RatioedGauge.
func (g *limitGauge) SetDenominator(d float64) {
	g.denominator.Store(math.Float64bits(d))
	g.RatioedGauge.SetDenominator(d)
}

func (g *limitGauge) get() float64 { return math.Float64frombits(g.denominator.Load()) }
