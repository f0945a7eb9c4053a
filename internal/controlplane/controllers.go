package controlplane

// The controllers the server runs (controllers/...), as
// kube-controller-manager runs them beside kube-apiserver: built with the
// chain, started by post-start hooks named start-<controller>, and what
// WaitIdle asks.

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/controllers/clusterroleaggregation"
	"github.com/kubeembed/apiserver/controllers/cronjob"
	"github.com/kubeembed/apiserver/controllers/csrapproving"
	"github.com/kubeembed/apiserver/controllers/csrcleaner"
	"github.com/kubeembed/apiserver/controllers/csrsigning"
	"github.com/kubeembed/apiserver/controllers/daemonset"
	"github.com/kubeembed/apiserver/controllers/deployment"
	"github.com/kubeembed/apiserver/controllers/disruption"
	"github.com/kubeembed/apiserver/controllers/endpoint"
	"github.com/kubeembed/apiserver/controllers/endpointslice"
	"github.com/kubeembed/apiserver/controllers/endpointslicemirroring"
	"github.com/kubeembed/apiserver/controllers/ephemeralvolume"
	"github.com/kubeembed/apiserver/controllers/garbagecollector"
	"github.com/kubeembed/apiserver/controllers/job"
	"github.com/kubeembed/apiserver/controllers/kubelet"
	"github.com/kubeembed/apiserver/controllers/namespace"
	"github.com/kubeembed/apiserver/controllers/nodelifecycle"
	"github.com/kubeembed/apiserver/controllers/persistentvolume"
	"github.com/kubeembed/apiserver/controllers/podautoscaler"
	"github.com/kubeembed/apiserver/controllers/podgc"
	"github.com/kubeembed/apiserver/controllers/provisioner"
	"github.com/kubeembed/apiserver/controllers/pvcprotection"
	"github.com/kubeembed/apiserver/controllers/pvprotection"
	"github.com/kubeembed/apiserver/controllers/replicaset"
	"github.com/kubeembed/apiserver/controllers/resourcequota"
	"github.com/kubeembed/apiserver/controllers/rootcacert"
	"github.com/kubeembed/apiserver/controllers/scheduler"
	"github.com/kubeembed/apiserver/controllers/serviceaccounttoken"
	"github.com/kubeembed/apiserver/controllers/statefulset"
	"github.com/kubeembed/apiserver/controllers/tainteviction"
	"github.com/kubeembed/apiserver/controllers/ttlafterfinished"
	"github.com/kubeembed/apiserver/controllers/validatingadmissionpolicystatus"
	"github.com/kubeembed/apiserver/controllers/volumeexpand"
	"github.com/kubeembed/apiserver/internal/controller"
	"github.com/kubeembed/apiserver/internal/version"
	"github.com/kubeembed/apiserver/internal/writes"
)

