//go:build !unix

package embedded

// lockDir does not lock on this platform: etcd's own file locks are the only
// guard against two servers on one data directory.
func lockDir(string) (func() error, error) { return func() error { return nil }, nil }
