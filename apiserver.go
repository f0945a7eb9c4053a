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

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionslisters "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubeembed/apiserver/internal/certs"
	"github.com/kubeembed/apiserver/internal/inproc"
	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/storage/memory"
)

// AdminUser is the user name of the admin token's identity.
const AdminUser = "kubeembed-admin"

// Storage is a storage backend: it creates the storage of every resource of
// a server. *memory.Backend is one.
type Storage interface {
	Decorator() generic.StorageDecorator
}

// Options configures a Server. The zero value gives a server on a random
// loopback port with in-memory storage and the built-in API groups. New
// copies Options and never writes to it.
type Options struct {
	// Logger receives the server's logs, and those of the Kubernetes
	// libraries that log through a context. Default: no logging.
	Logger *zap.Logger

	// BindAddress is the IP address to listen on. Default "127.0.0.1".
	BindAddress string
	// Port is the TCP port to listen on. Default 0: a free port chosen by the
	// kernel, so that servers never race for ports.
	Port int

	// Storage is the storage backend. Default: a new memory.Backend owned by
	// the server and closed by Close. A Storage passed here is not closed.
	Storage Storage

	// Providers are API groups served in addition to the built-in ones. A
	// provider for a group that is already served is an error.
	Providers []providers.Provider

	// CRDs are installed, Established and served before Start returns.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// CRDPaths are files or directories of YAML or JSON CRDs (multi-document,
	// as controller-gen writes them) installed like CRDs.
	CRDPaths []string

	// AdminToken is the bearer token of an admin in system:masters. Default:
	// a random token.
	AdminToken string
}

// Server is a Kubernetes API server running in this process. Create one with
// New, then Start it; Close releases it.
type Server struct {
	opts   Options
	log    *zap.Logger
	url    string
	ca     *certs.CA
	token  string
	crds   []*apiextensionsv1.CustomResourceDefinition
	config *rest.Config

	listener *trackingListener
	loopback *inproc.Transport
	backend  *memory.Backend // owned backend, nil when Options.Storage was given
	storage  Storage

	chain     *chain
	crdLister apiextensionslisters.CustomResourceDefinitionLister

	kubeInformers informers.SharedInformerFactory
	dynInformers  dynamicinformer.DynamicSharedInformerFactory

	startOnce sync.Once
	startErr  error
	started   atomic.Bool
	cancel    context.CancelFunc
	runDone   chan struct{}
	// admissionStop stops the admission policy plugins' controllers, which
	// start when the server is built.
	admissionStop chan struct{}
	runErr        error

	closeOnce sync.Once
	closeErr  error
}

