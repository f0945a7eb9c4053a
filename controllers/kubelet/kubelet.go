// Package kubelet is the simulated kubelet of a kubeembed server's
// simulated nodes, kwok-style: no container runtime runs anything, but the
// API sees what a kubelet v1.37 writes. For each simulated node it
// registers the Node (labels, capacity, addresses, nodeInfo, the four
// conditions as the kubelet's status setters make them) and keeps its
// Lease in kube-node-lease; for each pod bound to such a node it writes the
// status a kubelet reports as the pod's containers are created, start, run,
// exit and restart: phases, the five conditions, container statuses with
// IDs and image IDs, pod and host IPs, and the kubelet's events.
//
// A node is simulated when the server registered it (controllers.Config
// Nodes, or AddNode) or when its Node object carries
// controllers.SimulatedAnnotation. What happens to containers is the
// test's to decide, through the API of this package (Exit, Complete,
// SetReady, AddRule): by default init containers complete at once and
// other containers run until the pod is deleted, and probes pass once
// their initialDelaySeconds are over.
//
// It also serves the kubelet's API (server.go) for pods/log, exec, attach,
// port-forward and pods/proxy, reached by the server through an in-process
// cluster network (DialContext): logs are what the test wrote (SetLogs,
// AppendLog), exec and attach run the test's handlers (HandleExec,
// HandleAttach), a pod's ports are the test's listeners (HandlePort,
// HandleProxy).
//
// It is a client of the API only (its own clients, user agent
// kubelet/v1.37.2, so its writes' field manager is "kubelet"), so it runs
// against any API server. Time (restart back-off, probe delays, heartbeats)
// is the controllers.Config clock.
package kubelet

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
	"github.com/kubeembed/apiserver/internal/version"
)

// userAgent is the simulated kubelet's: its writes' field manager is
// "kubelet", as a kubelet's are.
func userAgent() string {
	return "kubelet/v" + version.Kubernetes() + " (linux/amd64) kubernetes/kubeembed"
}

// Kubelet runs the simulated nodes of a server.
type Kubelet struct {
	controller.Parts
	client kubernetes.Interface
	clock  clock.WithTickerAndDelayedExecution
	nodes  corev1listers.NodeLister
	pods   corev1listers.PodLister
	// nodeQueue syncs nodes by name, podQueue pods by namespace/name.
	nodeQueue, podQueue *controller.Queue
	initial             []controllers.Node
	// registered are the initial nodes as registered, by name, for Reset.
	firsts map[string]node

	mu sync.Mutex
	// simulated are the nodes this kubelet runs, by name.
	simulated map[string]*node
	// running are the pods' simulated runtimes, by UID; keys their UIDs by
	// namespace/name; timers the pending requeues by namespace/name.
	running map[types.UID]*podRuntime
	keys    map[string]types.UID
	timers  map[string]clock.Timer
	// outcomes are what the test decided for containers.
	outcomes outcomes
	// config reads the ConfigMaps and Secrets pods refer to.
	config configSource
	// registered is closed once the initial nodes are registered.
	registered chan struct{}
	// ready is closed once the server is ready: its kube-node-lease
	// namespace exists (controllers.Config.Ready; nil: it does).
	ready <-chan struct{}
	// nextBeat is the heartbeat's timer; reported when the nodes' status
	// was last reported.
	nextBeat clock.Timer
	reported time.Time
	// streams are the containers' logs and the test's handlers; server
	// is the nodes' kubelet server (logs, exec, attach, port-forward)
	// that serves them.
	streams *streams
	server  *http.Server
	// hooks is the context of the test's handlers that run lifecycle
	// hooks (hooks.go), cancelled as Run returns.
	hooks struct {
		ctx    context.Context
		cancel context.CancelFunc
	}
}

