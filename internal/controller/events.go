package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/tools/record/util"
	"k8s.io/client-go/tools/reference"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Events writes the core/v1 events a controller records, as client-go's
// event broadcaster writes them for kube-controller-manager and the kubelet
// (the same names, correlation, aggregation into counts and spam filter),
// and counts those not yet written: a controller's Idle (Parts.Events)
// waits for them, so a test that waits for the server to be idle sees the
// events of what the controllers did.
//
// Unlike client-go's broadcaster, which queues up to 1,000 events and drops
// the rest, it queues every event, and a write that fails is not retried
// after a sleep: the server is in the same process, so a failure is a
// refusal or the server closing. Events are written between Start and
// its stop, as a broadcaster's once it records to its sink (those
// recorded before are dropped, as upstream's); writes run in a goroutine
// of their own while events are queued. Stop drops what is queued and cuts
// off the write in flight: a controller stops as its server closes, which
// would refuse them (and client-go would retry a refusal with Retry-After
// for seconds).
type Events struct {
	client     kubernetes.Interface
	correlator *record.EventCorrelator
	// ctx is the writes' context, cancelled by stop.
	ctx    context.Context
	cancel context.CancelFunc

	mu sync.Mutex
	// queue holds *corev1.Event, *eventsv1.Event and seriesTick; the
	// first is being written.
	queue []any
	// series are the events.k8s.io/v1 events written, by what makes
	// them isomorphic (eventsv1.go).
	series  map[seriesKey]*eventsv1.Event
	v1      bool // a recorder of events.k8s.io/v1 events was made
	ticking bool // tick runs
	writing bool
	started bool
	stopped bool
	writer  sync.WaitGroup
}

// NewEvents returns the event writer of a controller whose client is
// client.
func NewEvents(client kubernetes.Interface) *Events {
	ctx, cancel := context.WithCancel(context.Background())
	return &Events{client: client, correlator: record.NewEventCorrelatorWithOptions(record.CorrelatorOptions{}), ctx: ctx, cancel: cancel,
		series: map[seriesKey]*eventsv1.Event{}}
}

// NewRecorder returns a recorder of events from source (as a
// broadcaster's NewRecorder: objects are referred to with scheme).
func (e *Events) NewRecorder(scheme *runtime.Scheme, source corev1.EventSource) record.EventRecorderLogger {
	return &recorder{events: e, scheme: scheme, source: source, logger: klog.Background()}
}

// Idle returns nil when every event recorded so far is written.
func (e *Events) Idle() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if n := len(e.queue); n > 0 {
		return fmt.Errorf("%d events not yet written", n)
	}
	return nil
}

// Start starts writing the events recorded from now on and returns what
// stops it: call that when the controller's Run ends. With a recorder of
// events.k8s.io/v1 events, the series' periodic writes start too.
func (e *Events) Start() (stop func()) {
	e.mu.Lock()
	e.started = true
	e.startTicking()
	e.mu.Unlock()
	return e.stop
}

// startTicking starts tick once Events is started and has a recorder of
// events.k8s.io/v1 events, whichever comes last. e.mu is held.
func (e *Events) startTicking() {
	if e.started && e.v1 && !e.ticking && !e.stopped {
		e.ticking = true
		e.writer.Go(e.tick)
	}
}

// tick queues the series' periodic work until stop.
func (e *Events) tick() {
	finish, refresh := time.NewTicker(seriesFinish), time.NewTicker(seriesRefresh)
	defer finish.Stop()
	defer refresh.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-finish.C:
			e.add(seriesTick{})
		case <-refresh.C:
			e.add(seriesTick{refresh: true})
		}
	}
}

// stop drops the events queued, cuts off the one being written and returns
// once its writer has; events recorded after it are dropped.
func (e *Events) stop() {
	e.mu.Lock()
	e.stopped = true
	if len(e.queue) > 1 {
		e.queue = e.queue[:1] // the one being written
	}
	e.mu.Unlock()
	e.cancel()
	e.writer.Wait()
	e.mu.Lock()
	e.queue = nil
	e.mu.Unlock()
}

// Reset forgets the events written so far (Server.Reset): the next event
// of a kind is new, not a repeat counted onto one the restore deleted, and
// none is held back as spam of an object whose earlier events were many.
func (e *Events) Reset() {
	e.mu.Lock()
	e.correlator = record.NewEventCorrelatorWithOptions(record.CorrelatorOptions{})
	e.series = map[seriesKey]*eventsv1.Event{}
	e.mu.Unlock()
}

