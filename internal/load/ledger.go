package load

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ledger records what the server acknowledged, per object. Names are never
// reused, so an object's history is one line: created, written, deleted.
type ledger struct {
	mu   sync.Mutex
	objs map[string]*history
}

type history struct {
	shard int
	rvs   []uint64 // the acknowledged writes' resourceVersions
	last  uint64   // the greatest of rvs, and its data
	data  map[string]string
	// deleted: a delete was acknowledged. uncertain: a request that may
	// have written it failed without saying (a timeout, a 5xx).
	deleted, uncertain bool
}

func newLedger() *ledger { return &ledger{objs: map[string]*history{}} }

func (l *ledger) get(name string) *history {
	h := l.objs[name]
	if h == nil {
		h = &history{shard: -1}
		l.objs[name] = h
	}
	return h
}

// wrote records an acknowledged create, update or apply: its answer.
func (l *ledger) wrote(cm *corev1.ConfigMap) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.get(cm.Name)
	if s, err := strconv.Atoi(cm.Labels[shardLabel]); err == nil {
		h.shard = s
	}
	v := rv(cm.ResourceVersion)
	h.rvs = append(h.rvs, v)
	if v > h.last {
		h.last, h.data = v, maps.Clone(cm.Data)
	}
}

func (l *ledger) deleted(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.get(name).deleted = true
}

func (l *ledger) unsure(name string, shard int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.get(name)
	h.uncertain = true
	if h.shard < 0 {
		h.shard = shard
	}
}

// acknowledged counts the acknowledged writes, deletes included.
func (l *ledger) acknowledged() int {
	n := 0
	for _, h := range l.objs {
		n += len(h.rvs)
		if h.deleted {
			n++
		}
	}
	return n
}

func (l *ledger) uncertainCount() int {
	n := 0
	for _, h := range l.objs {
		if h.uncertain {
			n++
		}
	}
	return n
}

// stats are request latencies per verb. A worker owns one; Run merges them.
type stats struct {
	d map[string][]time.Duration
	// outcomes counts the answers that were not successes, as
	// "verb outcome" (outcome's names).
	outcomes map[string]int
}

func (s *stats) count(verb, outcome string) {
	if outcome == "" {
		return
	}
	if s.outcomes == nil {
		s.outcomes = map[string]int{}
	}
	s.outcomes[verb+" "+outcome]++
}

func (s *stats) add(verb string, d time.Duration) {
	if s.d == nil {
		s.d = map[string][]time.Duration{}
	}
	s.d[verb] = append(s.d[verb], d)
}

func (s *stats) merge(o *stats) {
	for v, d := range o.d {
		if s.d == nil {
			s.d = map[string][]time.Duration{}
		}
		s.d[v] = append(s.d[v], d...)
	}
	for k, n := range o.outcomes {
		if s.outcomes == nil {
			s.outcomes = map[string]int{}
		}
		s.outcomes[k] += n
	}
}

func (s *stats) total() int {
	n := 0
	for _, d := range s.d {
		n += len(d)
	}
	return n
}

func (s *stats) sorted(verb string) []time.Duration {
	d := s.d[verb]
	slices.Sort(d)
	return d
}

// table is one line per verb: count, rate, p50, p99, max in ms.
func (s *stats) table(elapsed time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-7s %7s %6s %8s %8s %8s\n", "verb", "count", "/s", "p50 ms", "p99 ms", "max ms")
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
	for _, v := range Verbs() {
		d := s.sorted(v)
		if len(d) == 0 {
			continue
		}
		fmt.Fprintf(&b, "%-7s %7d %6.0f %8.2f %8.2f %8.2f\n", v, len(d), float64(len(d))/elapsed.Seconds(),
			ms(d[len(d)/2]), ms(d[len(d)*99/100]), ms(d[len(d)-1]))
	}
	return b.String()
}
