package endpoint

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

func many(n int) []corev1.EndpointAddress {
	out := make([]corev1.EndpointAddress, n)
	for i := range out {
		out[i].IP = fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256)
	}
	return out
}

// Past 1000 addresses, not-ready ones are cut first, each subset keeping
// its share rounded up and the last what is left; past 1000 ready ones,
// every not-ready one goes and the ready ones are shared out.
func TestTruncate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                string
		ready, notReady     []int
		wantReady, wantNotR []int
	}{
		{"under capacity", []int{600, 300, 0}, []int{0, 50, 50}, []int{600, 300, 0}, []int{0, 50, 50}},
		{"not ready cut", []int{600, 300, 0}, []int{0, 200, 400}, []int{600, 300, 0}, []int{0, 34, 66}},
		{"ready cut", []int{800, 400}, []int{0, 50}, []int{667, 333}, []int{0, 0}},
	} {
		ep := &corev1.Endpoints{}
		for i := range tc.ready {
			ep.Subsets = append(ep.Subsets, corev1.EndpointSubset{Addresses: many(tc.ready[i]), NotReadyAddresses: many(tc.notReady[i])})
		}
		over := tc.name != "under capacity"
		assert.Equal(t, !over, capacityAnnotationCorrect(ep), "%s: over capacity must be written", tc.name)
		assert.Equal(t, over, truncate(ep), tc.name)
		for i, s := range ep.Subsets {
			assert.Len(t, s.Addresses, tc.wantReady[i], "%s: subset %d ready", tc.name, i)
			assert.Len(t, s.NotReadyAddresses, tc.wantNotR[i], "%s: subset %d not ready", tc.name, i)
		}
	}
}

// Labels are right when they are the Service's plus managed-by, with or
// without the headless label.
func TestLabelsCorrect(t *testing.T) {
	t.Parallel()
	svc := map[string]string{"app": "web"}
	assert.True(t, labelsCorrect(map[string]string{"app": "web", LabelManagedBy: ControllerName}, svc))
	assert.True(t, labelsCorrect(map[string]string{"app": "web", LabelManagedBy: ControllerName, corev1.IsHeadlessService: ""}, svc))
	assert.False(t, labelsCorrect(map[string]string{"app": "web"}, svc), "managed-by missing")
	assert.False(t, labelsCorrect(map[string]string{"app": "web", "extra": "x", LabelManagedBy: ControllerName}, svc))
	assert.False(t, labelsCorrect(map[string]string{LabelManagedBy: ControllerName}, svc))
}
