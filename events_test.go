package apiserver_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// Events written through events.k8s.io/v1 are core/v1 events and back.
func TestEventsBothGroups(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	ctx := t.Context()
	now := metav1.NewMicroTime(time.Now().Truncate(time.Microsecond))

	created, err := c.EventsV1().Events("default").Create(ctx, &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-started"},
		EventTime:  now, ReportingController: "example.com/ctrl", ReportingInstance: "ctrl-1",
		Action: "Start", Reason: "Started", Type: corev1.EventTypeNormal, Note: "started the pod",
		Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "started the pod", created.Note)

	legacy, err := c.CoreV1().Events("default").Get(ctx, "pod-started", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "started the pod", legacy.Message)
	assert.Equal(t, "web", legacy.InvolvedObject.Name)
	assert.Equal(t, "example.com/ctrl", legacy.ReportingController)
	assert.Equal(t, created.ResourceVersion, legacy.ResourceVersion)

	list, err := c.EventsV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=web"})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)

	// events.k8s.io/v1 requires what core/v1 does not.
	_, err = c.EventsV1().Events("default").Create(ctx, &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "incomplete"}, Type: corev1.EventTypeNormal,
	}, metav1.CreateOptions{})
	require.Error(t, err)
	st := statusOf(t, err)
	assert.Equal(t, int32(http.StatusUnprocessableEntity), st.Code)
	var fields []string
	for _, c := range st.Details.Causes {
		fields = append(fields, c.Field)
	}
	assert.Subset(t, fields, []string{"eventTime", "reportingController", "reportingInstance", "action", "reason"})
}