// add queues ev and starts the writer if it is not running.
func (e *Events) add(ev any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.started || e.stopped {
		return
	}
	e.queue = append(e.queue, ev)
	if !e.writing {
		e.writing = true
		e.writer.Go(e.writeQueued)
	}
}

// writeQueued writes the queued events in order until none is left.
func (e *Events) writeQueued() {
	for {
		e.mu.Lock()
		if len(e.queue) == 0 || e.ctx.Err() != nil {
			e.writing = false
			e.mu.Unlock()
			return
		}
		ev := e.queue[0]
		e.mu.Unlock()
		switch ev := ev.(type) {
		case *corev1.Event:
			e.write(ev)
		case *eventsv1.Event:
			e.writeV1(ev)
		case seriesTick:
			e.tickV1(ev.refresh)
		}
		e.mu.Lock()
		e.queue[0] = nil
		e.queue = e.queue[1:]
		e.mu.Unlock()
	}
}

// write correlates ev with the events written before it, then creates it,
// or patches the event it aggregates into (creating it when that is gone).
func (e *Events) write(ev *corev1.Event) {
	e.mu.Lock()
	correlator := e.correlator
	e.mu.Unlock()
	result, err := correlator.EventCorrelate(ev)
	if err != nil {
		utilruntime.HandleError(err)
	}
	if result.Skip {
		return
	}
	ctx := e.ctx
	client := e.client.CoreV1().Events(result.Event.Namespace)
	var saved *corev1.Event
	update := result.Event.Count > 1
	if update {
		saved, err = client.Patch(ctx, result.Event.Name, types.StrategicMergePatchType, result.Patch, metav1.PatchOptions{})
	}
	if !update || util.IsKeyNotFoundError(err) {
		result.Event.ResourceVersion = ""
		saved, err = client.Create(ctx, result.Event, metav1.CreateOptions{})
	}
	if err == nil {
		correlator.UpdateState(saved)
	}
	e.refused(err, result.Event.Namespace, result.Event)
}

// NamespaceGone reports whether err refused a write because namespace no
// longer exists. client-go's broadcaster logs that as an error, but it is
// the end of a namespace's deletion, not a fault: a controller that synced
// an object its informer still had after the namespace went (the
// deployment controller recreating a ReplicaSet the namespace controller
// deleted) records its failure into the namespace that is gone. Quiet, as
// the same refusal while the namespace terminates is (the soak in
// reliability/ logged it once in about 20 namespace deletions).
func NamespaceGone(err error, namespace string) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Kind == "namespaces" && d.Name == namespace
}

// recorder records events of one source into Events, as client-go's.
type recorder struct {
	events *Events
	scheme *runtime.Scheme
	source corev1.EventSource
	logger klog.Logger
}

var _ record.EventRecorderLogger = (*recorder)(nil)

func (r *recorder) Event(obj runtime.Object, eventtype, reason, message string) {
	r.generate(obj, nil, eventtype, reason, message)
}

func (r *recorder) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	r.generate(obj, nil, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (r *recorder) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	r.generate(obj, annotations, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (r *recorder) WithLogger(logger klog.Logger) record.EventRecorderLogger {
	c := *r
	c.logger = logger
	return &c
}

// generate makes the event as client-go's recorder makes it (named after
// the object and the time, in the object's namespace or default) and
// queues it.
func (r *recorder) generate(obj runtime.Object, annotations map[string]string, eventtype, reason, message string) {
	ref, err := reference.GetReference(r.scheme, obj)
	if err != nil {
		r.logger.Error(err, "Could not construct reference, will not report event", "object", obj, "eventType", eventtype, "reason", reason, "message", message)
		return
	}
	if !util.ValidateEventType(eventtype) {
		r.logger.Error(nil, "Unsupported event type", "eventType", eventtype)
		return
	}
	t := metav1.Time{Time: clock.RealClock{}.Now()}
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	r.events.add(&corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: util.GenerateEventName(ref.Name, t.UnixNano()), Namespace: ns, Annotations: annotations},
		InvolvedObject: *ref, Reason: reason, Message: message, FirstTimestamp: t, LastTimestamp: t, Count: 1, Type: eventtype,
		Source: r.source, ReportingController: r.source.Component, ReportingInstance: r.source.Host,
	})
}
