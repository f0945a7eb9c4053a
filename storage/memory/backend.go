// Package memory is an in-memory storage backend for the Kubernetes API server
// that keeps etcd's semantics: one revision counter per backend shared by every
// resource, multi-version history for exact-revision reads and watch resume,
// compaction with the same "too old" errors, leases (TTL), and watches that
// never block writers.
//
// A Backend plays the role of one etcd cluster; each resource gets its own
// storage.Interface from Backend.NewStore, just as kube-apiserver creates one
// etcd3 store per resource against a shared etcd. Values are stored as the
// bytes the codec and value.Transformer produce and decoded on every read, so
// no caller ever aliases a stored object.
package memory

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"
)

// ErrCompacted is returned (wrapped) when a read or watch asks for a revision
// older than the backend's compaction revision, as etcd's
// "mvcc: required revision has been compacted".
var ErrCompacted = errors.New("required revision has been compacted")

// ErrFutureRevision is returned (wrapped) when a read asks for a revision newer
// than the backend's current one, as etcd's "mvcc: required revision is a
// future revision".
var ErrFutureRevision = errors.New("required revision is a future revision")

// ErrClosed is returned by Compact after Close.
var ErrClosed = errors.New("memory backend is closed")

// Defaults for Options.
const (
	// DefaultHistoryRevisions is how many revisions of history a backend keeps
	// at least before compacting by count. At ~1 KiB per object that is about
	// 10 MiB of history per backend at most.
	DefaultHistoryRevisions = 10_000
	// DefaultHistoryAge is how long history is kept before compacting by age;
	// kube-apiserver compacts etcd every 5 minutes by default.
	DefaultHistoryAge = 5 * time.Minute
	// DefaultProgressNotifyInterval is how often an idle watch that asked for
	// progress notifications gets one, like etcd's
	// --experimental-watch-progress-notify-interval in Kubernetes' test setup.
	DefaultProgressNotifyInterval = 5 * time.Second
)

// Options configures a Backend. The zero value is ready to use.
type Options struct {
	// HistoryRevisions is the number of most recent revisions always kept for
	// exact reads and watch resume. When the history grows to twice this size
	// it is compacted back to it. Zero means DefaultHistoryRevisions; negative
	// disables compaction by count.
	HistoryRevisions int
	// HistoryAge is the minimum age of a revision before it may be compacted by
	// age. Zero means DefaultHistoryAge; negative disables compaction by age.
	HistoryAge time.Duration
	// ProgressNotifyInterval is the interval of progress notifications for
	// watches that request them (storage.ListOptions.ProgressNotify). Zero
	// means DefaultProgressNotifyInterval.
	ProgressNotifyInterval time.Duration
}

func (o Options) withDefaults() Options {
	if o.HistoryRevisions == 0 {
		o.HistoryRevisions = DefaultHistoryRevisions
	}
	if o.HistoryAge == 0 {
		o.HistoryAge = DefaultHistoryAge
	}
	if o.ProgressNotifyInterval <= 0 {
		o.ProgressNotifyInterval = DefaultProgressNotifyInterval
	}
	return o
}

// version is one revision of one key. A tombstone has deleted set.
type version struct {
	modRev    int64
	createRev int64
	value     []byte
	deleted   bool
	expires   time.Time // zero: no lease
	memo      *memo     // nil for a tombstone
}

// record is all retained versions of one key, oldest first.
type record struct {
	key      string
	versions []version
}

// latestAt returns the version of r visible at rev, if it is live.
func (r *record) latestAt(rev int64) (version, bool) {
	for i := len(r.versions) - 1; i >= 0; i-- {
		v := r.versions[i]
		if v.modRev <= rev {
			return v, !v.deleted
		}
	}
	return version{}, false
}

func (r *record) current() (version, bool) {
	if len(r.versions) == 0 {
		return version{}, false
	}
	v := r.versions[len(r.versions)-1]
	return v, !v.deleted
}

// event is one committed change; there is exactly one per revision.
type event struct {
	rev       int64
	key       string
	value     []byte // nil when deleted
	prevValue []byte // nil when the key did not exist before
	memo      *memo  // value's and prevValue's
	prevMemo  *memo
	createRev int64
	deleted   bool
	at        time.Time
}

func (e *event) created() bool { return !e.deleted && e.createRev == e.rev }

// kv is a key and its value as read at some revision.
type kv struct {
	key       string
	value     []byte
	modRev    int64
	createRev int64
	memo      *memo
}

