//go:build !unix

package controlplane

// lockDir does not lock on this platform.
func lockDir(string) (func(), error) { return func() {}, nil }

// unlocked cannot tell on this platform: nothing is taken for unlocked, so
// nothing is swept.
func unlocked(string) (func(), bool) { return nil, false }
