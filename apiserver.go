package apiserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionslisters "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubeembed/apiserver/faults"
	"github.com/kubeembed/apiserver/internal/certs"
	"github.com/kubeembed/apiserver/internal/controller"
	"github.com/kubeembed/apiserver/internal/globals"
	"github.com/kubeembed/apiserver/internal/inproc"
	"github.com/kubeembed/apiserver/internal/rbac"
	"github.com/kubeembed/apiserver/internal/satoken"
	"github.com/kubeembed/apiserver/internal/version"
	"github.com/kubeembed/apiserver/storage"
)

// AdminUser is the user name of the admin token's identity.
const AdminUser = "kubeembed-admin"

// Server is a Kubernetes API server running in this process. Create one with
// New, then Start it; Close releases it.
type Server struct {
	opts completedOptions
	log  *zap.Logger
	url  string
	ca   *certs.CA
	// frontProxy is the aggregator's identity to aggregated API servers.
	frontProxy *frontProxy
	// rbacAuthz is the RBAC authorizer, built with the chain.
	rbacAuthz *rbac.Authorizer
	// tokens issues and authenticates service account tokens.
	tokens *satoken.Issuer
	config *rest.Config

	faults   *faults.Injector
	recorder *faults.Recorder
	// stored is the storage backend as the tiers see it, noting each
	// resource's store for metrics.
	stored  *storedResources
	metrics *serverMetrics
	// afterRestore are the providers' repairs of state kept beside storage.
	afterRestore []func(context.Context) error
	// writes is the revision of the last write to each resource, for
	// WaitIdle; controllers are the server's control loops.
	writes      *controller.Writes
	controllers controllerSet

	listener  *trackingListener
	loopback  *inproc.Transport
	informers *informerSet
	chain     *chain
	crdLister apiextensionslisters.CustomResourceDefinitionLister

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
}

// New builds a server from opts: it takes the listener, loads CRD files and
// assembles the chain, but serves nothing until Start. Every invalid option
// is reported at once.
func New(opts Options) (_ *Server, err error) {
	c, err := opts.complete()
	if err != nil {
		return nil, err
	}
	s := &Server{opts: c, log: c.log, runDone: make(chan struct{}), faults: &faults.Injector{}, recorder: &faults.Recorder{},
		writes: &controller.Writes{}, controllers: controllerSet{ready: make(chan struct{})}}
	s.stored = newStoredResources(c.storage, s.writes)
	s.metrics = newServerMetrics(s.stored)
	defer func() {
		if err != nil {
			s.abort()
		}
	}()
	if !c.keepKlog {
		globals.InitKlog()
	}
	if err = s.loadKeys(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(c.host, strconv.Itoa(c.port)))
	if err != nil {
		return nil, fmt.Errorf("listen on %s port %d: %w", c.host, c.port, err)
	}
	s.listener = newTrackingListener(ln)
	s.url = "https://" + net.JoinHostPort(hostForURL(c.host), strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	s.config = &rest.Config{
		Host:            s.url,
		BearerToken:     c.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.ca.CertPEM},
		QPS:             -1, // no client-side throttling against a test server
	}
	if s.chain, err = s.buildChain(); err != nil {
		return nil, err
	}
	return s, nil
}

