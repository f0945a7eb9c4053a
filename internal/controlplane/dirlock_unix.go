//go:build unix

package controlplane

import (
	"os"
	"syscall"
)

// lockDir holds an exclusive lock on dir until the returned func releases
// it (or the process ends: the kernel releases it then).
func lockDir(dir string) (func(), error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { _ = f.Close() }, nil
}

// unlocked reports whether no process holds dir's lock, holding it itself
// until release is called.
func unlocked(dir string) (release func(), ok bool) {
	unlock, err := lockDir(dir) // EWOULDBLOCK: held
	if err != nil {
		return nil, false
	}
	return unlock, true
}
