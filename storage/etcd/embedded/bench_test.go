package embedded_test

import (
	"context"
	"testing"

	"github.com/kubeembed/apiserver/storage/etcd/embedded"
)

// BenchmarkStart is an embedded etcd's start until it serves (a single
// member, a new data directory, fsync off), Close not timed.
func BenchmarkStart(b *testing.B) {
	for b.Loop() {
		s, err := embedded.Start(context.Background(), embedded.Options{UnsafeNoFsync: true})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = s.Close()
		b.StartTimer()
	}
}