// New builds a server from opts: it takes the listener, loads CRD files and
// assembles the chain, but serves nothing until Start. Every invalid option
// is reported at once.
func New(opts Options) (_ *Server, err error) {
	s := &Server{opts: opts, log: opts.Logger, admissionStop: make(chan struct{})}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	crds, verr := opts.validate()
	if verr != nil {
		return nil, verr
	}
	s.crds = crds
	s.token = opts.AdminToken
	if s.token == "" {
		s.token = randomToken()
	}
	if s.ca, err = certs.ProcessCA(); err != nil {
		return nil, err
	}

	host := opts.BindAddress
	if host == "" {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(opts.Port)))
	if err != nil {
		return nil, fmt.Errorf("listen on %s port %d: %w", host, opts.Port, err)
	}
	s.listener = newTrackingListener(ln)
	defer func() {
		if err != nil {
			_ = s.listener.Close()
			if s.backend != nil {
				_ = s.backend.Close()
			}
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	s.url = "https://" + net.JoinHostPort(hostForURL(host), strconv.Itoa(port))
	s.config = &rest.Config{
		Host:            s.url,
		BearerToken:     s.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.ca.CertPEM},
		QPS:             -1, // no client-side throttling against a test server
	}

	s.storage = opts.Storage
	if s.storage == nil {
		s.backend = memory.NewBackend(memory.Options{})
		s.storage = s.backend
	}
	if s.chain, err = s.buildChain(host, port); err != nil {
		return nil, err
	}
	return s, nil
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

func (o Options) validate() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var errs []error
	if o.Port < 0 || o.Port > 65535 {
		errs = append(errs, fmt.Errorf("options: Port %d is not a TCP port (0-65535)", o.Port))
	}
	if o.BindAddress != "" && net.ParseIP(o.BindAddress) == nil {
		errs = append(errs, fmt.Errorf("options: BindAddress %q is not an IP address", o.BindAddress))
	}
	seen := map[string]bool{}
	for _, p := range builtinProviders() {
		seen[p.GroupName()] = true
	}
	for i, p := range o.Providers {
		if p == nil {
			errs = append(errs, fmt.Errorf("options: Providers[%d] is nil", i))
			continue
		}
		if seen[p.GroupName()] {
			errs = append(errs, fmt.Errorf("options: Providers[%d] serves group %q, which is already served", i, p.GroupName()))
		}
		seen[p.GroupName()] = true
	}
	crds, err := loadCRDs(o.CRDs, o.CRDPaths)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return crds, nil
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
	runCtx, cancel := context.WithCancel(context.Background())
	runCtx = withLogger(runCtx, s.log)
	s.cancel = cancel
	s.runDone = make(chan struct{})
	s.started.Store(true)
	prepared, err := s.chain.prepare()
	if err != nil {
		close(s.runDone)
		return fmt.Errorf("prepare server: %w", err)
	}
	// Sync the informers the post-start hooks wait for before running them:
	// the hooks poll every 100 ms, so an informer that syncs a moment after
	// the first poll costs 100 ms. The loopback is in process, so this works
	// before the listener is up.
	if err := waitSynced(ctx, s.chain.informers(runCtx)...); err != nil {
		cancel()
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
	s.log.Info("kube-apiserver ready", zap.String("url", s.url))
	return nil
}

// waitSynced waits until every informer has synced, checking every
// millisecond (client-go's WaitForCacheSync checks every 100 ms).
func waitSynced(ctx context.Context, synced ...cache.InformerSynced) error {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		all := true
		for _, ok := range synced {
			all = all && ok()
		}
		if all {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
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
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: s.token}
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

// InformerFactory returns the shared typed informer factory the server's
// tiers use; the start-informers post-start hook starts it.
func (s *Server) InformerFactory() informers.SharedInformerFactory { return s.kubeInformers }

// DynamicInformerFactory returns the shared dynamic informer factory, started
// by the start-informers post-start hook; informers requested after Start
// must be started by calling its Start.
func (s *Server) DynamicInformerFactory() dynamicinformer.DynamicSharedInformerFactory {
	return s.dynInformers
}

// closeTimeout bounds each step of Close that waits on requests or
// goroutines; what is still stuck then is logged, not waited for.
const closeTimeout = 5 * time.Second

// Close shuts the server down. In order: it stops the admission policy
// plugins' controllers; cancels the server's context,
// which stops post-start hooks, controllers and informers and starts the
// graceful shutdown; waits for in-flight requests other than watches to
// finish (at most 5 s, then it logs the requests still running); closes
// every client connection, which ends watches; waits for the server loop to
// return; shuts the informer factories down, waiting for their goroutines;
// and closes the storage backend it owns, waiting for its watches.
//
// The libraries' controllers stop on the cancelled context on their own and
// are gone within microseconds of Close returning; a goleak test checks that
// nothing a server started outlives it. Close is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Server) close() error {
	// The admission policy plugins' controllers, and the informers they
	// started, stop with this channel: before the factories are shut down,
	// which waits for every informer.
	close(s.admissionStop)
	defer s.loopback.Close()
	if !s.started.Load() {
		_ = s.listener.Close()
		if s.backend != nil {
			return s.backend.Close()
		}
		return nil
	}
	s.cancel()
	if !s.listener.waitIdle(closeTimeout) {
		s.log.Warn("requests still running at close; closing their connections", zap.Strings("requests", s.listener.requests()))
	}
	s.listener.closeConns()
	select {
	case <-s.runDone:
	case <-time.After(closeTimeout):
		s.log.Error("server loop did not stop", zap.Duration("waited", closeTimeout))
	}
	s.kubeInformers.Shutdown()
	s.dynInformers.Shutdown()
	var err error
	if s.backend != nil {
		err = s.backend.Close()
	}
	if s.runErr != nil && !errors.Is(s.runErr, context.Canceled) {
		err = errors.Join(err, s.runErr)
	}
	return err
}
