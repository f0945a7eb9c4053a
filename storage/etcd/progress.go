package etcd

import (
	"context"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"k8s.io/apiserver/pkg/storage"
	etcdfeature "k8s.io/apiserver/pkg/storage/feature"
)

// settleProgressNotify answers, for the whole process, whether the
// cluster's endpoints take progress requests.
//
// The watch cache serves a consistent read (a list, or a watch with
// sendInitialEvents, at no resourceVersion) once it has caught up with
// etcd's current revision; on a resource nobody writes it only catches up
// if it can ask etcd for a progress notification. Whether it can is one
// answer per process (etcdfeature.DefaultFeatureSupportChecker), asked of
// each endpoint once, by the first etcd3 store built on it, under that
// store's client's context. kube-apiserver's client lives as long as its
// process; a Backend's does not: if the first Backend of a process closes
// before etcd answers, the checker gives up on the endpoint for good, the
// process never requests progress, and every later server's informers
// (client-go lists through watches with sendInitialEvents) would wait on
// idle resources for ever. (Found by reading the checker, not seen in a
// run: a test that closes its server that early is rare.)
//
// settleProgressNotify asks each endpoint itself, before the Backend builds
// a store, and hands the checker the answer under a context that outlives
// the Backend, so that no store's client is the one asked. An endpoint is
// asked once per process: one that does not answer within healthTimeout is
// left to the stores, as upstream leaves it.
func settleProgressNotify(ctx context.Context, client *clientv3.Client) {
	progressMu.Lock()
	defer progressMu.Unlock()
	for _, ep := range client.Endpoints() {
		if progressAsked[ep] {
			continue
		}
		progressAsked[ep] = true
		ctx, cancel := context.WithTimeout(ctx, healthTimeout)
		resp, err := client.Status(ctx, ep)
		cancel()
		if err != nil {
			continue
		}
		etcdfeature.DefaultFeatureSupportChecker.CheckClient(context.Background(),
			answered{ep, resp}, storage.RequestWatchProgress)
	}
}

var (
	progressMu sync.Mutex
	// progressAsked are the endpoints settleProgressNotify asked.
	progressAsked = map[string]bool{}
)

// answered is an endpoint's Status as the checker asks for it, already
// known: the checker's goroutine ends with its first call.
type answered struct {
	endpoint string
	status   *clientv3.StatusResponse
}

func (a answered) Endpoints() []string { return []string{a.endpoint} }

func (a answered) Status(context.Context, string) (*clientv3.StatusResponse, error) {
	return a.status, nil
}
