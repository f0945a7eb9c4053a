// Package timing slows a server's storage down on purpose: a latency on each
// write before it commits, and a delay on each watch event's delivery. The
// API's answers and guarantees stay the same (every write is its own event,
// each watch delivers in resourceVersion order, nothing is dropped or
// merged); only when things happen moves.
//
// Two uses. Etcd gives a server the timing of kube-apiserver on etcd, as
// measured side by side (see Etcd): a suite that passes on envtest and fails
// on kubeembed only because kubeembed is faster passes with it, which
// proves timing is the cause. Shake draws seeded random delays, wider than
// etcd's, so that a controller's races (acting on a stale cache of its own
// writes, or only on an intermediate state it may never see) show up on
// purpose; the seed replays them.
//
// A server takes a Profile in apiserver.Options.Timing; the zero Profile is
// no delay at all, and the server's storage is then not wrapped.
package timing

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Profile is how slow a server's storage is.
type Profile struct {
	// Write is the latency of each storage write (create, update, delete),
	// spent before the write commits, as an etcd write spends most of its
	// time before its revision exists. Two writes of one request (a
	// graceful delete sets deletionTimestamp, then deletes) are at least
	// that far apart, as on etcd. A retried update (a conflict) waits
	// again, as a second etcd transaction would.
	Write Distribution
	// Watch is the delay of each watch event, from its commit until the
	// watch delivers it, drawn for every event of every watch (the server's
	// own informers' included). A watch keeps its order: an event is never
	// delivered before the one before it, so a short draw after a long one
	// waits for it.
	Watch Distribution
	// Seed seeds the draws. 0 asks the server to pick one; it logs the seed
	// it uses at start and Server.Timing reports it, so a failure can be
	// replayed by passing it here. The same seed draws the same delays in
	// the same order; which write or event gets which delay also depends on
	// the order requests arrive in, so a replay reproduces a race often, not
	// always.
	Seed int64
}

// Enabled reports whether p delays anything.
func (p Profile) Enabled() bool { return len(p.Write) > 0 || len(p.Watch) > 0 }

// Seeded returns p with a random seed if its Seed is 0.
func (p Profile) Seeded() Profile {
	for p.Seed == 0 {
		p.Seed = rand.Int64()
	}
	return p
}

// Validate reports every problem with p's distributions.
func (p Profile) Validate() error {
	return errors.Join(p.Write.validate("Write"), p.Watch.validate("Watch"))
}

// String names p as Parse reads it where it can ("etcd", "shake:42").
func (p Profile) String() string {
	switch {
	case !p.Enabled():
		return "off"
	case slices.Equal(p.Write, etcdWrite) && slices.Equal(p.Watch, etcdWatch):
		return "etcd:" + strconv.FormatInt(p.Seed, 10)
	case slices.Equal(p.Write, shakeWrite) && slices.Equal(p.Watch, shakeWatch):
		return "shake:" + strconv.FormatInt(p.Seed, 10)
	}
	return fmt.Sprintf("write=%v watch=%v seed=%d", []time.Duration(p.Write), []time.Duration(p.Watch), p.Seed)
}

// Distribution is a distribution of delays given by its quantiles, evenly
// spaced from the minimum (first) to the maximum (last), in ascending order:
// {0, 1ms} is uniform between 0 and 1 ms; {d} is always d; a measured
// distribution is its percentiles. A draw interpolates between neighbours.
// Nil is no delay.
type Distribution []time.Duration

// draw returns a delay from d, using r.
func (d Distribution) draw(r *rand.Rand) time.Duration {
	switch len(d) {
	case 0:
		return 0
	case 1:
		return d[0]
	}
	x := r.Float64() * float64(len(d)-1)
	i := int(x)
	if i >= len(d)-1 {
		return d[len(d)-1]
	}
	return d[i] + time.Duration((x-float64(i))*float64(d[i+1]-d[i]))
}

func (d Distribution) validate(name string) error {
	for i, q := range d {
		if q < 0 {
			return fmt.Errorf("timing: %s[%d] is negative (%v)", name, i, q)
		}
		if i > 0 && q < d[i-1] {
			return fmt.Errorf("timing: %s is not in ascending order at [%d] (%v after %v)", name, i, q, d[i-1])
		}
	}
	return nil
}

// Env is the environment variable kubeembed's test helpers (apiservertest
// and the envtest drop-in) read a profile from when their options give
// none: a whole suite runs under "shake" without a change to its code.
const Env = "KUBEEMBED_TIMING"

// FromEnv is the profile Env gives (Parse), and whether it gives one.
func FromEnv() (Profile, bool, error) {
	v := os.Getenv(Env)
	if v == "" {
		return Profile{}, false, nil
	}
	p, err := Parse(v)
	if err != nil {
		return Profile{}, false, fmt.Errorf("%s: %w", Env, err)
	}
	return p, true, nil
}

// Parse reads a profile as a flag or environment variable gives it: "off"
// (or empty), "etcd", "shake", or either with a seed: "shake:42".
func Parse(s string) (Profile, error) {
	name, seed, hasSeed := strings.Cut(strings.TrimSpace(s), ":")
	var p Profile
	switch name {
	case "", "off":
		return Profile{}, nil
	case "etcd":
		p = Etcd()
	case "shake":
		p = Shake(0)
	default:
		return Profile{}, fmt.Errorf("timing: unknown profile %q (known: off, etcd, shake, each with an optional :seed)", name)
	}
	if hasSeed {
		n, err := strconv.ParseInt(seed, 10, 64)
		if err != nil {
			return Profile{}, fmt.Errorf("timing: seed of %q: %w", s, err)
		}
		p.Seed = n
	}
	return p, nil
}
