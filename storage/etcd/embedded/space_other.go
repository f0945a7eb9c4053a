//go:build !unix

package embedded

// freeBytes is not known on this platform: etcd's default quota applies.
func freeBytes(string) (int64, bool, error) { return 0, false, nil }
