package scheduler

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A refusal because the event's namespace terminates or is gone is
// reported as written (the broadcaster would log it as an error); any
// other error is the sink's.
func TestQuietSink(t *testing.T) {
	t.Parallel()
	terminating := apierrors.NewForbidden(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "e",
		errors.New("unable to create new content in namespace ns because it is being terminated"))
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}
	gone := apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "ns")
	other := apierrors.NewNotFound(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "e")
	for _, tc := range []struct {
		err   error
		quiet bool
	}{{terminating, true}, {gone, true}, {other, false}, {errors.New("broken"), false}} {
		ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns"}}
		out, err := quietSink{failingSink{tc.err}}.Create(context.Background(), ev)
		if tc.quiet {
			assert.NoError(t, err)
			assert.Same(t, ev, out)
		} else {
			assert.Equal(t, tc.err, err)
		}
	}
}

type failingSink struct{ err error }

func (s failingSink) Create(context.Context, *eventsv1.Event) (*eventsv1.Event, error) {
	return nil, s.err
}
func (s failingSink) Update(context.Context, *eventsv1.Event) (*eventsv1.Event, error) {
	return nil, s.err
}
func (s failingSink) Patch(context.Context, *eventsv1.Event, []byte) (*eventsv1.Event, error) {
	return nil, s.err
}
