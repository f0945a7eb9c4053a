package controller

// events.k8s.io/v1 events, as client-go's tools/events broadcaster writes
// them for kube-scheduler, through Events' queue.

import (
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record/util"
	"k8s.io/client-go/tools/reference"
	"k8s.io/klog/v2"
)

// The broadcaster's periods: a series not observed for seriesFinish is
// written a last time and forgotten (a single event is forgotten), and
// every seriesRefresh the series are written again.
const (
	seriesFinish  = 6 * time.Minute
	seriesRefresh = 30 * time.Minute
)

// seriesKey is what makes two events isomorphic: the broadcaster counts
// the second and later into the first's series.
type seriesKey struct {
	eventType, action, reason, reportingController, reportingInstance string
	regarding, related                                                corev1.ObjectReference
}

func keyOf(ev *eventsv1.Event) seriesKey {
	k := seriesKey{eventType: ev.Type, action: ev.Action, reason: ev.Reason, reportingController: ev.ReportingController,
		reportingInstance: ev.ReportingInstance, regarding: ev.Regarding}
	if ev.Related != nil {
		k.related = *ev.Related
	}
	return k
}

// seriesTick is a queued turn of the broadcaster's periodic work.
type seriesTick struct{ refresh bool }

// NewEventsV1Recorder returns a recorder of events.k8s.io/v1 events from
// controller, as a broadcaster's NewRecorder (the reporting instance is
// controller-hostname).
func (e *Events) NewEventsV1Recorder(scheme *runtime.Scheme, controller string) events.EventRecorderLogger {
	host, _ := os.Hostname()
	e.mu.Lock()
	e.v1 = true
	e.startTicking()
	e.mu.Unlock()
	return &recorderV1{events: e, scheme: scheme, controller: controller, instance: controller + "-" + host, logger: klog.Background()}
}

// recorderV1 records events.k8s.io/v1 events into Events, as client-go's.
type recorderV1 struct {
	events               *Events
	scheme               *runtime.Scheme
	controller, instance string
	logger               klog.Logger
}

var _ events.EventRecorderLogger = (*recorderV1)(nil)

func (r *recorderV1) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	now := time.Now()
	message := fmt.Sprintf(note, args...)
	ref, err := reference.GetReference(r.scheme, regarding)
	if err != nil {
		r.logger.Error(err, "Could not construct reference, will not report event", "object", regarding, "eventType", eventtype, "reason", reason, "message", message)
		return
	}
	var relatedRef *corev1.ObjectReference
	if related != nil {
		relatedRef, _ = reference.GetReference(r.scheme, related)
	}
	if !util.ValidateEventType(eventtype) {
		r.logger.Error(nil, "Unsupported event type", "eventType", eventtype)
		return
	}
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	r.events.add(&eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: util.GenerateEventName(ref.Name, now.UnixNano()), Namespace: ns},
		EventTime:  metav1.MicroTime{Time: now}, ReportingController: r.controller, ReportingInstance: r.instance,
		Action: action, Reason: reason, Regarding: *ref, Related: relatedRef, Note: message, Type: eventtype,
	})
}

func (r *recorderV1) WithLogger(logger klog.Logger) events.EventRecorderLogger {
	c := *r
	c.logger = logger
	return &c
}

// writeV1 writes ev as the broadcaster: the first of its kind is created;
// the second starts a series of count 2, patched onto the first; later ones
// only count, written with the series' next periodic write.
func (e *Events) writeV1(ev *eventsv1.Event) {
	e.mu.Lock()
	key := keyOf(ev)
	first, isomorphic := e.series[key]
	var write *eventsv1.Event
	switch {
	case !isomorphic:
		e.series[key] = ev
		write = ev.DeepCopy()
	case first.Series != nil:
		first.Series.Count++
		first.Series.LastObservedTime = metav1.MicroTime{Time: time.Now()}
	default:
		first.Series = &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.MicroTime{Time: time.Now()}}
		write = first.DeepCopy()
	}
	e.mu.Unlock()
	if write != nil {
		e.recordV1(write)
	}
}

// tickV1 is the broadcaster's periodic work on the series: refresh writes
// every series again; otherwise a series not observed for seriesFinish is
// written a last time and forgotten, and so is (unwritten) a single event
// that old.
func (e *Events) tickV1(refresh bool) {
	e.mu.Lock()
	var write []*eventsv1.Event
	for key, ev := range e.series {
		switch {
		case ev.Series != nil && refresh:
			write = append(write, ev.DeepCopy())
		case refresh:
		case ev.Series != nil && time.Since(ev.Series.LastObservedTime.Time) > seriesFinish:
			write = append(write, ev.DeepCopy())
			delete(e.series, key)
		case ev.Series == nil && time.Since(ev.EventTime.Time) > seriesFinish:
			delete(e.series, key)
		}
	}
	e.mu.Unlock()
	for _, ev := range write {
		e.recordV1(ev)
	}
}

// recordV1 creates ev, or for a series patches the event it counts into
// (creating it when that is gone), as the broadcaster's recordEvent.
func (e *Events) recordV1(ev *eventsv1.Event) {
	ctx, client := e.ctx, e.client.EventsV1().Events(ev.Namespace)
	var err error
	if ev.Series != nil {
		var patch []byte
		if patch, err = seriesPatch(ev); err != nil {
			klog.Background().Error(err, "Unable to calculate diff, no merge is possible")
			return
		}
		_, err = client.Patch(ctx, ev.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	}
	if ev.Series == nil || util.IsKeyNotFoundError(err) {
		ev.ResourceVersion = ""
		_, err = client.Create(ctx, ev, metav1.CreateOptions{})
	}
	e.refused(err, ev.Namespace, ev)
}

// refused logs a write's refusal (err, of an event in namespace), as the
// broadcasters do: quietly when it was expected.
func (e *Events) refused(err error, namespace string, ev runtime.Object) {
	switch {
	case err == nil:
	case e.ctx.Err() != nil:
		// Stopped: the controller ends with its server.
	case apierrors.IsAlreadyExists(err) || apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) ||
		NamespaceGone(err, namespace):
		klog.V(5).Info("Server rejected event (will not retry!)", "event", ev, "err", err)
	default:
		klog.Background().Error(err, "Server rejected event (will not retry!)", "event", ev)
	}
}

// seriesPatch is the strategic merge patch from ev without its series to
// ev.
func seriesPatch(ev *eventsv1.Event) ([]byte, error) {
	old := ev.DeepCopy()
	old.Series = nil
	return TwoWayPatch(old, ev)
}
