package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Queue is a rate-limited work queue (client-go's, named as
// kube-controller-manager names it, reporting to the server's metrics) that
// knows when it is idle.
type Queue struct {
	workqueue.TypedRateLimitingInterface[string]
	name string
	// outstanding is items added and not yet done: the queue's depth
	// plus the items in workers. It is kept by the queue's own metrics
	// calls, made under the queue's lock.
	outstanding atomic.Int64
	// done counts the items workers finished, for WaitIdle's rounds.
	done atomic.Uint64

	mu sync.Mutex
	// retrying are the items waiting to be retried after an error, with
	// the error.
	retrying map[string]error
	// timers are the items AddAfterOn put off on a clock of a test's, by
	// key: one each, the earliest (as the queue's own AddAfter keeps).
	timers   map[string]timer
	timerSeq uint64
}

type timer struct {
	at time.Time
	// seq tells this wait from a later one of the same key; t is nil
	// until AddAfterOn has made the timer.
	seq uint64
	t   clock.Timer
}

// NewQueue returns a queue named name (its workqueue metrics' label)
// reporting to metrics, which may be nil.
func NewQueue(name string, metrics workqueue.MetricsProvider) *Queue {
	q := &Queue{name: name, retrying: map[string]error{}, timers: map[string]timer{}}
	q.TypedRateLimitingInterface = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name, MetricsProvider: idleMetrics{q, metrics}})
	return q
}

// Run calls sync for each item with workers goroutines until ctx ends,
// then shuts the queue down and waits for them. An item whose sync fails
// is retried with backoff; one that succeeds is forgotten.
func (q *Queue) Run(ctx context.Context, workers int, work func(ctx context.Context, key string) error) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for q.next(ctx, work) {
			}
		})
	}
	<-ctx.Done()
	q.ShutDown()
	wg.Wait()
}

func (q *Queue) next(ctx context.Context, sync func(ctx context.Context, key string) error) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	defer q.done.Add(1)
	err := sync(ctx, key)
	q.mu.Lock()
	defer q.mu.Unlock()
	var later *Later
	switch {
	case err == nil || ctx.Err() != nil:
		delete(q.retrying, key)
		q.Forget(key)
	case errors.As(err, &later):
		delete(q.retrying, key)
		q.Forget(key)
		q.AddAfter(key, later.After)
	default:
		klog.FromContext(ctx).V(4).Info("Retrying", "queue", q.name, "key", key, "err", err)
		q.retrying[key] = err
		q.AddRateLimited(key)
	}
	return true
}

// AddAfterOn adds key after d of clk: the queue's own delay when clk is
// the real clock (or nil), a timer of clk otherwise, so that a fake clock
// a test steps brings the item back (and WaitIdle sees it once due). As
// the queue's AddAfter, a key waits once, for the earliest time asked;
// ShutDown stops the timers.
//
// clk's timers are made and stopped without q.mu held: a fake clock runs
// a due timer's function (which takes q.mu) under its own lock, so
// calling it under q.mu would deadlock with a test's Step.
func (q *Queue) AddAfterOn(clk clock.WithDelayedExecution, key string, d time.Duration) {
	if _, real := clk.(clock.RealClock); real || clk == nil {
		q.AddAfter(key, d)
		return
	}
	at := clk.Now().Add(d)
	q.mu.Lock()
	old, ok := q.timers[key]
	if ok && !old.at.After(at) {
		q.mu.Unlock()
		return
	}
	q.timerSeq++
	seq := q.timerSeq
	q.timers[key] = timer{at: at, seq: seq}
	q.mu.Unlock()
	if old.t != nil {
		old.t.Stop()
	}
	t := clk.AfterFunc(d, func() {
		q.mu.Lock()
		if w, ok := q.timers[key]; ok && w.seq == seq {
			delete(q.timers, key)
		}
		q.mu.Unlock()
		q.Add(key)
	})
	q.mu.Lock()
	defer q.mu.Unlock()
	if w, ok := q.timers[key]; ok && w.seq == seq {
		w.t = t
		q.timers[key] = w
		return
	}
	t.Stop() // replaced by an earlier wait or shut down meanwhile (or fired: Stop does nothing)
}

