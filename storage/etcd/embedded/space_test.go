package embedded_test

import (
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubeembed/apiserver/storage/etcd/embedded"
)

// A member takes little disk before its first write: etcd allocates a
// write-ahead log segment whole, and one more ahead, which with etcd's
// 64 MB segments was 128 MiB a member (a suite of parallel tests on
// embedded etcd filled a small temporary directory with them).
func TestMemberTakesLittleDisk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := embedded.Start(t.Context(), embedded.Options{DataDir: dir, UnsafeNoFsync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	used := int64(0)
	require.NoError(t, filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			info, err := d.Info()
			if err == nil {
				used += info.Size()
			}
			return err
		}
		return err
	}))
	assert.Less(t, used, int64(24<<20), "bytes under the data directory")
}
