package apiserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/controllers/kubelet"
	"github.com/kubeembed/apiserver/faults"
	"github.com/kubeembed/apiserver/internal/controlplane"
	"github.com/kubeembed/apiserver/internal/globals"
	"github.com/kubeembed/apiserver/internal/inproc"
	"github.com/kubeembed/apiserver/internal/listener"
	"github.com/kubeembed/apiserver/internal/version"
	"github.com/kubeembed/apiserver/storage"
	"github.com/kubeembed/apiserver/timing"
)

// AdminUser is the user name of the admin token's identity.
const AdminUser = controlplane.AdminUser

// Server is a Kubernetes API server running in this process. Create one with
// New, then Start it; Close releases it.
type Server struct {
	opts   completedOptions
	log    *zap.Logger
	url    string
	keys   controlplane.Keys
	config *rest.Config

	faults   *faults.Injector
	recorder *faults.Recorder
	listener *listener.Tracking
	// cp is the chain and what runs beside it (informers, controllers, the
	// loopback of the server's own clients).
	cp *controlplane.ControlPlane
	// clients serves the in-process clients (InProcess) once Start has
	// the chain running; Close cuts them off as it closes the listener's
	// connections, and Reset replaces it, cutting off the clients made
	// before. Not the loopback's transport: the server's own requests are
	// drained at Close, the clients' are not (as over the network).
	clients atomic.Pointer[inproc.Transport]

	startOnce sync.Once
	startErr  error
	started   atomic.Bool
	cancel    context.CancelFunc
	// runDone is closed when the chain stops running; runErr is written
	// before, and read only after it is closed.
	runDone chan struct{}
	runErr  error

	closeOnce sync.Once
	closeErr  error
	closed    atomic.Bool
}

// New builds a server from opts: it takes the listener, loads CRD files and
// assembles the chain, but serves nothing until Start. Every invalid option
// is reported at once.
func New(opts Options) (_ *Server, err error) {
	c, err := opts.complete()
	if err != nil {
		return nil, err
	}
	s := &Server{opts: c, log: c.log, runDone: make(chan struct{}), faults: &faults.Injector{}, recorder: &faults.Recorder{}}
	s.clients.Store(controlplane.NewTransport())
	defer func() {
		if err != nil {
			s.abort()
		}
	}()
	if !c.keepKlog {
		globals.InitKlog()
	}
	if s.keys, err = controlplane.LoadKeys(c.certDir); err != nil {
		return nil, err
	}
	if c.token == "" {
		c.token = s.keys.AdminToken
		s.opts.token = c.token
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(c.host, strconv.Itoa(c.port)))
	if err != nil {
		return nil, fmt.Errorf("listen on %s port %d: %w", c.host, c.port, err)
	}
	s.listener = listener.New(ln)
	s.url = "https://" + net.JoinHostPort(hostForURL(c.host), strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	s.config = &rest.Config{
		Host:            s.url,
		BearerToken:     c.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.keys.CA.CertPEM},
		QPS:             -1, // no client-side throttling against a test server
	}
	s.cp, err = controlplane.New(s.controlPlaneConfig())
	return s, err
}

// controlPlaneConfig is what the chain is built from.
func (s *Server) controlPlaneConfig() controlplane.Config {
	c := s.opts
	return controlplane.Config{
		Log: c.log, Listener: s.listener, Track: s.listener.Track, URL: s.url, Host: c.host, ServiceClusterIPRange: c.serviceRange,
		Keys: s.keys, AdminToken: c.token, Storage: c.storage,
		Providers: c.providers, OpenAPIKey: c.openAPIKey, Controllers: c.controllers, Nodes: c.nodes, Clock: c.clock,
		PriorityAndFairness: c.priorityAndFairness, ServiceAccountAdmission: c.serviceAccountAdmission,
		Audit: c.audit.Audit, Faults: s.faults, Recorder: s.recorder, Timing: c.timing,
	}
}

// abort undoes what a failed New began.
func (s *Server) abort() {
	s.keys.Remove()
	if s.listener != nil {
		_ = s.listener.Close()
	}
	if s.opts.ownsStorage {
		_ = s.opts.storage.Close()
	}
	if f := s.opts.audit.file; f != nil {
		_ = f.Close()
	}
}

// failedChecks keeps the failing lines of a verbose /readyz answer.
func failedChecks(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "[-]") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func hostForURL(bind string) string {
	if ip := net.ParseIP(bind); ip != nil && ip.IsUnspecified() {
		return "127.0.0.1"
	}
	return bind
}