// newController builds each controller that has a loop (ServiceAccount's
// work is done by the core group's storage: providers.Config).
var newController = map[controllers.Name]func(controllers.Config) (controllers.Controller, error){
	controllers.GarbageCollector:                loop(garbagecollector.New),
	controllers.Namespace:                       loop(namespace.New),
	controllers.RootCACertPublisher:             loop(rootcacert.New),
	controllers.ServiceAccountToken:             loop(serviceaccounttoken.New),
	controllers.ResourceQuota:                   loop(resourcequota.New),
	controllers.ClusterRoleAggregation:          loop(clusterroleaggregation.New),
	controllers.Kubelet:                         loop(kubelet.New),
	controllers.Scheduler:                       loop(scheduler.New),
	controllers.NodeLifecycle:                   loop(nodelifecycle.New),
	controllers.TaintEviction:                   loop(tainteviction.New),
	controllers.PodGC:                           loop(podgc.New),
	controllers.Deployment:                      loop(deployment.New),
	controllers.ReplicaSet:                      loop(replicaset.NewReplicaSets),
	controllers.ReplicationController:           loop(replicaset.NewReplicationControllers),
	controllers.StatefulSet:                     loop(statefulset.New),
	controllers.DaemonSet:                       loop(daemonset.New),
	controllers.Job:                             loop(job.New),
	controllers.CronJob:                         loop(cronjob.New),
	controllers.TTLAfterFinished:                loop(ttlafterfinished.New),
	controllers.HorizontalPodAutoscaling:        loop(podautoscaler.New),
	controllers.Disruption:                      loop(disruption.New),
	controllers.Endpoint:                        loop(endpoint.New),
	controllers.EndpointSlice:                   loop(endpointslice.New),
	controllers.EndpointSliceMirroring:          loop(endpointslicemirroring.New),
	controllers.PersistentVolumeBinder:          loop(persistentvolume.New),
	controllers.VolumeProvisioner:               loop(provisioner.New),
	controllers.PVCProtection:                   loop(pvcprotection.New),
	controllers.PVProtection:                    loop(pvprotection.New),
	controllers.EphemeralVolume:                 loop(ephemeralvolume.New),
	controllers.VolumeExpand:                    loop(volumeexpand.New),
	controllers.CSRSigning:                      loop(csrsigning.New),
	controllers.CSRApproving:                    loop(csrapproving.New),
	controllers.CSRCleaner:                      loop(csrcleaner.New),
	controllers.ValidatingAdmissionPolicyStatus: loop(validatingadmissionpolicystatus.New),
}

// loop adapts a controller package's New to newController's type.
func loop[C controllers.Controller](build func(controllers.Config) (C, error)) func(controllers.Config) (controllers.Controller, error) {
	return func(cfg controllers.Config) (controllers.Controller, error) { return build(cfg) }
}

// loops are the enabled controllers that have a loop, in start order.
func loops(enabled []controllers.Name) []controllers.Name {
	return slices.DeleteFunc(slices.Clone(enabled), func(n controllers.Name) bool { return newController[n] == nil })
}

// controllerBase is what the controllers are built from before the tiers
// exist: their clients, the server's informers, and the ClusterRole
// aggregation controller, which the authorizer waits for (a denied request
// waits until roles written before it are aggregated: freshRBAC) and so is
// built first.
type controllerBase struct {
	enabled     []controllers.Name
	config      controllers.Config
	ready       chan struct{}
	aggregation controllers.Controller // nil when it does not run
}

// newControllerBase readies the enabled controllers to be built from cfg
// (Ready is set here).
func newControllerBase(enabled []controllers.Name, cfg controllers.Config) (controllerBase, error) {
	b := controllerBase{enabled: enabled, config: cfg, ready: make(chan struct{})}
	b.config.Ready = b.ready
	if slices.Contains(enabled, controllers.ClusterRoleAggregation) {
		var err error
		if b.aggregation, err = newController[controllers.ClusterRoleAggregation](b.config); err != nil {
			return b, fmt.Errorf("controller %s: %w", controllers.ClusterRoleAggregation, err)
		}
	}
	return b, nil
}

// controllerConfig gives the controllers clients of their own over
// loopback, named as kube-controller-manager's (their writes' field manager
// is "kube-controller-manager", as on a cluster), and the server's
// informers, its write log, queue metrics and keys.
func controllerConfig(loopback *rest.Config, inf informers.SharedInformerFactory, log *writes.Log,
	queues workqueue.MetricsProvider, keys Keys) (controllers.Config, error) {
	cc := rest.CopyConfig(loopback)
	cc.UserAgent = "kube-controller-manager/v" + version.Kubernetes()
	client, err := kubernetes.NewForConfig(cc)
	if err != nil {
		return controllers.Config{}, err
	}
	meta, err := metadata.NewForConfig(cc)
	if err != nil {
		return controllers.Config{}, err
	}
	d, err := discovery.NewDiscoveryClientForConfig(cc)
	if err != nil {
		return controllers.Config{}, err
	}
	return controllers.Config{
		RESTConfig: cc, Client: client, Metadata: meta, Discovery: d, Informers: controller.FanOutFactory(inf), Revisions: log,
		QueueMetrics: queues, RootCA: keys.CA.CertPEM, LegacyTokens: keys.Issuer, Signer: keys.CA,
	}, nil
}

