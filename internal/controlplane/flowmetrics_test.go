package controlplane

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
)

// The watermarks report the most requests at once during the last whole
// second, and zero after a second without any, as upstream's ticker does.
func TestWatermarks(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	w := newWatermarks(func() time.Time { return now })
	reported := func() (readOnly, mutating float64) {
		r := prometheus.NewRegistry()
		r.MustRegister(w)
		families, err := r.Gather()
		assert.NoError(t, err)
		for _, f := range families {
			if f.GetName() != "apiserver_current_inflight_requests" {
				continue
			}
			for _, m := range f.GetMetric() {
				if m.GetLabel()[0].GetValue() == "readOnly" {
					readOnly = m.GetGauge().GetValue()
				} else {
					mutating = m.GetGauge().GetValue()
				}
			}
		}
		return readOnly, mutating
	}
	w.add(executing, readOnly, 1)
	w.add(executing, readOnly, 1)
	w.add(executing, readOnly, -1)
	w.add(executing, mutating, 1)
	w.add(executing, mutating, -1)
	r, m := reported()
	assert.Equal(t, [2]float64{0, 0}, [2]float64{r, m}, "the second is not over")
	now = now.Add(1500 * time.Millisecond)
	r, m = reported()
	assert.Equal(t, [2]float64{2, 1}, [2]float64{r, m}, "the most at once in the second before")
	now = now.Add(time.Second)
	r, m = reported()
	assert.Equal(t, [2]float64{0, 0}, [2]float64{r, m}, "a second without a change")
	assert.Equal(t, 4, testutil.CollectAndCount(w), "both kinds, executing and waiting")
}