// abort undoes what a failed New began.
func (s *Server) abort() {
	s.frontProxy.remove()
	if s.informers != nil {
		s.informers.shutdown()
	}
	if s.loopback != nil {
		s.loopback.Close()
	}
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

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // never fails
	return hex.EncodeToString(b)
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
	runCtx, cancel := context.WithCancel(withLogger(context.Background(), s.log))
	s.cancel = cancel
	s.started.Store(true)
	prepared, err := s.chain.prepare()
	if err != nil {
		close(s.runDone)
		return fmt.Errorf("prepare server: %w", err)
	}
	// The loopback is in process, so informers sync before the listener is
	// up: see informerSet for why they start before the chain runs.
	s.informers.start()
	if err := s.informers.waitForSync(ctx); err != nil {
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
	if err := s.installCRDs(ctx); err != nil {
		return err
	}
	if err := s.installRBAC(ctx); err != nil {
		return err
	}
	s.startMonitors()
	// Start's own requests (readiness polls, CRDs) are not the clients'.
	s.recorder.Reset()
	s.log.Info("kube-apiserver ready", zap.String("url", s.url))
	return nil
}

// waitReady polls /readyz until it answers 200. Readiness is only visible
// over HTTP, so this polls, starting at 1 ms and backing off to 20 ms.
func (s *Server) waitReady(ctx context.Context) error {
	client, err := rest.HTTPClientFor(s.RESTConfig())
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
			body := make([]byte, 4096)
			n, _ := resp.Body.Read(body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = failedChecks(string(body[:n]))
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
// system:masters) that trusts the server's CA.
func (s *Server) RESTConfig() *rest.Config { return rest.CopyConfig(s.config) }

// CACert returns the PEM certificate of the CA that signed the server's
// certificate.
func (s *Server) CACert() []byte { return append([]byte(nil), s.ca.CertPEM...) }

// Kubeconfig returns a kubeconfig for the admin user, for kubectl and other
// clients.
func (s *Server) Kubeconfig() ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubeembed"] = &clientcmdapi.Cluster{Server: s.url, CertificateAuthorityData: s.ca.CertPEM}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: s.opts.token}
	cfg.Contexts["kubeembed"] = &clientcmdapi.Context{Cluster: "kubeembed", AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = "kubeembed"
	return clientcmd.Write(*cfg)
}

// Clientset returns a typed client for the built-in API groups.
func (s *Server) Clientset() (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(s.RESTConfig())
}

// DynamicClient returns a dynamic client.
func (s *Server) DynamicClient() (dynamic.Interface, error) {
	return dynamic.NewForConfig(s.RESTConfig())
}

// DiscoveryClient returns a discovery client.
func (s *Server) DiscoveryClient() (discovery.DiscoveryInterface, error) {
	return discovery.NewDiscoveryClientForConfig(s.RESTConfig())
}

// APIExtensionsClientset returns a client for CustomResourceDefinitions.
func (s *Server) APIExtensionsClientset() (apiextensionsclient.Interface, error) {
	return apiextensionsclient.NewForConfig(s.RESTConfig())
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
	if err := sn.Restore(snap); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	for _, f := range s.afterRestore {
		if err := f(ctx); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
	}
	return nil
}

// InformerFactory returns the shared typed informer factory the server's
// tiers and admission use. Start starts the informers requested before it;
// start one requested later with the factory's Start (informers stop at
// Close, whatever channel Start is given).
func (s *Server) InformerFactory() informers.SharedInformerFactory { return s.informers.kube }

// DynamicInformerFactory returns the server's shared dynamic informer
// factory. Start starts the informers requested before it; start one
// requested later with the factory's Start.
func (s *Server) DynamicInformerFactory() dynamicinformer.DynamicSharedInformerFactory {
	return s.informers.dynamic
}

// closeTimeout bounds each step of Close that waits on requests or
// goroutines; what is still stuck then is logged, not waited for.
const closeTimeout = 5 * time.Second

// Close shuts the server down. In order: it stops every informer and the
// admission policy plugins' controllers; cancels the server's context, which
// stops post-start hooks and controllers and starts the graceful shutdown;
// waits for in-flight requests other than watches to finish (at most 5 s,
// then it logs the requests still running); closes every client
// connection, which ends watches; waits for the server loop to return (at
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
	if !s.started.Load() {
		s.abort()
		return nil
	}
	// The controllers and informers stop; what they asked of the server
	// finishes (not cut off: see inproc) before the server stops.
	s.loopback.Drain()
	s.informers.cancel()
	s.cancel()
	if !s.settle(s.listener.waitIdle) {
		s.log.Warn("requests still running at close; closing their connections", zap.Strings("requests", s.listener.inFlight()))
	}
	s.listener.closeConns()
	var err error
	if !s.settle(s.waitLoop) {
		s.log.Error("server loop did not stop", zap.Duration("waited", drainGrace+closeTimeout))
	} else if s.runErr != nil && !errors.Is(s.runErr, context.Canceled) {
		err = s.runErr
	}
	s.informers.shutdown()
	s.controllers.wg.Wait() // they end with the informers' context
	// The post-start hooks' controllers (API Priority and Fairness' among
	// them) end with the loop, unwaited, and may still be asking: no more,
	// and what they asked finishes before the storage closes.
	s.loopback.Close()
	if !s.listener.waitIdle(closeTimeout) || !s.listener.waitWatches(closeTimeout) {
		s.log.Warn("requests still running after the server loop ended", zap.Strings("requests", s.listener.inFlight()))
	}
	if s.opts.ownsStorage {
		err = errors.Join(err, s.opts.storage.Close())
	}
	if f := s.opts.audit.file; f != nil {
		err = errors.Join(err, f.Close()) // after the loop, which shut the backend down
	}
	s.frontProxy.remove() // after the loop, whose hook watched the files
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
	s.loopback.Abandon()
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
