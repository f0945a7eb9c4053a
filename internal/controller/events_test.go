package controller_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"

	"github.com/kubeembed/apiserver/internal/controller"
	"github.com/kubeembed/apiserver/internal/globals"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// TestMain sets klog's global logger, as a server's start does, before
// any test runs: the queue tests read it (klog.Background) while this
// package's server test would set it, and klog's setter is not safe for
// concurrent use.
func TestMain(m *testing.M) {
	globals.InitKlog()
	os.Exit(m.Run())
}

// Events writes what is recorded between Start and its stop as client-go's
// broadcaster would (named after the object, aggregated into a count when
// repeated), and is idle only once every event recorded is written.
func TestEventsWrittenAndCounted(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	client, err := srv.Clientset()
	require.NoError(t, err)
	cm, err := client.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	events := controller.NewEvents(client)
	rec := events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "tester", Host: "here"})

	rec.Event(cm, corev1.EventTypeNormal, "Early", "before Start: dropped, as a broadcaster's before it records")
	require.NoError(t, events.Idle())
	stop := events.Start()
	rec.Event(cm, corev1.EventTypeNormal, "Hello", "once")
	rec.Eventf(cm, corev1.EventTypeNormal, "Hello", "o%s", "nce")
	rec.WithLogger(logr.Discard()).Event(cm, "Loud", "Bad", "an unsupported type: dropped (its error log discarded)")
	rec.AnnotatedEventf(cm, map[string]string{"a": "b"}, corev1.EventTypeWarning, "Bye", "%d left", 0)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	require.NoError(t, controller.Wait(ctx, events.Idle))

	list, err := client.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=c"})
	require.NoError(t, err)
	got := map[string]corev1.Event{}
	for _, ev := range list.Items {
		got[ev.Reason] = ev
	}
	require.Len(t, got, 2, "%+v", got)
	assert.Equal(t, int32(2), got["Hello"].Count, "aggregated by the correlator")
	assert.Equal(t, corev1.EventSource{Component: "tester", Host: "here"}, got["Hello"].Source)
	assert.Equal(t, "tester", got["Hello"].ReportingController)
	assert.Equal(t, "here", got["Hello"].ReportingInstance)
	assert.Equal(t, cm.UID, got["Hello"].InvolvedObject.UID)
	assert.Regexp(t, `^c\.[0-9a-f]+$`, got["Hello"].Name)
	assert.Equal(t, map[string]string{"a": "b"}, got["Bye"].Annotations)
	assert.Equal(t, "0 left", got["Bye"].Message)

	stop()
	rec.Event(cm, corev1.EventTypeNormal, "Late", "after stop: dropped")
	assert.NoError(t, events.Idle())
}

// Events writes events.k8s.io/v1 events as client-go's tools/events
// broadcaster (kube-scheduler's) does: the same fields, a repeat patched
// into a series of count 2, later repeats only counted; idle once written.
// The broadcaster writes the same events beside them for comparison.
func TestEventsV1AsTheBroadcaster(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	client, err := srv.Clientset()
	require.NoError(t, err)
	record := func(rec events.EventRecorder, ns string) {
		_, err := client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
		cm, err := client.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		related := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}}
		again := func() { rec.Eventf(cm, related, corev1.EventTypeWarning, "Again", "Testing", "%d times", 3) }
		// The broadcaster writes each event from a goroutine of its own: a
		// repeat's patch before the first's create would be retried 10 s
		// later. The first is written before the repeats.
		again()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			list, err := client.EventsV1().Events(ns).List(t.Context(), metav1.ListOptions{})
			require.NoError(c, err)
			assert.Len(c, list.Items, 1)
		}, 10*time.Second, time.Millisecond)
		again()
		again()
		rec.Eventf(cm, nil, corev1.EventTypeNormal, "Once", "Testing", "just once")
	}
	mine := controller.NewEvents(client)
	stop := mine.Start()
	defer stop()
	record(mine.NewEventsV1Recorder(scheme.Scheme, "tester"), "mine")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	require.NoError(t, controller.Wait(ctx, mine.Idle))

	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	defer broadcaster.Shutdown()
	require.NoError(t, broadcaster.StartRecordingToSinkWithContext(t.Context()))
	record(broadcaster.NewRecorder(scheme.Scheme, "tester"), "theirs")

	comparable := func(ns string) map[string]eventsv1.Event {
		list, err := client.EventsV1().Events(ns).List(t.Context(), metav1.ListOptions{})
		require.NoError(t, err)
		byReason := map[string]eventsv1.Event{}
		for _, ev := range list.Items {
			ev.ObjectMeta = metav1.ObjectMeta{}
			ev.EventTime, ev.DeprecatedFirstTimestamp, ev.DeprecatedLastTimestamp = metav1.MicroTime{}, metav1.Time{}, metav1.Time{}
			ev.Regarding.UID, ev.Regarding.ResourceVersion, ev.Regarding.Namespace = "", "", ""
			if ev.Related != nil {
				ev.Related.Namespace = ""
			}
			if ev.Series != nil {
				ev.Series.LastObservedTime = metav1.MicroTime{}
			}
			byReason[ev.Reason] = ev
		}
		return byReason
	}
	got := comparable("mine")
	require.Len(t, got, 2)
	assert.Equal(t, int32(2), got["Again"].Series.Count)
	host, _ := os.Hostname()
	assert.Equal(t, "tester-"+host, got["Again"].ReportingInstance)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		theirs := comparable("theirs")
		require.Len(c, theirs, 2)
		require.NotNil(c, theirs["Again"].Series)
		assert.Equal(c, theirs, got)
	}, 10*time.Second, 10*time.Millisecond)
}