// Backend is an in-memory MVCC key-value store with etcd's revision semantics.
// It is safe for concurrent use. Create it with NewBackend and release it with
// Close.
type Backend struct {
	opts Options

	mu        sync.RWMutex
	rev       int64
	compacted int64
	index     *btree.BTreeG[*record]
	events    []event // events[i].rev == eventsBase+i; only revisions >= compacted
	expiries  expiryHeap
	timer     *time.Timer
	waiters   map[*waiter]struct{} // the watches, woken by the commits they match (wake.go)
	progress  chan struct{}        // closed and replaced on every RequestWatchProgress
	done      chan struct{}
	closed    bool
	watchers  sync.WaitGroup

	// ranges counts range reads, so tests can check that lists read in
	// pages as etcd3's store does.
	ranges atomic.Int64
}

// NewBackend returns an empty backend at revision 1, like a fresh etcd.
func NewBackend(opts Options) *Backend {
	return &Backend{
		opts:     opts.withDefaults(),
		rev:      1,
		index:    btree.NewG(32, func(a, b *record) bool { return a.key < b.key }),
		waiters:  map[*waiter]struct{}{},
		progress: make(chan struct{}),
		done:     make(chan struct{}),
	}
}

// Close stops the lease timer and every watch of every store of this backend,
// and waits for their goroutines to end. It is safe to call more than once.
func (b *Backend) Close() error {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.done)
		if b.timer != nil {
			b.timer.Stop()
		}
	}
	b.mu.Unlock()
	b.watchers.Wait()
	return nil
}

// Check reports whether b serves requests: ErrClosed after Close.
func (b *Backend) Check(context.Context) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return ErrClosed
	}
	return nil
}

// Count implements storage.Counter: the live keys under keyPrefix.
func (b *Backend) Count(_ context.Context, keyPrefix string) (int64, error) {
	n, _ := b.count(keyPrefix)
	return n, nil
}

// Revision returns the current revision.
func (b *Backend) Revision() int64 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.rev
}

// CompactRevision returns the revision of the last compaction, 0 if none.
func (b *Backend) CompactRevision() int64 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.compacted
}

// Compact discards history older than rev: afterwards reads and watches at a
// revision below rev fail with ErrCompacted. Like etcd, compacting to a
// revision at or below the last compaction fails with ErrCompacted and to a
// future revision with ErrFutureRevision.
func (b *Backend) Compact(rev int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	if rev <= b.compacted {
		return fmt.Errorf("compact %d: %w (compacted at %d)", rev, ErrCompacted, b.compacted)
	}
	if rev > b.rev {
		return fmt.Errorf("compact %d: %w (current %d)", rev, ErrFutureRevision, b.rev)
	}
	b.compactLocked(rev)
	return nil
}

// compactLocked keeps, for every key, the newest version at or below rev and
// everything after it, dropping tombstones that nothing can read any more.
func (b *Backend) compactLocked(rev int64) {
	var drop []*record
	b.index.Ascend(func(r *record) bool {
		keep := 0
		for i, v := range r.versions {
			if v.modRev <= rev {
				keep = i
			}
		}
		if keep > 0 {
			r.versions = append(r.versions[:0:0], r.versions[keep:]...)
		}
		if len(r.versions) == 1 && r.versions[0].deleted && r.versions[0].modRev <= rev {
			drop = append(drop, r)
		}
		return true
	})
	for _, r := range drop {
		b.index.Delete(r)
	}
	if n := rev - b.eventsBase(); n > 0 {
		if n > int64(len(b.events)) {
			n = int64(len(b.events))
		}
		b.events = append(b.events[:0:0], b.events[n:]...)
	}
	b.compacted = rev
}

// eventsBase is the revision of events[0]; revision 1 is the empty store and
// has no event.
func (b *Backend) eventsBase() int64 {
	if len(b.events) == 0 {
		return b.rev + 1
	}
	return b.events[0].rev
}

// autoCompactLocked applies the count and age policies after a commit.
func (b *Backend) autoCompactLocked(now time.Time) {
	if len(b.events) == 0 {
		return
	}
	target := int64(0)
	if n := b.opts.HistoryRevisions; n > 0 && len(b.events) >= 2*n {
		target = b.rev - int64(n)
	}
	if age := b.opts.HistoryAge; age > 0 && now.Sub(b.events[0].at) > 2*age {
		// Compact up to the newest revision older than age, amortised by only
		// acting once the oldest event is twice that old.
		cutoff := now.Add(-age)
		i := 0
		for i < len(b.events) && b.events[i].at.Before(cutoff) {
			i++
		}
		if i > 0 {
			if r := b.events[i-1].rev; r > target {
				target = r
			}
		}
	}
	if target > b.compacted {
		b.compactLocked(target)
	}
}