// controllerSet is the server's controllers and what WaitIdle asks.
type controllerSet struct {
	monitors *controller.Monitors
	running  []namedController
	wg       sync.WaitGroup
	// ready is closed when the server is ready (controllers.Config.Ready).
	ready chan struct{}

	mu sync.Mutex // guards the fields below
	// started are the controllers whose start hook ran; once stopped, no
	// more start.
	started map[controllers.Name]bool
	stopped bool
}

type namedController struct {
	name controllers.Name
	controllers.Controller
}

// newControllerSet builds the enabled controllers of b, with resource
// monitors that list and watch with meta, rediscovering as crds (a CRD
// informer) changes.
func newControllerSet(b controllerBase, meta metadata.Interface, crds cache.SharedIndexInformer) (*controllerSet, error) {
	set := &controllerSet{ready: b.ready, started: map[controllers.Name]bool{}}
	names := loops(b.enabled)
	if len(names) == 0 {
		return set, nil
	}
	cfg := b.config
	var err error
	if set.monitors, err = controller.NewMonitors(meta, cfg.Discovery, crds, cfg.Revisions); err != nil {
		return nil, err
	}
	cfg.Monitors = set.monitors
	for _, name := range names {
		c := b.aggregation
		if name != controllers.ClusterRoleAggregation {
			if c, err = newController[name](cfg); err != nil {
				return nil, fmt.Errorf("controller %s: %w", name, err)
			}
		}
		set.running = append(set.running, namedController{name, c})
	}
	return set, nil
}

// clusterDialer is the network of the simulated kubelet's nodes and pods
// (providers.Config.ClusterDialer), nil when the kubelet does not run.
func (c *controllerSet) clusterDialer() func(ctx context.Context, network, address string) (net.Conn, error) {
	for _, r := range c.running {
		if k, ok := r.Controller.(*kubelet.Kubelet); ok {
			return k.DialContext
		}
	}
	return nil
}

// register adds the post-start hooks that start each controller until
// ctx, the informers' context, ends.
func (c *controllerSet) register(tier *genericapiserver.GenericAPIServer, ctx context.Context) error {
	for _, r := range c.running {
		if err := addPostStartHook(tier, "start-"+string(r.name), func(genericapiserver.PostStartHookContext) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			if !c.stopped {
				c.started[r.name] = true
				c.wg.Go(func() { r.Run(ctx) })
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// markReady closes Ready and starts the resource monitors until ctx ends.
func (c *controllerSet) markReady(ctx context.Context) {
	close(c.ready)
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.monitors; m != nil && !c.stopped {
		c.wg.Go(func() { m.Run(ctx) })
	}
}

// wait waits for the controllers' goroutines, which end with the
// informers' context, and shuts down the queues of those that never ran
// (the server stopped before their start hooks did: Close after a Start
// whose context ended first), which client-go starts goroutines for as it
// makes them.
func (c *controllerSet) wait() {
	c.mu.Lock()
	c.stopped = true
	for _, r := range c.running {
		if s, ok := r.Controller.(interface{ ShutDown() }); ok && !c.started[r.name] {
			s.ShutDown()
		}
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// waitIdle returns once every controller has nothing left to do: it has
// seen every write made before the call and every write the controllers
// made in reaction since, and its queues are empty (Server.WaitIdle).
func (c *controllerSet) waitIdle(ctx context.Context, log *writes.Log) error {
	for {
		before, written := c.finished(), log.Snapshot()
		if err := controller.Wait(ctx, func() error { return c.idle(written) }); err != nil {
			return err
		}
		if c.finished() == before {
			return nil
		}
	}
}

func (c *controllerSet) finished() uint64 {
	var n uint64
	for _, r := range c.running {
		n += r.Finished()
	}
	return n
}

func (c *controllerSet) idle(written map[schema.GroupResource]uint64) error {
	if c.monitors == nil {
		return nil
	}
	if err := c.monitors.Idle(written); err != nil {
		return err
	}
	for _, r := range c.running {
		if err := r.Idle(written); err != nil {
			return err
		}
	}
	return nil
}
