package apiserver_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// The audit log is kube-apiserver's: a policy selects requests and levels,
// events are audit.k8s.io/v1, to a callback and to a file.
func TestAuditLog(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var events []*auditv1.Event
	logPath := filepath.Join(t.TempDir(), "audit.log")
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{
		AuditPolicy: &auditv1.Policy{
			OmitStages: []auditv1.Stage{auditv1.StageRequestReceived},
			Rules: []auditv1.PolicyRule{
				{Level: auditv1.LevelRequestResponse, Resources: []auditv1.GroupResources{{Resources: []string{"configmaps"}}},
					Verbs: []string{"create"}},
				{Level: auditv1.LevelNone},
			}},
		AuditLogPath: logPath,
		AuditEvents: func(ev *auditv1.Event) {
			// The server's own requests are audited too, as on
			// kube-apiserver (its hooks create ConfigMaps).
			if ev.User.Username != "kubeembed-admin" {
				return
			}
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		},
	}))
	_, err := clientset(t, srv).CoreV1().ConfigMaps("default").Create(t.Context(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "audited"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	mu.Lock()
	require.Len(t, events, 1, "one create, at ResponseComplete only; nothing else of the admin's matches")
	ev := events[0]
	mu.Unlock()
	assert.Equal(t, auditv1.LevelRequestResponse, ev.Level)
	assert.Equal(t, auditv1.StageResponseComplete, ev.Stage)
	assert.Equal(t, "create", ev.Verb)
	assert.Equal(t, "kubeembed-admin", ev.User.Username)
	assert.Equal(t, "configmaps", ev.ObjectRef.Resource)
	assert.Equal(t, "audited", ev.ObjectRef.Name)
	assert.Equal(t, int32(201), ev.ResponseStatus.Code)
	assert.Contains(t, string(ev.RequestObject.Raw), "audited")

	require.NoError(t, srv.Close())
	f, err := os.Open(logPath)
	require.NoError(t, err)
	defer f.Close()
	lines := bufio.NewScanner(f)
	found := false
	for lines.Scan() {
		var logged auditv1.Event
		require.NoError(t, json.Unmarshal(lines.Bytes(), &logged))
		assert.Equal(t, "Event", logged.Kind)
		assert.Equal(t, "audit.k8s.io/v1", logged.APIVersion)
		found = found || logged.AuditID == ev.AuditID
	}
	assert.True(t, found, "the log file has the event")
}

func TestAuditPolicyErrors(t *testing.T) {
	t.Parallel()
	bad := filepath.Join(t.TempDir(), "policy.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Loud}]\n"), 0o600))
	_, err := apiserver.New(apiserver.Options{AuditPolicyFile: bad})
	assert.ErrorContains(t, err, "audit policy")
	_, err = apiserver.New(apiserver.Options{AuditPolicyFile: bad, AuditPolicy: &auditv1.Policy{}})
	assert.ErrorContains(t, err, "exclusive")
}