// Start serves the chain and returns when /readyz reports ready: every
// post-start hook has run, informers have synced, the default namespaces and
// the CRDs of Options exist and are served. ctx bounds only the wait; the
// server runs until Close. Start may be called once; later calls return the
// first result.
func (s *Server) Start(ctx context.Context) error {
	s.startOnce.Do(func() { s.startErr = s.start(ctx) })
	return s.startErr
}

func (s *Server) start(ctx context.Context) error {
	runCtx, cancel := context.WithCancel(controlplane.WithLogger(context.Background(), s.log))
	s.cancel = cancel
	s.started.Store(true)
	if t := s.opts.timing; t.Enabled() {
		// Logged first, so that a test failing in Start still shows the
		// seed to replay.
		s.log.Info("storage timing", zap.Stringer("profile", t), zap.Int64("seed", t.Seed))
	}
	prepared, err := onOwnGoroutine(s.cp.Prepare)
	if err != nil {
		close(s.runDone)
		return fmt.Errorf("prepare server: %w", err)
	}
	if err := s.cp.StartInformers(ctx); err != nil {
		close(s.runDone)
		return fmt.Errorf("sync informers: %w", err)
	}
	go func() {
		defer close(s.runDone)
		s.runErr = prepared.Run(runCtx)
	}()
	if err := s.waitReady(ctx); err != nil {
		return err
	}
	s.clients.Load().SetHandler(s.cp.Handler())
	if err := s.cp.Install(ctx, s.RESTConfig(), s.opts.crds, s.opts.rbac); err != nil {
		return err
	}
	s.cp.MarkReady()
	if err := s.cp.WaitStarted(ctx); err != nil {
		return err
	}
	// Start's own requests (readiness polls, CRDs) are not the clients'.
	s.recorder.Reset()
	s.log.Info("kube-apiserver ready", zap.String("url", s.url))
	return nil
}

// waitReady polls /readyz until it answers 200. Readiness is only visible
// over HTTP, so this polls, starting at 1 ms and backing off to 20 ms.
func (s *Server) waitReady(ctx context.Context) error {
	cfg := s.RESTConfig()
	// A Proxy function (direct, as client-go's default is for a loopback
	// address) keeps client-go from caching this client's transport in its
	// process-wide TLS cache, keyed by this server's own CA and
	// certificate: one entry per server started, never evicted (the soak
	// of reliability/ found the heap growing by it).
	cfg.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()
	delay := time.Millisecond
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/readyz?verbose", nil)
		resp, err := client.Do(req)
		if err == nil {
			// The whole answer is read: a body closed early resets the
			// stream while the handler may still be writing (a verbose
			// listing of failing checks is over HTTP/2's 4 KiB first
			// chunk), and the server logs the request as aborted
			// (reliability's soak, which wants no log, saw it).
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = failedChecks(string(body))
		} else {
			last = err.Error()
		}
		select {
		case <-s.runDone:
			return fmt.Errorf("server stopped before it was ready: %v", s.runErr)
		case <-ctx.Done():
			return fmt.Errorf("wait for /readyz: %w; last answer: %s", ctx.Err(), last)
		case <-time.After(delay):
		}
		delay = min(delay*2, 20*time.Millisecond)
	}
}

// URL returns the server's base URL, such as https://127.0.0.1:41234.
func (s *Server) URL() string { return s.url }

// RESTConfig returns a new client configuration for the admin user (in
// system:masters) that trusts the server's CA. Its requests go over the
// network (TLS on the server's port): for kubectl, other processes, and
// exec, attach and port-forward. Clients in this process are faster with
// InProcessRESTConfig, and see no other difference.
func (s *Server) RESTConfig() *rest.Config { return rest.CopyConfig(s.config) }

// Timing is the storage timing the server runs with (Options.Timing), its
// seed picked if Options.Timing had none: pass it as Options.Timing to
// replay a run. The zero Profile when the server has none.
func (s *Server) Timing() timing.Profile { return s.opts.timing }

// CACert returns the PEM certificate of the CA that signed the server's
// certificate.
func (s *Server) CACert() []byte { return append([]byte(nil), s.keys.CA.CertPEM...) }

// Kubeconfig returns a kubeconfig for the admin user, for kubectl and other
// clients.
func (s *Server) Kubeconfig() ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubeembed"] = &clientcmdapi.Cluster{Server: s.url, CertificateAuthorityData: s.keys.CA.CertPEM}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: s.opts.token}
	cfg.Contexts["kubeembed"] = &clientcmdapi.Context{Cluster: "kubeembed", AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = "kubeembed"
	return clientcmd.Write(*cfg)
}

// Clientset returns a typed client for the built-in API groups, as the
// admin user, served in process (InProcessRESTConfig).
func (s *Server) Clientset() (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(s.InProcessRESTConfig())
}

