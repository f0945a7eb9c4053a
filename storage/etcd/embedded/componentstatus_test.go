package embedded_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeembed/apiserver"
)

// A server storing in etcd reports it as kube-apiserver does: one
// component etcd-0 for its storage, healthy with the message "ok".
func TestComponentStatusesReportEtcd(t *testing.T) {
	t.Parallel()
	srv, _ := startOn(t, t.TempDir(), apiserver.Options{Profile: apiserver.ProfileEnvtest})
	client, _ := clients(t, srv)
	cs, err := client.CoreV1().ComponentStatuses().Get(t.Context(), "etcd-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []corev1.ComponentCondition{{Type: corev1.ComponentHealthy, Status: corev1.ConditionTrue, Message: "ok"}}, cs.Conditions)
	list, err := client.CoreV1().ComponentStatuses().List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	var names []string
	for _, c := range list.Items {
		names = append(names, c.Name)
	}
	assert.Equal(t, []string{"controller-manager", "etcd-0", "scheduler"}, names)
}
