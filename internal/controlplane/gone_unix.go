//go:build unix

package controlplane

import (
	"errors"
	"syscall"
)

// processGone reports whether no process has pid (a signal 0 finds none).
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
