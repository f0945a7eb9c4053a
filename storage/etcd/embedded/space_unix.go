//go:build unix

package embedded

import "syscall"

// freeBytes is the room an unprivileged writer has on dir's filesystem.
func freeBytes(dir string) (int64, bool, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false, err
	}
	return int64(st.Bavail) * int64(st.Bsize), true, nil //nolint:gosec,unconvert // fields' types differ by platform
}
