package envtest_test

import (
	"os"
	"path/filepath"
	"testing"

	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kubeembed/apiserver/envtest"
)

// BenchmarkEnvironmentStart is Start to a usable configuration, as a
// kubebuilder suite's BeforeSuite sees it: two CRDs from a directory and
// webhook configurations from config/webhook, with the serving
// certificate; Stop is not timed. The envtest case runs controller-runtime's
// envtest on kube-apiserver and etcd when KUBEBUILDER_ASSETS names a
// directory holding them (BENCHMARKS.md says how to build them), so that
// both run side by side on one machine.
func BenchmarkEnvironmentStart(b *testing.B) {
	crds := []string{filepath.Join("testdata", "crds")}
	webhooks := []string{filepath.Join("testdata", "webhooks")}
	b.Run("kubeembed", func(b *testing.B) {
		for b.Loop() {
			te := &envtest.Environment{CRDDirectoryPaths: crds, ErrorIfCRDPathMissing: true,
				WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: webhooks}}
			startStop(b, te.Start, te.Stop)
		}
	})
	b.Run("envtest", func(b *testing.B) {
		if os.Getenv("KUBEBUILDER_ASSETS") == "" {
			b.Skip("KUBEBUILDER_ASSETS is not set: no kube-apiserver and etcd to compare with")
		}
		for b.Loop() {
			te := &crenvtest.Environment{CRDDirectoryPaths: crds, ErrorIfCRDPathMissing: true,
				WebhookInstallOptions: crenvtest.WebhookInstallOptions{Paths: webhooks}}
			startStop(b, te.Start, te.Stop)
		}
	})
}

// startStop times start, not stop.
func startStop[C any](b *testing.B, start func() (C, error), stop func() error) {
	if _, err := start(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if err := stop(); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
}
