package apiserver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// Server-side apply of a built-in type: two managers own different keys,
// a third conflicts on one of them unless it forces.
func TestServerSideApplyConfigMap(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	cms := clientset(t, srv).CoreV1().ConfigMaps("default")
	ctx := t.Context()

	_, err := cms.Apply(ctx, corev1apply.ConfigMap("shared", "default").WithData(map[string]string{"a": "1"}), metav1.ApplyOptions{FieldManager: "alpha"})
	require.NoError(t, err)
	cm, err := cms.Apply(ctx, corev1apply.ConfigMap("shared", "default").WithData(map[string]string{"b": "2"}), metav1.ApplyOptions{FieldManager: "beta"})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a": "1", "b": "2"}, cm.Data)
	managers := map[string]bool{}
	for _, mf := range cm.ManagedFields {
		managers[mf.Manager] = true
	}
	assert.Equal(t, map[string]bool{"alpha": true, "beta": true}, managers)

	_, err = cms.Apply(ctx, corev1apply.ConfigMap("shared", "default").WithData(map[string]string{"a": "9"}), metav1.ApplyOptions{FieldManager: "gamma"})
	require.Error(t, err)
	assert.True(t, apierrors.IsConflict(err), "conflicting apply: %v", err)
	assert.Contains(t, err.Error(), `conflict with "alpha"`)

	cm, err = cms.Apply(ctx, corev1apply.ConfigMap("shared", "default").WithData(map[string]string{"a": "9"}), metav1.ApplyOptions{FieldManager: "gamma", Force: true})
	require.NoError(t, err)
	assert.Equal(t, "9", cm.Data["a"])
}
