package leaktest

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// goleak's panic on stacks it cannot parse is asked again; other panics
// are not this package's to swallow.
func TestRetry(t *testing.T) {
	t.Parallel()
	calls := 0
	v, ok := retry(func() int {
		if calls++; calls < 3 {
			panic("Failed to parse stack trace: parse stack: unexpected line\n...1 frames elided...")
		}
		return 7
	})
	assert.True(t, ok)
	assert.Equal(t, 7, v)
	assert.Equal(t, 3, calls)

	_, ok = retry(func() int { panic("Failed to parse stack trace: always") })
	assert.False(t, ok)

	assert.PanicsWithValue(t, "other", func() { retry(func() int { panic("other") }) })
}

// A goroutine started after IgnoreCurrent is found until it ends. Not
// parallel: it counts the process's goroutines.
func TestFind(t *testing.T) {
	before := IgnoreCurrent(t)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { <-stop; close(done) }()
	assert.ErrorContains(t, Find(before), "leaktest.TestFind.func1")
	close(stop)
	<-done
	VerifyNone(t, before)
}
