// Package controlplane builds a kubeembed server's chain as kube-apiserver
// builds its own: cmd/kube-apiserver/app's config.go makes every tier's
// configuration as a value from the completed options (Config ->
// newShared -> the three tier configurations), and server.go's
// CreateServerChain is New: three Complete().New(delegate) calls, back to
// front. The core tier's construction wires the server's own post-start
// hooks and its controllers; the aggregator's (createAggregator, the role of
// upstream's CreateAggregatorServer) adds APIService autoregistration, its
// readiness checks and the routes only it serves. Nothing here writes back
// into the caller: New returns a ControlPlane, which the root package's
// Server drives (start, wait, close).
package controlplane

import (
	"context"
	"fmt"
	"net/http"

	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	apiextensionslisters "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	aggregatorapiserver "k8s.io/kube-aggregator/pkg/apiserver"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
	"github.com/kubeembed/apiserver/internal/inproc"
	"github.com/kubeembed/apiserver/internal/writes"
)

// ControlPlane is the built chain and what runs beside it: informers,
// controllers, the in-process loopback.
type ControlPlane struct {
	aggregator *aggregatorapiserver.APIAggregator
	// publishOpenAPI shares the core tier's OpenAPI v3 service with later
	// servers once it is prepared (when it built its own).
	publishOpenAPI func()
	informers      *informerSet
	// synced are the informers readiness needs, declared by what needs
	// them.
	synced      []cache.InformerSynced
	loopback    *inproc.Transport
	controllers *controllerSet
	writes      *writes.Log
	flowStatus  *flowSchemaStatus // nil without priority and fairness
	crds        apiextensionslisters.CustomResourceDefinitionLister
	// crdsSeen are the resources CRDs served since the last Reset.
	crdsSeen *seenResources
	// restorers repair what providers keep beside storage after a
	// restore.
	restorers []func(context.Context) error
	// muxComplete is the handler chain's MuxAndDiscoveryComplete signal,
	// closed once the chain runs and every tier has signalled.
	muxComplete chan struct{}
	// definitions are the OpenAPI definitions, held until ready.
	definitions *heldDefinitions
}

// New builds the three delegating tiers back to front, as kube-apiserver's
// CreateServerChain: apiextensions -> core -> aggregator, each
// Complete().New(delegate), and serves the aggregator on the loopback.
func New(c Config) (_ *ControlPlane, err error) {
	sh, err := newShared(c)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			sh.abort()
		}
	}()
	ext, err := newExtensionsConfig(sh).Complete().New(notFoundDelegate(apiextensionsapiserver.Codecs))
	if err != nil {
		return nil, fmt.Errorf("apiextensions tier: %w", err)
	}
	crds := extensionsReady(ext)
	seen, err := watchServedResources(crds.Informer())
	if err != nil {
		return nil, fmt.Errorf("apiextensions tier: %w", err)
	}
	coreConfig, err := newCoreConfig(sh, crds.Informer())
	if err != nil {
		return nil, fmt.Errorf("core tier: %w", err)
	}
	core, err := coreConfig.Complete().New(ext.GenericAPIServer)
	if err != nil {
		return nil, fmt.Errorf("core tier: %w", err)
	}
	agg, err := createAggregator(sh, core, ext)
	if err != nil {
		return nil, fmt.Errorf("aggregator tier: %w", err)
	}
	for _, s := range []*genericapiserver.GenericAPIServer{agg.GenericAPIServer, core.GenericAPIServer, ext.GenericAPIServer} {
		s.Handler.GoRestfulContainer.Router(&routeCache{})
		shareRouteRegexps(s.Handler.GoRestfulContainer)
	}
	sh.transport.SetHandler(agg.GenericAPIServer.Handler)
	apiServices := agg.APIRegistrationInformers.Apiregistration().V1().APIServices().Informer()
	return &ControlPlane{
		aggregator: agg, publishOpenAPI: core.publishOpenAPI,
		informers: sh.informers.with(ext.Informers, agg.APIRegistrationInformers),
		synced:    append(sh.synced, crds.Informer().HasSynced, apiServices.HasSynced),
		loopback:  sh.transport, controllers: core.controllers, writes: sh.writes,
		flowStatus: sh.flowStatus,
		crds:       crds.Lister(), crdsSeen: seen, restorers: core.restorers, muxComplete: sh.muxComplete,
		definitions: sh.definitions,
	}, nil
}

// Runner runs a prepared chain until its context ends.
type Runner interface {
	Run(ctx context.Context) error
}

