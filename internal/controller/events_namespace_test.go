package controller_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeembed/apiserver/internal/controller"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// An event written into a namespace that is gone is refused by namespace
// admission with the namespace's NotFound, which Events does not log as an
// error; another NotFound is not that.
func TestNamespaceGone(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c, err := srv.Clientset()
	require.NoError(t, err)
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e"},
		InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Namespace: "gone", Name: "c"}, Reason: "R", Message: "m"}
	_, err = c.CoreV1().Events("gone").Create(t.Context(), ev, metav1.CreateOptions{})
	require.Error(t, err)
	assert.True(t, controller.NamespaceGone(err, "gone"), "%v", err)
	assert.False(t, controller.NamespaceGone(err, "other"))

	_, err = c.CoreV1().Events("default").Patch(t.Context(), "missing", "application/strategic-merge-patch+json", []byte(`{}`), metav1.PatchOptions{})
	require.Error(t, err)
	assert.False(t, controller.NamespaceGone(err, "default"), "%v", err)
}