// DynamicClient returns a dynamic client, as the admin user, served in
// process (InProcessRESTConfig).
func (s *Server) DynamicClient() (dynamic.Interface, error) {
	return dynamic.NewForConfig(s.InProcessRESTConfig())
}

// DiscoveryClient returns a discovery client, as the admin user, served in
// process (InProcessRESTConfig).
func (s *Server) DiscoveryClient() (discovery.DiscoveryInterface, error) {
	return discovery.NewDiscoveryClientForConfig(s.InProcessRESTConfig())
}

// APIExtensionsClientset returns a client for CustomResourceDefinitions, as
// the admin user, served in process (InProcessRESTConfig).
func (s *Server) APIExtensionsClientset() (apiextensionsclient.Interface, error) {
	return apiextensionsclient.NewForConfig(s.InProcessRESTConfig())
}

// Kubelet returns the simulated kubelet of the server's simulated nodes
// (Options.Nodes): add, remove, stop or make nodes NotReady, and say how
// containers end and whether they are ready. Nil when Options.Controllers
// turns controllers.Kubelet off (ProfileEnvtest does).
func (s *Server) Kubelet() *kubelet.Kubelet {
	k, _ := s.cp.Controller(controllers.Kubelet).(*kubelet.Kubelet)
	return k
}

// Faults returns the server's fault injector: its rules apply to the
// requests clients send after authentication (not to the server's own).
// In tests, apiservertest.InjectFault removes a rule when the test ends.
func (s *Server) Faults() *faults.Injector { return s.faults }

// Recorder returns the server's request recorder: every request clients
// sent since Start returned (not the server's own), with its answer.
func (s *Server) Recorder() *faults.Recorder { return s.recorder }

// Snapshot returns the state of every object the server stores, CRDs and
// custom resources included, at the current revision: what Restore puts
// back. The storage backend must be able to take snapshots (storage/memory,
// the default, can).
func (s *Server) Snapshot() (storage.Snapshot, error) {
	sn, ok := s.opts.storage.(storage.Snapshotter)
	if !ok {
		return nil, fmt.Errorf("snapshot: storage backend %T cannot take snapshots", s.opts.storage)
	}
	return sn.Snapshot(), nil
}

// Restore puts back the objects of snap, a snapshot of this server's
// storage: what changed since is written back at new resourceVersions (they
// only grow), what was created since is deleted. Watches that missed more
// than the last change end with 410 Gone, so clients (informers included)
// list again; a Ginkgo suite can seed a server once and Restore before each
// spec instead of starting a server per spec.
func (s *Server) Restore(ctx context.Context, snap storage.Snapshot) error {
	sn, ok := s.opts.storage.(storage.Snapshotter)
	if !ok {
		return fmt.Errorf("restore: storage backend %T cannot restore snapshots", s.opts.storage)
	}
	// What the restore wrote is noted as the server's writes, so that what
	// reads its informers with read-your-writes (admission, RBAC) asks the
	// server until the informers have listed again.
	var changed map[string]int64
	var err error
	if r, ok := sn.(storage.RestoreReporter); ok {
		changed, err = r.RestoreReport(snap, false)
	} else {
		err = sn.Restore(snap)
	}
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := s.cp.Restored(ctx, changed); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	return nil
}

// InformerFactory returns the shared typed informer factory the server's
// tiers and admission use. Start starts the informers requested before it;
// start one requested later with the factory's Start (informers stop at
// Close, whatever channel Start is given).
func (s *Server) InformerFactory() informers.SharedInformerFactory { return s.cp.KubeInformers() }

// DynamicInformerFactory returns the server's shared dynamic informer
// factory. Start starts the informers requested before it; start one
// requested later with the factory's Start.
func (s *Server) DynamicInformerFactory() dynamicinformer.DynamicSharedInformerFactory {
	return s.cp.DynamicInformers()
}

// WaitIdle returns once every controller of the server (Options.Controllers)
// has nothing left to do: it has seen every write made before the call and
// every write the controllers made in reaction since, and its queues are
// empty, with no item in a worker and none waiting to be retried after an
// error, and the events it recorded are written (kube-scheduler's
// events.k8s.io ones too); and API Priority and Fairness has written the
// Dangling condition of every FlowSchema as its priority levels stand. So
// `Delete(namespace); WaitIdle(ctx)` returns after the namespace
// and its content are gone, and deleting an owner then WaitIdle after its
// dependents are collected, with no polling in the test.
//
// What it cannot wait for: controllers that are not the server's (a test's
// own manager), and work a controller put off on purpose because someone
// else must act first (a finalizer only the test removes keeps a namespace
// Terminating; WaitIdle returns with the namespace still there), and a
// CRD that stays established but missing from discovery (its group
// version taken by an APIService or a built-in group): WaitIdle waits 30 s
// for it to be discovered, then returns, the garbage collector and quota
// not seeing its objects (nor would kube-controller-manager's). It returns
// ctx's error, naming what was still busy, if ctx ends first. Without
// controllers it waits only for priority and fairness, which is at once
// unless a FlowSchema or priority level was just written.
func (s *Server) WaitIdle(ctx context.Context) error {
	if !s.started.Load() {
		return errors.New("WaitIdle: the server is not started")
	}
	if err := s.cp.WaitIdle(ctx); err != nil {
		return fmt.Errorf("WaitIdle: %w", err)
	}
	return nil
}