// New returns the simulated kubelet of cfg's server, which registers
// cfg.Nodes when it runs.
func New(cfg controllers.Config) (*Kubelet, error) {
	client, err := newClient(cfg.RESTConfig)
	if err != nil {
		return nil, err
	}
	k := &Kubelet{
		client: client, clock: cfg.Clock, initial: cfg.Nodes, ready: cfg.Ready,
		nodes: cfg.Informers.Core().V1().Nodes().Lister(), pods: cfg.Informers.Core().V1().Pods().Lister(),
		nodeQueue: controller.NewQueue("kubelet_node", cfg.QueueMetrics), podQueue: controller.NewQueue("kubelet_pod", cfg.QueueMetrics),
		simulated: map[string]*node{}, running: map[types.UID]*podRuntime{}, keys: map[string]types.UID{},
		timers: map[string]clock.Timer{}, registered: make(chan struct{}), streams: newStreams(),
	}
	k.server = k.newServer()
	k.hooks.ctx, k.hooks.cancel = context.WithCancel(context.Background())
	if k.clock == nil {
		k.clock = clock.RealClock{}
	}
	k.Name, k.Observer, k.Queues = string(controllers.Kubelet), controller.NewObserver(cfg.Revisions), []*controller.Queue{k.nodeQueue, k.podQueue}
	k.Events = controller.NewEvents(k.client)
	if err := k.watch(cfg); err != nil {
		return nil, err
	}
	if _, err := cfg.Informers.Core().V1().Pods().Informer().AddEventHandler(k.streams.podEvents()); err != nil {
		return nil, fmt.Errorf("kubelet: follow pods for log streams: %w", err)
	}
	return k, nil
}

// newClient is a client of cfg named as a kubelet.
func newClient(cfg *rest.Config) (kubernetes.Interface, error) {
	if cfg == nil {
		return nil, fmt.Errorf("kubelet: controllers.Config.RESTConfig is required")
	}
	cc := rest.CopyConfig(cfg)
	cc.UserAgent = userAgent()
	return kubernetes.NewForConfig(cc)
}

// watch queues the nodes and pods the kubelet may have to act on.
func (k *Kubelet) watch(cfg controllers.Config) error {
	node := func(obj any) {
		if n, ok := deleted(obj).(*corev1.Node); ok {
			k.nodeQueue.Add(n.Name)
		}
	}
	if err := k.Observer.Watch(corev1.Resource("nodes"), cfg.Informers.Core().V1().Nodes().Informer(),
		cache.ResourceEventHandlerFuncs{AddFunc: node, UpdateFunc: func(_, o any) { node(o) }, DeleteFunc: node}); err != nil {
		return err
	}
	// The ConfigMaps and Secrets pods refer to are read when the kubelet
	// syncs a pod (configrefs.go), which their changes do not trigger;
	// they are watched so that WaitIdle covers what the kubelet sees.
	cms, secrets := cfg.Informers.Core().V1().ConfigMaps(), cfg.Informers.Core().V1().Secrets()
	k.config = configSource{configMaps: cms.Lister(), secrets: secrets.Lister(), client: k.client,
		synced: func() bool { return cms.Informer().HasSynced() && secrets.Informer().HasSynced() }}
	for gr, inf := range map[string]cache.SharedIndexInformer{"configmaps": cms.Informer(), "secrets": secrets.Informer()} {
		if err := k.Observer.Watch(corev1.Resource(gr), inf, cache.ResourceEventHandlerFuncs{}); err != nil {
			return err
		}
	}
	pod := func(obj any) {
		if p, ok := deleted(obj).(*corev1.Pod); ok && p.Spec.NodeName != "" {
			k.podQueue.Add(p.Namespace + "/" + p.Name)
		}
	}
	return k.Observer.Watch(corev1.Resource("pods"), cfg.Informers.Core().V1().Pods().Informer(),
		cache.ResourceEventHandlerFuncs{AddFunc: pod, UpdateFunc: func(_, o any) { pod(o) }, DeleteFunc: pod})
}

func deleted(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

// Run registers the initial nodes, then keeps nodes and runs pods until ctx
// ends.
func (k *Kubelet) Run(ctx context.Context) {
	defer k.ShutDown()
	defer k.stopTimers()
	defer k.hooks.cancel()
	defer k.Events.Start()()
	go k.registerInitial(ctx)
	k.mu.Lock()
	k.reported = k.clock.Now()
	k.nextBeat = k.clock.AfterFunc(leaseRenewInterval, k.beat)
	k.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { k.nodeQueue.Run(ctx, 2, k.syncNode) })
	wg.Go(func() { k.podQueue.Run(ctx, 4, k.syncPod) })
	wg.Wait()
}

// WaitStarted waits until the initial nodes are registered and Ready: the
// server's Start returns with its nodes there.
func (k *Kubelet) WaitStarted(ctx context.Context) error {
	select {
	case <-k.registered:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("kubelet: register nodes: %w", ctx.Err())
	}
}

// recorder records events as the kubelet of nodeName.
func (k *Kubelet) recorder(nodeName string) record.EventRecorder {
	return k.Events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: nodeName})
}