// ShutDown stops AddAfterOn's timers and shuts the queue down.
func (q *Queue) ShutDown() {
	q.mu.Lock()
	timers := q.timers
	q.timers = map[string]timer{}
	q.mu.Unlock()
	for _, w := range timers {
		if w.t != nil {
			w.t.Stop()
		}
	}
	q.TypedRateLimitingInterface.ShutDown()
}

// Later is the error a sync returns to be called again after a while for
// a reason that is not a failure: it waits for someone else (a finalizer,
// a grace period). The queue is idle meanwhile.
type Later struct {
	After  time.Duration
	Reason string
}

func (l *Later) Error() string { return fmt.Sprintf("%s: again in %v", l.Reason, l.After) }

// Idle returns nil if the queue is empty, no worker holds an item and no
// item waits to be retried after an error; otherwise why not.
func (q *Queue) Idle() error {
	if n := q.outstanding.Load(); n > 0 {
		return fmt.Errorf("queue %s: %d items to do", q.name, n)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for key, err := range q.retrying {
		return fmt.Errorf("queue %s: %q is retried after: %w", q.name, key, err)
	}
	return nil
}

// Finished counts the items workers have finished.
func (q *Queue) Finished() uint64 { return q.done.Load() }

// idleMetrics keeps Queue.outstanding from the workqueue's own metrics
// calls (made under its lock, so the count is never seen between states):
// depth goes up when an item is added (again, while in a worker too), and
// work duration is observed when a worker is done with it. The calls are
// passed on to the server's metrics.
type idleMetrics struct {
	q    *Queue
	next workqueue.MetricsProvider
}

func (m idleMetrics) provider() workqueue.MetricsProvider {
	if m.next == nil {
		return noMetrics{}
	}
	return m.next
}

func (m idleMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return depth{m.provider().NewDepthMetric(name), &m.q.outstanding}
}

func (m idleMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return workDuration{m.provider().NewWorkDurationMetric(name), &m.q.outstanding}
}

func (m idleMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return m.provider().NewAddsMetric(name)
}

func (m idleMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return m.provider().NewLatencyMetric(name)
}

func (m idleMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.provider().NewUnfinishedWorkSecondsMetric(name)
}

func (m idleMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.provider().NewLongestRunningProcessorSecondsMetric(name)
}

func (m idleMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return m.provider().NewRetriesMetric(name)
}

type depth struct {
	workqueue.GaugeMetric
	outstanding *atomic.Int64
}

func (d depth) Inc() { d.outstanding.Add(1); d.GaugeMetric.Inc() }

type workDuration struct {
	workqueue.HistogramMetric
	outstanding *atomic.Int64
}

func (w workDuration) Observe(v float64) { w.outstanding.Add(-1); w.HistogramMetric.Observe(v) }

type noMetrics struct{}

type noMetric struct{}

func (noMetric) Inc()            {}
func (noMetric) Dec()            {}
func (noMetric) Set(float64)     {}
func (noMetric) Observe(float64) {}

func (noMetrics) NewDepthMetric(string) workqueue.GaugeMetric            { return noMetric{} }
func (noMetrics) NewAddsMetric(string) workqueue.CounterMetric           { return noMetric{} }
func (noMetrics) NewLatencyMetric(string) workqueue.HistogramMetric      { return noMetric{} }
func (noMetrics) NewWorkDurationMetric(string) workqueue.HistogramMetric { return noMetric{} }
func (noMetrics) NewRetriesMetric(string) workqueue.CounterMetric        { return noMetric{} }
func (noMetrics) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noMetric{}
}
func (noMetrics) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noMetric{}
}

// Wait polls every millisecond until idle returns nil or ctx ends; the
// error then names what was not idle.
func Wait(ctx context.Context, idle func() error) error {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		err := idle()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", ctx.Err(), err)
		case <-tick.C:
		}
	}
}
