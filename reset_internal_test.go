package apiserver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/storage"
)

// A restore that takes back only heartbeats (a kubelet's Lease renewed
// since the snapshot) is settled: its holder renews it again on its own
// period, whatever the controllers do, so a loaded machine could
// otherwise meet one in every round.
func TestRestoreOfHeartbeatsIsSettled(t *testing.T) {
	t.Parallel()
	clock := clocktesting.NewFakeClock(time.Now())
	srv, err := New(Options{Nodes: controllers.Nodes(1), Clock: clock})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, srv.Close()) })
	require.NoError(t, srv.Start(t.Context()))
	require.NoError(t, srv.WaitIdle(t.Context()))
	snap, err := srv.Snapshot()
	require.NoError(t, err)
	for range 11 { // past the kubelet's 10 s renewal, a second at a time
		clock.Step(time.Second)
		require.NoError(t, srv.WaitIdle(t.Context()))
	}
	changed, err := srv.opts.storage.(storage.RestoreReporter).RestoreReport(snap, true)
	require.NoError(t, err)
	assert.Contains(t, changed, leasesPrefix+"kube-node-lease/node-0")
	assert.True(t, onlyHeartbeats(changed), "%v", changed)
	assert.False(t, onlyHeartbeats(map[string]int64{"/registry/pods/default/p": 1, leasesPrefix + "kube-node-lease/node-0": 2}))
}
