package apiserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/kubeembed/apiserver"
)

func clientFromKubeconfig(t *testing.T, path string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	require.NoError(t, err)
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return c
}

// testLeaderElection runs two candidates with client-go's leader election
// over a Lease: the first leads, releases on stop, and the second takes over.
func testLeaderElection(t *testing.T, srv *apiserver.Server) {
	c := clientset(t, srv)
	started := make(chan string, 2)
	stopped := make(chan string, 2)
	run := func(ctx context.Context, id string) {
		lock := &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Name: "controller", Namespace: "kube-system"},
			Client:     c.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		}
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   time.Second,
			RenewDeadline:   500 * time.Millisecond,
			RetryPeriod:     100 * time.Millisecond,
			ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { started <- id },
				OnStoppedLeading: func() { stopped <- id },
			},
		})
	}
	wait := func(ch chan string, what string) string {
		t.Helper()
		select {
		case id := <-ch:
			return id
		case <-time.After(10 * time.Second):
			t.Fatalf("timed out waiting for a candidate to %s", what)
			return ""
		}
	}

	ctxA, stopA := context.WithCancel(t.Context())
	doneA := make(chan struct{})
	go func() { defer close(doneA); run(ctxA, "a") }()
	require.Equal(t, "a", wait(started, "start leading"))

	ctxB, stopB := context.WithCancel(t.Context())
	doneB := make(chan struct{})
	go func() { defer close(doneB); run(ctxB, "b") }()
	defer func() { stopB(); <-doneB }()

	stopA()
	<-doneA
	require.Equal(t, "a", wait(stopped, "stop leading"))
	require.Equal(t, "b", wait(started, "take over"))

	lease, err := c.CoordinationV1().Leases("kube-system").Get(t.Context(), "controller", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, lease.Spec.HolderIdentity)
	require.Equal(t, "b", *lease.Spec.HolderIdentity)
}
