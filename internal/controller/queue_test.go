package controller

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

// A queue is idle only when nothing is queued, in a worker or waiting to
// be retried after an error; an item put off with Later is idle.
func TestQueueIdle(t *testing.T) {
	t.Parallel()
	q := NewQueue("test", nil)
	require.NoError(t, q.Idle())
	release, entered := make(chan struct{}), make(chan string, 4)
	var mu sync.Mutex
	fail := map[string]error{"broken": errors.New("boom"), "later": &Later{After: time.Hour, Reason: "waiting"}}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.Run(ctx, 1, func(_ context.Context, key string) error {
			entered <- key
			<-release
			mu.Lock()
			defer mu.Unlock()
			return fail[key]
		})
	}()
	defer func() { cancel(); close(release); <-done }()

	q.Add("a")
	assert.Equal(t, "a", <-entered)
	assert.ErrorContains(t, q.Idle(), "1 items to do", "in a worker")
	release <- struct{}{}
	require.NoError(t, Wait(t.Context(), q.Idle))
	assert.EqualValues(t, 1, q.Finished())

	q.Add("later")
	<-entered
	release <- struct{}{}
	require.NoError(t, Wait(t.Context(), q.Idle), "put off on purpose: idle")

	q.Add("broken")
	<-entered
	release <- struct{}{}
	wctx, wcancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer wcancel()
	err := Wait(wctx, q.Idle)
	require.Error(t, err, "a failed item is not idle: waiting to be retried, or retried (in a worker)")
	assert.Regexp(t, `"broken" is retried after: boom|1 items to do`, err.Error())
	mu.Lock()
	delete(fail, "broken")
	mu.Unlock()
	<-entered // the retry
	release <- struct{}{}
	require.NoError(t, Wait(t.Context(), q.Idle), "succeeded on retry")
}

// AddAfterOn on a test's clock keeps one timer per key, the earliest, and
// ShutDown stops them: a controller that puts a key off at every event
// does not pile up timers that outlive it.
func TestQueueAddAfterOnFakeClock(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Now())
	q := NewQueue("test", nil)
	q.AddAfterOn(clk, "a", 10*time.Second)
	q.AddAfterOn(clk, "a", 20*time.Second) // later: the first stands
	q.AddAfterOn(clk, "a", 5*time.Second)  // earlier: replaces it
	q.AddAfterOn(clk, "b", time.Minute)
	clk.Step(5 * time.Second)
	require.Eventually(t, func() bool { return q.Len() == 1 }, 5*time.Second, time.Millisecond)
	key, _ := q.Get()
	assert.Equal(t, "a", key)
	q.Done(key)
	clk.Step(10 * time.Second) // the replaced timers do not fire
	assert.Equal(t, 0, q.Len())
	assert.True(t, clk.HasWaiters(), "b's timer")
	q.ShutDown()
	assert.False(t, clk.HasWaiters(), "ShutDown stops the timers")
}

// A test that steps its clock while a controller puts keys off does not
// deadlock the queue: a fake clock runs a due timer's function (which
// takes the queue's lock) with its own lock held, and AddAfterOn used to
// make and stop timers with the queue's lock held.
func TestQueueAddAfterOnWhileTheClockSteps(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Now())
	q := NewQueue("test", nil) // not shut down if the test fails: it would hang on the deadlocked lock
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := range 20000 {
				q.AddAfterOn(clk, "a", time.Duration(20000-i)*time.Hour) // earlier each time: replaces
				q.AddAfterOn(clk, "b", 0)                                // due at the next step
			}
		})
		wg.Go(func() {
			for range 20000 {
				clk.Step(time.Nanosecond)
			}
		})
		wg.Wait()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("AddAfterOn and the clock's Step deadlocked")
	}
	clk.Step(time.Hour) // the last waits are due
	require.Eventually(t, func() bool { return q.Len() == 2 }, 5*time.Second, time.Millisecond)
	assert.False(t, clk.HasWaiters(), "every wait fired")
	q.ShutDown()
}