// get reads key at rev (0: current). It returns the revision the read was
// served at.
func (b *Backend) get(key string, rev int64) (kv, bool, int64, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.checkReadRevLocked(rev); err != nil {
		return kv{}, false, b.rev, err
	}
	at := rev
	if at == 0 {
		at = b.rev
	}
	r, ok := b.index.Get(&record{key: key})
	if !ok {
		return kv{}, false, b.rev, nil
	}
	v, ok := r.latestAt(at)
	if !ok {
		return kv{}, false, b.rev, nil
	}
	return kv{key: key, value: v.value, modRev: v.modRev, createRev: v.createRev, memo: v.memo}, true, b.rev, nil
}

func (b *Backend) checkReadRevLocked(rev int64) error {
	if rev == 0 {
		return nil
	}
	if rev < b.compacted {
		return fmt.Errorf("read at %d: %w (compacted at %d)", rev, ErrCompacted, b.compacted)
	}
	if rev > b.rev {
		return fmt.Errorf("read at %d: %w (current %d)", rev, ErrFutureRevision, b.rev)
	}
	return nil
}

// rangeResult is one page of a range read.
type rangeResult struct {
	kvs   []kv
	count int64 // live keys in [from, end) at rev, like etcd's Count
	more  bool
	rev   int64 // the revision the read was served at
}

// rangeKeys reads live keys in [from, prefixEnd(prefix)) at rev (0: current),
// at most limit of them (0: all).
func (b *Backend) rangeKeys(prefix, from string, rev, limit int64) (rangeResult, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.checkReadRevLocked(rev); err != nil {
		return rangeResult{rev: b.rev}, err
	}
	at := rev
	if at == 0 {
		at = b.rev
	}
	if from < prefix {
		from = prefix
	}
	res := rangeResult{rev: at, kvs: takeKVs()}
	b.index.AscendGreaterOrEqual(&record{key: from}, func(r *record) bool {
		if !strings.HasPrefix(r.key, prefix) {
			return false
		}
		v, ok := r.latestAt(at)
		if !ok {
			return true
		}
		res.count++
		if limit <= 0 || int64(len(res.kvs)) < limit {
			res.kvs = append(res.kvs, kv{key: r.key, value: v.value, modRev: v.modRev, createRev: v.createRev, memo: v.memo})
		}
		return true
	})
	res.more = int64(len(res.kvs)) < res.count
	return res, nil
}

// kvBuffers keep rangeKeys' result slices for the next range once what
// read them is done (releaseKVs): a list of 1,000 grew one of 64 KB each
// time, a twentieth of what it allocated.
var kvBuffers sync.Pool // of *[]kv

// maxKeptKVs bounds a kept slice (1 MiB).
const maxKeptKVs = 16 << 10

func takeKVs() []kv {
	if p, ok := kvBuffers.Get().(*[]kv); ok {
		return (*p)[:0]
	}
	return nil
}

// releaseKVs gives kvs back for another range; nothing may read them after.
// They are cleared, so that a kept slice keeps no value alive.
func releaseKVs(kvs []kv) {
	if cap(kvs) == 0 || cap(kvs) > maxKeptKVs {
		return
	}
	kvs = kvs[:cap(kvs)]
	clear(kvs)
	kvs = kvs[:0]
	kvBuffers.Put(&kvs)
}

// count returns the number of live keys under prefix and their total size.
func (b *Backend) count(prefix string) (n, size int64) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	b.index.AscendGreaterOrEqual(&record{key: prefix}, func(r *record) bool {
		if !strings.HasPrefix(r.key, prefix) {
			return false
		}
		if v, ok := r.current(); ok {
			n++
			size += int64(len(v.value))
		}
		return true
	})
	return n, size
}

// txnResult is the outcome of an optimistic write.
type txnResult struct {
	succeeded bool
	rev       int64 // new revision on success
	current   kv    // the current value on failure (GetOnFailure)
	exists    bool  // whether current is set
}

// put writes value at key if the key's current modRev equals expect (0: the key
// must not exist). ttl > 0 attaches a lease that deletes the key after ttl
// seconds; a put without ttl drops any lease, as etcd does.
func (b *Backend) put(key string, value []byte, expect int64, ttl uint64) txnResult {
	return b.txn(key, value, false, expect, ttl)
}

// del deletes key if its current modRev equals expect.
func (b *Backend) del(key string, expect int64) txnResult {
	return b.txn(key, nil, true, expect, 0)
}

