package controlplane

import (
	"context"
	"errors"

	"go.uber.org/zap"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeembed/apiserver/internal/controller"
)

// informerFactory is what informerSet needs of a shared informer factory;
// the typed, apiextensions and apiregistration factories all have it.
type informerFactory interface {
	StartWithContext(ctx context.Context)
	Shutdown()
}

// informerSet is the one owner of a server's shared informers: the typed and
// dynamic factories of the core tier (which admission and the users of
// Server.InformerFactory share) and the factories the apiextensions and
// aggregator tiers create for themselves. One context bounds them all, from
// New to Close, and with them the admission policy plugins' controllers.
//
// The tiers' post-start hooks (generic-apiserver-start-informers,
// start-apiextensions-informers, start-kube-aggregator-informers) start their
// factories as on kube-apiserver, but Start has already started and synced
// them before the chain runs: those hooks and the ones that wait for them
// poll every 100 ms, and an informer that syncs just after a first poll cost
// a whole poll (measured: 56 ms start instead of ~150 ms).
type informerSet struct {
	ctx    context.Context
	cancel context.CancelFunc

	kube    informers.SharedInformerFactory
	dynamic dynamicinformer.DynamicSharedInformerFactory
	// client and dynClient are the loopback clients the factories list
	// and watch with, for admission plugins to share.
	client    kubernetes.Interface
	dynClient dynamic.Interface
	// metadata lists and watches for the controllers' resource monitors
	// (which own their informers: see controller.Monitors).
	metadata metadata.Interface
	all      []informerFactory
}

func newInformerSet(loopback *rest.Config, log *zap.Logger) (*informerSet, error) {
	kubeClient, err := kubernetes.NewForConfig(loopback)
	if err != nil {
		return nil, err
	}
	dynClient, err := dynamic.NewForConfig(loopback)
	if err != nil {
		return nil, err
	}
	metadataClient, err := metadata.NewForConfig(loopback)
	if err != nil {
		return nil, err
	}
	// The libraries log through the context informers start with.
	ctx, cancel := context.WithCancel(WithLogger(context.Background(), log))
	i := &informerSet{
		ctx: ctx, cancel: cancel,
		kube:    informers.NewSharedInformerFactory(kubeClient, 0),
		dynamic: dynamicinformer.NewDynamicSharedInformerFactory(dynClient, 0),
		client:  kubeClient, dynClient: dynClient,
		metadata: metadataClient,
	}
	i.all = []informerFactory{i.kube, dynamicFactory{i.dynamic}}
	return i, nil
}

// with makes the set own the factories of the other tiers too (they create
// their own).
func (i *informerSet) with(factories ...informerFactory) *informerSet {
	i.all = append(i.all, factories...)
	return i
}

// done is closed when the set shuts down.
func (i *informerSet) done() <-chan struct{} { return i.ctx.Done() }

// start starts every informer requested so far from any factory; it may be
// called again for informers requested later.
func (i *informerSet) start() {
	for _, f := range i.all {
		f.StartWithContext(i.ctx)
	}
}

// waitSynced waits until every informer has synced, checking every
// millisecond (client-go's WaitForCacheSync checks every 100 ms).
func waitSynced(ctx context.Context, synced ...cache.InformerSynced) error {
	return controller.Wait(ctx, func() error {
		for _, ok := range synced {
			if !ok() {
				return errors.New("informers not synced")
			}
		}
		return nil
	})
}

// shutdown stops every informer and waits for their goroutines.
func (i *informerSet) shutdown() {
	i.cancel()
	for _, f := range i.all {
		f.Shutdown()
	}
}

// dynamicFactory gives the dynamic factory, which starts from a channel,
// the context-starting method of the others.
type dynamicFactory struct {
	dynamicinformer.DynamicSharedInformerFactory
}

func (f dynamicFactory) StartWithContext(ctx context.Context) { f.Start(ctx.Done()) }
