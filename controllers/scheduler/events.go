package scheduler

// The sink of the scheduler's events.

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"

	"github.com/kubeembed/apiserver/internal/controller"
)

// quietSink writes the scheduler's events (events.k8s.io/v1, as
// kube-scheduler writes them) and reports a refusal because the event's
// namespace is terminating or gone as written: client-go's events
// broadcaster logs that refusal as an error, where its core/v1 broadcaster
// (and internal/controller's Events) log it at V(5). A pod scheduled while
// its namespace is deleted is no fault of the test's: the reliability soak
// saw the Scheduled event of a Deployment's pod refused so, written after
// the namespace's deletion began. The event is dropped either way, as the
// broadcaster does not retry a refusal.
type quietSink struct{ events.EventSink }

func (s quietSink) Create(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	out, err := s.EventSink.Create(ctx, ev)
	return quietly(ev, out, err)
}

func (s quietSink) Update(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	out, err := s.EventSink.Update(ctx, ev)
	return quietly(ev, out, err)
}

func (s quietSink) Patch(ctx context.Context, old *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	out, err := s.EventSink.Patch(ctx, old, data)
	return quietly(old, out, err)
}

func quietly(ev, out *eventsv1.Event, err error) (*eventsv1.Event, error) {
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) || controller.NamespaceGone(err, ev.Namespace) {
		return ev, nil
	}
	return out, err
}
