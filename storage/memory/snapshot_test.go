package memory

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubeembed/apiserver/storage"
)

type foreignSnapshot struct{}

func (foreignSnapshot) Revision() int64 { return 0 }

func TestSnapshotRestore(t *testing.T) {
	t.Parallel()
	b := NewBackend(Options{})
	t.Cleanup(func() { _ = b.Close() })
	require.True(t, b.put("/a", []byte("1"), 0, 0).succeeded)
	require.True(t, b.put("/b", []byte("1"), 0, 0).succeeded)
	require.True(t, b.put("/ttl", []byte("x"), 0, 60).succeeded)
	snap := b.Snapshot()
	assert.Equal(t, b.Revision(), snap.Revision())
	assert.Equal(t, 3, snap.(*Snapshot).Len())

	rev := b.Revision()
	require.NoError(t, b.Restore(snap))
	assert.Equal(t, rev, b.Revision(), "nothing changed: no revision, no compaction")

	a, _, _, err := b.get("/a", 0)
	require.NoError(t, err)
	require.True(t, b.put("/a", []byte("2"), a.modRev, 0).succeeded)
	bv, _, _, _ := b.get("/b", 0)
	require.True(t, b.del("/b", bv.modRev).succeeded)
	require.True(t, b.put("/c", []byte("new"), 0, 0).succeeded)
	before := b.Revision()

	require.NoError(t, b.Restore(snap))
	assert.Equal(t, before+3, b.Revision(), "one revision per key that differs")
	assert.Equal(t, b.Revision(), b.CompactRevision(), "history before the restore is gone")
	for key, want := range map[string]string{"/a": "1", "/b": "1", "/ttl": "x"} {
		got, ok, _, err := b.get(key, 0)
		require.NoError(t, err)
		require.True(t, ok, key)
		assert.Equal(t, want, string(got.value), key)
	}
	_, ok, _, err := b.get("/c", 0)
	require.NoError(t, err)
	assert.False(t, ok, "created since: deleted")
	r, _ := b.index.Get(&record{key: "/ttl"})
	v, _ := r.current()
	assert.False(t, v.expires.IsZero(), "the lease survives a restore")

	assert.ErrorIs(t, b.Restore(foreignSnapshot{}), storage.ErrForeignSnapshot)
	require.NoError(t, b.Close())
	assert.ErrorIs(t, b.Restore(snap), ErrClosed)
}
