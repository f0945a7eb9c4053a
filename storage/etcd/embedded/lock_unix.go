//go:build unix

package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes an exclusive lock on dir (a lock file in it) that another
// server, in this process or another, cannot take until unlock.
func lockDir(dir string) (unlock func() error, err error) {
	name := filepath.Join(dir, "kubeembed.lock")
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("embedded etcd: data directory %s is in use by another server", dir)
		}
		return nil, fmt.Errorf("embedded etcd: locking %s: %w", name, err)
	}
	return f.Close, nil
}