func (b *Backend) txn(key string, value []byte, deleting bool, expect int64, ttl uint64) txnResult {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	r, found := b.index.Get(&record{key: key})
	var cur version
	var live bool
	if found {
		cur, live = r.current()
	}
	curRev := int64(0)
	if live {
		curRev = cur.modRev
	}
	if curRev != expect || (deleting && !live) {
		res := txnResult{}
		if live {
			res.exists = true
			res.current = kv{key: key, value: cur.value, modRev: cur.modRev, createRev: cur.createRev, memo: cur.memo}
		}
		return res
	}
	var expires time.Time
	if ttl > 0 {
		expires = now.Add(time.Duration(ttl) * time.Second)
	}
	rev := b.commitLocked(r, key, value, deleting, expires, now)
	b.autoCompactLocked(now)
	b.wakeLocked(key)
	return txnResult{succeeded: true, rev: rev}
}

// commitLocked writes value (or a tombstone) at key as the next revision and
// records its event; r is the key's record if it has one. expires, if not
// zero, is the version's lease deadline. The caller wakes the watchers.
func (b *Backend) commitLocked(r *record, key string, value []byte, deleting bool, expires, now time.Time) int64 {
	var cur version
	var live bool
	if r != nil {
		cur, live = r.current()
	} else {
		r = &record{key: key}
		b.index.ReplaceOrInsert(r)
	}
	b.rev++
	rev := b.rev
	nv := version{modRev: rev, createRev: rev, value: value, deleted: deleting, expires: expires}
	if live {
		nv.createRev = cur.createRev
	}
	if deleting {
		nv.value = nil
	} else {
		nv.memo = new(memo)
	}
	if !expires.IsZero() {
		heap.Push(&b.expiries, expiry{at: expires, key: key, modRev: rev})
		b.armTimerLocked()
	}
	r.versions = append(r.versions, nv)
	ev := event{rev: rev, key: key, value: nv.value, memo: nv.memo, createRev: nv.createRev, deleted: deleting, at: now}
	if live {
		ev.prevValue, ev.prevMemo = cur.value, cur.memo
	}
	b.events = append(b.events, ev)
	return rev
}

// expiry is a lease deadline for the version of key written at modRev.
type expiry struct {
	at     time.Time
	key    string
	modRev int64
}

type expiryHeap []expiry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// armTimerLocked schedules the lease timer for the earliest expiry.
func (b *Backend) armTimerLocked() {
	if b.closed || len(b.expiries) == 0 {
		return
	}
	d := time.Until(b.expiries[0].at)
	if b.timer == nil {
		b.timer = time.AfterFunc(d, b.expire)
		return
	}
	b.timer.Reset(d)
}

// expire deletes keys whose lease has run out, each in its own revision, as
// etcd's lease revocation does.
func (b *Backend) expire() {
	now := time.Now()
	var due []expiry
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	for len(b.expiries) > 0 && !b.expiries[0].at.After(now) {
		due = append(due, heap.Pop(&b.expiries).(expiry))
	}
	b.armTimerLocked()
	b.mu.Unlock()
	for _, e := range due {
		// Only the version the lease was attached to expires; a later write
		// replaced or dropped the lease.
		b.del(e.key, e.modRev)
	}
}

// changes returns up to limit events of the log with revision >= from, and
// the revision to read from next. It fails with ErrCompacted when from is
// not after the compaction revision, unless w has been quiet since from
// (wake.go): then nothing it watches is lost, and it goes on from the first
// commit it watches since. Finding nothing to read marks w quiet.
func (b *Backend) changes(w *waiter, from int64, limit int) ([]event, int64, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	// The event at the compaction revision itself is kept, but the state
	// before it may not be, so a watch must start after it. etcd fails such a
	// watch too (its event at the compaction revision lacks the previous
	// value).
	if from <= b.compacted {
		at := b.resumeLocked(w, from)
		if at == 0 {
			return nil, 0, fmt.Errorf("watch from %d: %w (compacted at %d)", from, ErrCompacted, b.compacted)
		}
		from = at
	}
	base := b.eventsBase()
	i := from - base
	if i < 0 {
		i = 0
	}
	if i >= int64(len(b.events)) {
		next := max(from, b.rev+1)
		w.quiet.Store(next)
		w.firstMatch.Store(0)
		return nil, next, nil
	}
	w.quiet.Store(0)
	end := i + int64(limit)
	if end > int64(len(b.events)) {
		end = int64(len(b.events))
	}
	// The slice is never written in place, only appended to or replaced, so
	// handing out a sub-slice without copying is safe.
	evs := b.events[i:end:end]
	return evs, evs[len(evs)-1].rev + 1, nil
}

// requestProgress wakes every watch that asked for progress notifications.
func (b *Backend) requestProgress() {
	b.mu.Lock()
	close(b.progress)
	b.progress = make(chan struct{})
	b.mu.Unlock()
}

func (b *Backend) progressCh() <-chan struct{} {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.progress
}
