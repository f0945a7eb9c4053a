// Package leaktest is go.uber.org/goleak for this repository's tests, made
// to survive a bug of goleak v1.3.0 (the newest served): it panics when it
// cannot parse the goroutines' stacks, which the runtime prints with
// "...N frames elided..." for a goroutine deeper than 100 frames, and
// every server has such goroutines for a moment (the handler chain is
// deep). A panic in a test kills the whole test binary; these functions
// ask goleak again instead, as the stacks change from one moment to the
// next, and fail only the test if goleak never gets through.
package leaktest

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// tries bounds how often goleak is asked again.
const tries = 1000

// errUnparsable is Find's error when goleak never parsed the stacks.
var errUnparsable = errors.New("goleak could not parse the goroutines' stacks in 1,000 tries")

// IgnoreCurrent is goleak.IgnoreCurrent: the goroutines running now are
// not leaks. It fails t if goleak cannot parse their stacks.
func IgnoreCurrent(t testing.TB) goleak.Option {
	t.Helper()
	opt, ok := retry(goleak.IgnoreCurrent)
	if !ok {
		t.Fatal(errUnparsable)
	}
	return opt
}

// Find is goleak.Find: an error naming the goroutines that opts do not
// ignore and that do not end in goleak's time.
func Find(opts ...goleak.Option) error {
	err, ok := retry(func() error { return goleak.Find(opts...) })
	if !ok {
		return errUnparsable
	}
	return err
}

// VerifyNone is goleak.VerifyNone: Find's error fails t.
func VerifyNone(t testing.TB, opts ...goleak.Option) {
	t.Helper()
	if err := Find(opts...); err != nil {
		t.Error(err)
	}
}

// VerifyTestMain is goleak.VerifyTestMain: m's tests, then Find, which
// fails the package if they passed but left goroutines.
func VerifyTestMain(m *testing.M, opts ...goleak.Option) {
	code := m.Run()
	if code == 0 {
		if err := Find(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: Errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// retry returns what f returns, calling it again while it panics because
// goleak could not parse the stacks; false if it never stopped. Other
// panics go on.
func retry[T any](f func() T) (T, bool) {
	for range tries {
		if v, ok := once(f); ok {
			return v, true
		}
		runtime.Gosched()
	}
	var zero T
	return zero, false
}

func once[T any](f func() T) (v T, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			if s, isString := r.(string); !isString || !strings.HasPrefix(s, "Failed to parse stack trace") {
				panic(r)
			}
			ok = false
		}
	}()
	return f(), true
}
