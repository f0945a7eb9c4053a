package timing

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func TestDrawStaysWithinTheQuantiles(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	assert.Zero(t, Distribution(nil).draw(r))
	assert.Equal(t, time.Millisecond, Distribution{time.Millisecond}.draw(r))
	d := Distribution{time.Millisecond, 2 * time.Millisecond, 10 * time.Millisecond}
	below := 0
	for range 1000 {
		x := d.draw(r)
		require.GreaterOrEqual(t, x, time.Millisecond)
		require.LessOrEqual(t, x, 10*time.Millisecond)
		if x <= 2*time.Millisecond {
			below++
		}
	}
	assert.InDelta(t, 500, below, 80, "half the draws are below the middle quantile")
}

func TestValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	require.NoError(t, Etcd().Validate())
	require.NoError(t, Shake(1).Validate())
	err := Profile{Write: Distribution{-1}, Watch: Distribution{2, 1}}.Validate()
	assert.ErrorContains(t, err, "Write[0] is negative")
	assert.ErrorContains(t, err, "Watch is not in ascending order at [1]")
}

func TestSeededPicksASeedOnlyForZero(t *testing.T) {
	t.Parallel()
	assert.EqualValues(t, 7, Shake(7).Seeded().Seed)
	assert.NotZero(t, Shake(0).Seeded().Seed)
	assert.False(t, Profile{Seed: 3}.Enabled(), "a seed alone delays nothing")
}

func TestParse(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]Profile{"": {}, "off": {}, "etcd": Etcd(), "shake": Shake(0), "shake:42": Shake(42)} {
		got, err := Parse(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	_, err := Parse("slow")
	assert.ErrorContains(t, err, `unknown profile "slow"`)
	_, err = Parse("shake:x")
	assert.Error(t, err)
	assert.Equal(t, "shake:42", Shake(42).String())
	assert.Equal(t, "off", Profile{}.String())
}

// A delayed watch delivers every event, in order, each no sooner than its
// delay after it came; it ends when the inner watch ends, after the last.
func TestDelayedWatchKeepsOrderAndDropsNothing(t *testing.T) {
	t.Parallel()
	inner := watch.NewFake()
	d := Distribution{0, 3 * time.Millisecond}
	w := delayed(t.Context(), inner, d, rand.New(rand.NewPCG(1, 2)))
	const n = 500
	go func() {
		for i := range n {
			inner.Modify(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: string(rune('a' + i%26)), Name: "x", Generation: int64(i)}})
		}
		inner.Stop()
	}()
	i := 0
	for ev := range w.ResultChan() {
		require.EqualValues(t, i, ev.Object.(*corev1.ConfigMap).Generation, "event %d in order", i)
		i++
	}
	assert.Equal(t, n, i, "every event, then the end")
}

func TestDelayedWatchWaitsItsDelay(t *testing.T) {
	t.Parallel()
	inner := watch.NewFake()
	w := delayed(t.Context(), inner, Distribution{5 * time.Millisecond}, rand.New(rand.NewPCG(1, 2)))
	start := time.Now()
	go inner.Add(&corev1.ConfigMap{})
	<-w.ResultChan()
	assert.GreaterOrEqual(t, time.Since(start), 5*time.Millisecond)
	w.Stop()
	_, open := <-w.ResultChan()
	assert.False(t, open, "Stop ends the watch")
}

func TestDelayedWatchEndsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	w := delayed(ctx, watch.NewFake(), Distribution{time.Hour}, rand.New(rand.NewPCG(1, 2)))
	cancel()
	_, open := <-w.ResultChan()
	assert.False(t, open)
}
