// Package garbagecollector is the garbage collector, as
// kube-controller-manager runs it: an owner graph over every object of every
// resource that can be listed, watched and deleted (built-in, custom and
// aggregated, followed as they come and go), from metadata-only informers;
// dependents whose owners are all gone are deleted, foreground deletion
// (foregroundDeletion finalizer, blockOwnerDeletion) waits for the blocking
// dependents, orphan deletion (orphan finalizer) removes the owner
// references first. Owners with a wrong UID or in another namespace are
// absent, and the latter earn the dependent an OwnerRefInvalidNamespace
// event as upstream.
package garbagecollector

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/record"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

// workers are kube-controller-manager's --concurrent-gc-syncs default.
const workers = 20

// GarbageCollector is the garbage collector.
type GarbageCollector struct {
	controller.Parts
	cfg      controllers.Config
	metadata metadata.Interface
	mapper   *restmapper.DeferredDiscoveryRESTMapper
	graph    *graph
	absent   *absentOwners

	deleteQueue, orphanQueue *controller.Queue
	// subscribed is set once the monitors have told their resources.
	subscribed atomic.Bool
}

// New returns the garbage collector of cfg's server.
func New(cfg controllers.Config) (*GarbageCollector, error) {
	gc := &GarbageCollector{
		cfg: cfg, metadata: cfg.Metadata,
		mapper:      restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cfg.Discovery)),
		graph:       &graph{nodes: map[types.UID]*node{}},
		absent:      newAbsentOwners(),
		deleteQueue: controller.NewQueue("garbage_collector_attempt_to_delete", cfg.QueueMetrics),
		orphanQueue: controller.NewQueue("garbage_collector_attempt_to_orphan", cfg.QueueMetrics),
	}
	gc.Name, gc.Observer, gc.Queues = string(controllers.GarbageCollector), controller.NewObserver(cfg.Revisions), []*controller.Queue{gc.deleteQueue, gc.orphanQueue}
	gc.Events = controller.NewEvents(cfg.Client)
	cfg.Monitors.Subscribe(gc.resourcesChanged)
	return gc, nil
}

// Run collects garbage until ctx ends. Its workers start once the graph
// holds every object of every resource (as upstream's wait for its
// monitors): an owner seen before its dependents must not look childless.
func (gc *GarbageCollector) Run(ctx context.Context) {
	defer gc.Events.Start()()
	defer gc.ShutDown() // also when ctx ends before the graph is built
	err := controller.Wait(ctx, func() error {
		if !gc.subscribed.Load() || !gc.Observer.Synced() {
			return errors.New("graph not built")
		}
		return nil
	})
	if err != nil {
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { gc.deleteQueue.Run(ctx, workers, gc.attemptToDelete) })
	wg.Go(func() { gc.orphanQueue.Run(ctx, workers, gc.attemptToOrphan) })
	wg.Wait()
}

// resourcesChanged follows the monitored resources: a new one's objects join
// the graph, a removed one's stop being watched (its objects leave the
// graph as their deletions are seen, or as absent owners).
func (gc *GarbageCollector) resourcesChanged(added, removed []controllers.Resource) {
	defer gc.subscribed.Store(true)
	gc.mapper.Reset()
	for _, r := range removed {
		gc.Observer.Unwatch(r.GroupResource())
	}
	for _, r := range added {
		_ = gc.Observer.Watch(r.GroupResource(), r.Informer, gc.handler(r.GroupVersion().WithKind(r.Kind)))
	}
}

// recorder records events as "garbage-collector-controller", as upstream.
func (gc *GarbageCollector) recorder() record.EventRecorder {
	return gc.Events.NewRecorder(clientgoscheme.Scheme, corev1.EventSource{Component: "garbage-collector-controller"})
}

// absentOwners are owners found absent, so their other dependents need no
// lookup (kube-controller-manager keeps 500 in an LRU; this forgets all at
// 1,000).
type absentOwners struct {
	mu  sync.Mutex
	ids map[identity]struct{}
}

func newAbsentOwners() *absentOwners { return &absentOwners{ids: map[identity]struct{}{}} }

func (a *absentOwners) add(id identity) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.ids) >= 1000 {
		clear(a.ids)
	}
	a.ids[id] = struct{}{}
}

func (a *absentOwners) has(id identity) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.ids[id]
	return ok
}