// Prepare readies the chain to run, as PrepareRun does.
func (cp *ControlPlane) Prepare() (Runner, error) {
	p, err := cp.aggregator.PrepareRun()
	if err != nil {
		return nil, err
	}
	cp.publishOpenAPI()
	return runner{p, cp}, nil
}

// runner runs the prepared chain and signals MuxAndDiscoveryComplete to
// its handler chain as kube-apiserver's run does.
type runner struct {
	Runner
	cp *ControlPlane
}

func (r runner) Run(ctx context.Context) error {
	go signalMuxComplete(r.cp.aggregator.GenericAPIServer, r.cp.muxComplete, ctx.Done())
	return r.Runner.Run(ctx)
}

// StartInformers starts every shared informer and waits until those
// readiness needs have synced; see informerSet for why before the chain
// runs (the loopback is in process, so they sync before the listener is
// up).
func (cp *ControlPlane) StartInformers(ctx context.Context) error {
	cp.informers.start()
	return waitSynced(ctx, cp.synced...)
}

// MarkReady tells the controllers the server is ready and starts the
// resource monitors, as kube-controller-manager starts once kube-apiserver
// is: a metadata informer per resource is ~25 ms of work on two cores
// (BENCHMARKS.md) that Start need not wait for; WaitIdle does. The tiers
// are built by then: the OpenAPI definitions are let go.
func (cp *ControlPlane) MarkReady() {
	cp.definitions.release()
	cp.controllers.markReady(cp.informers.ctx)
}

// WaitStarted waits for the controllers that Start waits for
// (controllers.Starter): the simulated kubelet's initial nodes.
func (cp *ControlPlane) WaitStarted(ctx context.Context) error {
	for _, r := range cp.controllers.running {
		if s, ok := r.Controller.(controllers.Starter); ok {
			if err := s.WaitStarted(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// Controller is the running controller of that name, nil when it does not
// run.
func (cp *ControlPlane) Controller(name controllers.Name) controllers.Controller {
	for _, r := range cp.controllers.running {
		if r.name == name {
			return r.Controller
		}
	}
	return nil
}

// WaitIdle waits until the controllers have nothing left to do (see
// Server.WaitIdle).
func (cp *ControlPlane) WaitIdle(ctx context.Context) error {
	for {
		if err := cp.controllers.waitIdle(ctx, cp.writes); err != nil {
			return err
		}
		if cp.flowStatus == nil {
			return nil
		}
		written := cp.writes.Snapshot()
		if cp.flowStatus.Idle(written) == nil {
			return nil
		}
		// What priority and fairness writes, the controllers may see.
		if err := controller.Wait(ctx, func() error { return cp.flowStatus.Idle(written) }); err != nil {
			return err
		}
	}
}

// Restored repairs what providers keep beside storage after the storage
// was restored to a snapshot, and notes the keys it changed (each with the
// revision of its write; nil when not known) as writes WaitIdle waits for
// the informers to see.
func (cp *ControlPlane) Restored(ctx context.Context, changed map[string]int64) error {
	cp.writes.Restored(changed)
	for _, f := range cp.restorers {
		if err := f(ctx); err != nil {
			return err
		}
	}
	return nil
}

// KubeInformers is the shared typed informer factory of the core tier.
func (cp *ControlPlane) KubeInformers() informers.SharedInformerFactory { return cp.informers.kube }

// DynamicInformers is the shared dynamic informer factory.
func (cp *ControlPlane) DynamicInformers() dynamicinformer.DynamicSharedInformerFactory {
	return cp.informers.dynamic
}

// Handler is the server's handler chain, outermost tier first, as the
// listener serves it.
func (cp *ControlPlane) Handler() http.Handler { return cp.aggregator.GenericAPIServer.Handler }

// Loopback is the transport of the server's own clients (see inproc for
// Drain, Abandon and Close).
func (cp *ControlPlane) Loopback() *inproc.Transport { return cp.loopback }

// StopInformers stops every informer, and with them the controllers, without
// waiting.
func (cp *ControlPlane) StopInformers() { cp.informers.cancel() }

// Shutdown stops the informers and waits for their goroutines and the
// controllers', then closes the loopback: no more requests of the server's
// own. The post-start hooks' controllers (API Priority and Fairness' among
// them) end with the server loop, unwaited.
func (cp *ControlPlane) Shutdown() {
	cp.informers.shutdown()
	cp.controllers.wait()
	cp.loopback.Close()
}
