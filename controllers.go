package apiserver

// The controllers the server runs (controllers/...), built with the chain
// and started by post-start hooks named start-<controller>, and WaitIdle.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/controllers/clusterroleaggregation"
	"github.com/kubeembed/apiserver/controllers/garbagecollector"
	"github.com/kubeembed/apiserver/controllers/namespace"
	"github.com/kubeembed/apiserver/controllers/resourcequota"
	"github.com/kubeembed/apiserver/controllers/rootcacert"
	"github.com/kubeembed/apiserver/controllers/serviceaccounttoken"
	"github.com/kubeembed/apiserver/internal/controller"
	"github.com/kubeembed/apiserver/internal/version"
)

// newController builds each controller that has a loop (ServiceAccount's
// work is done by the core group's storage: providers.Config).
var newController = map[controllers.Name]func(controllers.Config) (controllers.Controller, error){
	controllers.GarbageCollector: func(c controllers.Config) (controllers.Controller, error) { return garbagecollector.New(c) },
	controllers.Namespace:        func(c controllers.Config) (controllers.Controller, error) { return namespace.New(c) },
	controllers.RootCACertPublisher: func(c controllers.Config) (controllers.Controller, error) {
		return rootcacert.New(c)
	},
	controllers.ServiceAccountToken: func(c controllers.Config) (controllers.Controller, error) {
		return serviceaccounttoken.New(c)
	},
	controllers.ResourceQuota: func(c controllers.Config) (controllers.Controller, error) { return resourcequota.New(c) },
	controllers.ClusterRoleAggregation: func(c controllers.Config) (controllers.Controller, error) {
		return clusterroleaggregation.New(c)
	},
}

// enabledControllers reads Options.Controllers as kube-controller-manager
// reads --controllers: "*" turns on every controller, "name" one, "-name"
// turns one off. Unknown names are errors.
func enabledControllers(list []controllers.Name) ([]controllers.Name, error) {
	var errs []error
	for _, n := range list {
		if n != "*" && !slices.Contains(controllers.All(), trimMinus(n)) {
			errs = append(errs, fmt.Errorf("options: Controllers: unknown controller %q (known: %v)", n, controllers.All()))
		}
	}
	var on []controllers.Name
	for _, n := range controllers.All() {
		switch {
		case slices.Contains(list, n):
			on = append(on, n)
		case slices.Contains(list, "-"+n):
		case slices.Contains(list, "*"):
			on = append(on, n)
		}
	}
	return on, errors.Join(errs...)
}

func trimMinus(n controllers.Name) controllers.Name {
	if len(n) > 0 && n[0] == '-' {
		return n[1:]
	}
	return n
}

// controllerSet is the server's running controllers and what WaitIdle asks.
type controllerSet struct {
	monitors *controller.Monitors
	running  []controllers.Controller
	wg       sync.WaitGroup
	// ready is closed when the server is ready (controllers.Config.Ready).
	ready chan struct{}
	// aggregation is the ClusterRole aggregation controller, if it runs:
	// a denied request waits for it (freshRBAC).
	aggregation controllers.Controller
}

// addControllers builds the enabled controllers and registers the hooks that
// start them.
func (s *Server) addControllers(tier *genericapiserver.GenericAPIServer, loopback *rest.Config, crds cache.SharedIndexInformer) error {
	loops := slices.DeleteFunc(slices.Clone(s.opts.controllers), func(n controllers.Name) bool { return newController[n] == nil })
	if len(loops) == 0 {
		return nil
	}
	cfg, err := s.controllerConfig(loopback)
	if err != nil {
		return err
	}
	if s.controllers.monitors, err = controller.NewMonitors(s.informers.metadata, cfg.Discovery, crds, s.writes); err != nil {
		return err
	}
	cfg.Monitors = s.controllers.monitors
	for _, name := range loops {
		c, err := newController[name](cfg)
		if err != nil {
			return fmt.Errorf("controller %s: %w", name, err)
		}
		s.controllers.running = append(s.controllers.running, c)
		if name == controllers.ClusterRoleAggregation {
			s.controllers.aggregation = c
		}
		if err := tier.AddPostStartHook("start-"+string(name), s.startController(c)); err != nil {
			return err
		}
	}
	return nil
}

// controllerConfig gives the controllers clients of their own, named as
// kube-controller-manager's (their writes' field manager is
// "kube-controller-manager", as on a cluster), and the server's informers.
func (s *Server) controllerConfig(loopback *rest.Config) (controllers.Config, error) {
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
		Client: client, Metadata: meta, Discovery: d, Informers: s.informers.kube, Revisions: s.writes,
		QueueMetrics: s.metrics.queues, RootCA: s.ca.CertPEM, LegacyTokens: s.tokens, Ready: s.controllers.ready,
	}, nil
}

// startController starts c until the server's informers stop.
func (s *Server) startController(c controllers.Controller) genericapiserver.PostStartHookFunc {
	return func(genericapiserver.PostStartHookContext) error {
		s.controllers.wg.Go(func() { c.Run(s.informers.ctx) })
		return nil
	}
}

// startMonitors starts discovering the resources and listing them for the
// controllers, once the server is ready, as kube-controller-manager starts
// once kube-apiserver is: a metadata informer per resource is ~25 ms of
// work on two cores (BENCHMARKS.md) that Start need not wait for; WaitIdle
// does.
func (s *Server) startMonitors() {
	close(s.controllers.ready)
	if m := s.controllers.monitors; m != nil {
		s.controllers.wg.Go(func() { m.Run(s.informers.ctx) })
	}
}

// WaitIdle returns once every controller of the server (Options.Controllers)
// has nothing left to do: it has seen every write made before the call and
// every write the controllers made in reaction since, and its queues are
// empty, with no item in a worker and none waiting to be retried after an
// error. So `Delete(namespace); WaitIdle(ctx)` returns after the namespace
// and its content are gone, and deleting an owner then WaitIdle after its
// dependents are collected, with no polling in the test.
//
// What it cannot wait for: controllers that are not the server's (a test's
// own manager), and work a controller put off on purpose because someone
// else must act first (a finalizer only the test removes keeps a namespace
// Terminating; WaitIdle returns with the namespace still there). It returns
// ctx's error, naming what was still busy, if ctx ends first. Without
// controllers it returns at once.
func (s *Server) WaitIdle(ctx context.Context) error {
	if !s.started.Load() {
		return errors.New("WaitIdle: the server is not started")
	}
	for {
		before, written := s.controllers.finished(), s.writes.Snapshot()
		if err := controller.Wait(ctx, func() error { return s.controllers.idle(written) }); err != nil {
			return fmt.Errorf("WaitIdle: %w", err)
		}
		if s.controllers.finished() == before {
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
