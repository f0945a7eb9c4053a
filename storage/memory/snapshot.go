package memory

import (
	"bytes"
	"time"

	"github.com/kubeembed/apiserver/storage"
)

var _ storage.Snapshotter = (*Backend)(nil)

// Snapshot is the live keys of a Backend at one revision, with their values
// and the time left on their leases. Values are shared with the backend,
// which never changes a stored value: a snapshot is cheap to take and
// read-only.
type Snapshot struct {
	rev     int64
	entries map[string]snapshotEntry
}

type snapshotEntry struct {
	value []byte
	ttl   time.Duration // 0: no lease
}

// Revision is the revision the snapshot was taken at.
func (s *Snapshot) Revision() int64 { return s.rev }

// Len is the number of keys in the snapshot.
func (s *Snapshot) Len() int { return len(s.entries) }

// Snapshot implements storage.Snapshotter: the live keys now.
func (b *Backend) Snapshot() storage.Snapshot {
	now := time.Now()
	b.mu.RLock()
	defer b.mu.RUnlock()
	s := &Snapshot{rev: b.rev, entries: make(map[string]snapshotEntry, b.index.Len())}
	b.index.Ascend(func(r *record) bool {
		if v, live := r.current(); live {
			e := snapshotEntry{value: v.value}
			if !v.expires.IsZero() {
				e.ttl = max(v.expires.Sub(now), time.Millisecond)
			}
			s.entries[r.key] = e
		}
		return true
	})
	return s
}

// Restore implements storage.Snapshotter: it makes the live keys those of
// snap. Each key that differs is written or deleted at a new revision, as a
// client of etcd would, so revisions (resourceVersions) only grow and every
// object restored has a new one; leases restart with the time they had
// left. History before the restore is then compacted: a watch behind by
// more than the last change ends with 410 Gone, and its client lists again,
// as after an etcd compaction. A restore that changes nothing changes no
// revision and ends no watch.
func (b *Backend) Restore(snap storage.Snapshot) error {
	_, err := b.RestoreReport(snap, false)
	return err
}

// RestoreReport implements storage.RestoreReporter: Restore, telling the
// keys it wrote or deleted, each with the revision of its write (none when
// nothing differed). With keepHistory, the history is not
// compacted: watches see the changes as events, as if a client had made
// them, and none ends.
func (b *Backend) RestoreReport(snap storage.Snapshot, keepHistory bool) (changed map[string]int64, err error) {
	s, ok := snap.(*Snapshot)
	if !ok {
		return nil, storage.ErrForeignSnapshot
	}
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	type change struct {
		r      *record
		key    string
		entry  snapshotEntry
		delete bool
	}
	var changes []change
	seen := make(map[string]bool, len(s.entries))
	b.index.Ascend(func(r *record) bool {
		cur, live := r.current()
		e, keep := s.entries[r.key]
		seen[r.key] = true
		switch {
		case live && !keep:
			changes = append(changes, change{r: r, key: r.key, delete: true})
		case keep && (!live || !bytes.Equal(cur.value, e.value)):
			changes = append(changes, change{r: r, key: r.key, entry: e})
		}
		return true
	})
	for key, e := range s.entries {
		if !seen[key] {
			changes = append(changes, change{key: key, entry: e})
		}
	}
	if len(changes) == 0 {
		return nil, nil
	}
	changed = make(map[string]int64, len(changes))
	for _, c := range changes {
		var expires time.Time
		if c.entry.ttl > 0 {
			expires = now.Add(c.entry.ttl)
		}
		b.commitLocked(c.r, c.key, c.entry.value, c.delete, expires, now)
		changed[c.key] = b.rev
	}
	if !keepHistory {
		b.compactLocked(b.rev)
	}
	b.wakeAllLocked()
	return changed, nil
}
