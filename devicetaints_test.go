package apiserver_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A device taint without timeAdded gets the time it was written, to the
// second, as resource.k8s.io's defaulter gives it; a DeviceTaintRule whose
// effect changes gets the time of the change unless the update sets one.
func TestDeviceTaintTimeAdded(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	r := c.ResourceV1()
	before := time.Now().Truncate(time.Second)
	rule, err := r.DeviceTaintRules().Create(t.Context(), &resourcev1.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "now"},
		Spec: resourcev1.DeviceTaintRuleSpec{Taint: resourcev1.DeviceTaint{Key: "example.com/broken", Effect: resourcev1.DeviceTaintEffectNoSchedule}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	require.NotNil(t, rule.Spec.Taint.TimeAdded)
	assert.False(t, rule.Spec.Taint.TimeAdded.Time.Before(before), "%v", rule.Spec.Taint.TimeAdded)

	old := metav1.NewTime(before.Add(-72 * time.Hour))
	rule.Spec.Taint.TimeAdded = &old
	rule, err = r.DeviceTaintRules().Update(t.Context(), rule, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.True(t, rule.Spec.Taint.TimeAdded.Equal(&old), "an update may set it: %v", rule.Spec.Taint.TimeAdded)
	rule.Spec.Taint.Effect = resourcev1.DeviceTaintEffectNoExecute
	rule, err = r.DeviceTaintRules().Update(t.Context(), rule, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.False(t, rule.Spec.Taint.TimeAdded.Time.Before(before), "the effect changed: %v", rule.Spec.Taint.TimeAdded)

	slice, err := r.ResourceSlices().Create(t.Context(), &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", AllNodes: ptr(true), Pool: resourcev1.ResourcePool{Name: "pool", ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "d0", Taints: []resourcev1.DeviceTaint{{Key: "example.com/hot", Effect: resourcev1.DeviceTaintEffectNoSchedule}}}}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	require.NotNil(t, slice.Spec.Devices[0].Taints[0].TimeAdded)
	assert.False(t, slice.Spec.Devices[0].Taints[0].TimeAdded.Time.Before(before))
}