// closeTimeout bounds each step of Close that waits on requests or
// goroutines; what is still stuck then is logged, not waited for.
const closeTimeout = 5 * time.Second

// Close shuts the server down. In order: it stops every informer and the
// admission policy plugins' controllers; cancels the server's context, which
// stops post-start hooks and controllers and starts the graceful shutdown;
// waits for in-flight requests other than watches to finish (at most 5 s,
// then it logs the requests still running); closes every client
// connection and cuts off the in-process clients' requests, which ends
// watches; waits for the server loop to return (at
// most 5 s); waits for the informers' goroutines; and closes the storage
// backend it owns, waiting for its watches.
//
// The libraries' controllers stop on the cancelled context on their own and
// are gone within microseconds of Close returning; a goleak test checks that
// nothing a server started outlives it. Close is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Server) close() error {
	s.closed.Store(true)
	// The in-process clients' new requests fail from now on, as network
	// clients' connections are refused once the server shuts down.
	s.clients.Load().Close()
	if !s.started.Load() {
		s.cp.Shutdown()
		s.abort()
		return nil
	}
	// The controllers and informers stop; what they asked of the server
	// finishes (not cut off: see inproc) before the server stops.
	s.cp.Loopback().Drain()
	s.cp.StopInformers()
	s.cancel()
	if !s.settle(s.listener.WaitIdle) {
		s.log.Warn("requests still running at close; closing their connections", zap.Strings("requests", s.listener.InFlight()))
	}
	s.listener.CloseConns()
	s.clients.Load().Cut()
	var err error
	if !s.settle(s.waitLoop) {
		s.log.Error("server loop did not stop", zap.Duration("waited", drainGrace+closeTimeout))
	} else if s.runErr != nil && !errors.Is(s.runErr, context.Canceled) {
		err = s.runErr
	}
	// The post-start hooks' controllers (API Priority and Fairness' among
	// them) end with the loop, unwaited, and may still be asking: no more,
	// and what they asked finishes before the storage closes.
	s.cp.Shutdown()
	if !s.listener.WaitIdle(closeTimeout) || !s.listener.WaitWatches(closeTimeout) {
		s.log.Warn("requests still running after the server loop ended", zap.Strings("requests", s.listener.InFlight()))
	}
	if s.opts.ownsStorage {
		err = errors.Join(err, s.opts.storage.Close())
	}
	if f := s.opts.audit.file; f != nil {
		err = errors.Join(err, f.Close()) // after the loop, which shut the backend down
	}
	s.keys.Remove() // after the loop, whose hook watched the files
	return err
}

// drainGrace is how long Close lets the server's own clients' requests
// run on (see inproc.Transport.Drain) before it cuts them off.
const drainGrace = time.Second

// settle waits with wait for drainGrace; if that is not enough, it cuts off
// the requests the drain left running (a controller's request that blocks
// would hold Close) and waits up to closeTimeout more.
func (s *Server) settle(wait func(time.Duration) bool) bool {
	if wait(drainGrace) {
		return true
	}
	s.cp.Loopback().Abandon()
	return wait(closeTimeout)
}

// waitLoop waits up to d for the server loop to end (it waits for every
// request in flight).
func (s *Server) waitLoop(d time.Duration) bool {
	select {
	case <-s.runDone:
		return true
	case <-time.After(d):
		return false
	}
}

// KubernetesVersion is the Kubernetes release whose API the server serves
// and reports at /version, such as "1.37.2": the release of the
// k8s.io/apiserver and sibling modules it is built with.
func KubernetesVersion() string { return version.Kubernetes() }

// onOwnGoroutine returns f() called on a goroutine of its own: the
// libraries' path multiplexer keeps the stack trace of every path's
// registration (to report a duplicate), and the caller's stack (a test
// framework's, tens of frames) would be in each of those hundreds of
// traces.
func onOwnGoroutine[T any](f func() (T, error)) (T, error) {
	var v T
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		v, err = f()
	}()
	<-done
	return v, err
}
