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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"

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
