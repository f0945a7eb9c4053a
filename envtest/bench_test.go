package envtest_test

import (
	"path/filepath"
	"testing"

	"github.com/kubeembed/apiserver/envtest"
)

// BenchmarkEnvironmentStart is Start to a usable configuration, as a
// kubebuilder suite's BeforeSuite sees it: two CRDs from a directory and
// webhook configurations from config/webhook, with the serving
// certificate. Stop is not timed. envtest's own Start with kube-apiserver
// and etcd is ~4 s on this machine (BENCHMARKS.md).
func BenchmarkEnvironmentStart(b *testing.B) {
	for b.Loop() {
		te := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("testdata", "crds")}, ErrorIfCRDPathMissing: true,
			WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: []string{filepath.Join("testdata", "webhooks")}}}
		if _, err := te.Start(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := te.Stop(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
