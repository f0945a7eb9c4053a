package envtest_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/envtest"
	"github.com/kubeembed/apiserver/timing"
)

// The drop-in takes a timing through ServerOptions, as any other server
// option.
func TestTimingThroughServerOptions(t *testing.T) {
	t.Parallel()
	te := &envtest.Environment{ServerOptions: apiserver.Options{Timing: timing.Shake(5)}}
	start(t, te)
	assert.Equal(t, timing.Shake(5), te.Server.Timing())
}

// A suite that cannot change its code chooses one with KUBEEMBED_TIMING.
func TestTimingFromTheEnvironment(t *testing.T) {
	t.Setenv("KUBEEMBED_TIMING", "etcd:7")
	te := &envtest.Environment{}
	start(t, te)
	want := timing.Etcd()
	want.Seed = 7
	assert.Equal(t, want, te.Server.Timing())
}
