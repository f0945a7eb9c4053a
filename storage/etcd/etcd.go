// Package etcd is a storage backend over an etcd v3 cluster, built on
// k8s.io/apiserver's etcd3 store: the code kube-apiserver stores through, with
// its key layout (prefix + "/" + resource + "/" [namespace "/"] name), its
// compactor and, as an option, its watch cache.
//
// It is a sibling of storage/memory: a server given one in Options.Storage
// stores every resource of its three tiers in etcd and knows nothing else
// about it. Package storage/etcd/embedded runs an etcd server in the process
// for a backend that needs no etcd of its own.
package etcd

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	"go.uber.org/zap"

	"k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/storage"
	cacherstorage "k8s.io/apiserver/pkg/storage/cacher"
	"k8s.io/apiserver/pkg/storage/etcd3"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/utils/clock"

	"github.com/kubeembed/apiserver/internal/globals"
	kestorage "github.com/kubeembed/apiserver/storage"
)

// Defaults for Options, kube-apiserver's.
const (
	// DefaultPrefix is kube-apiserver's --etcd-prefix.
	DefaultPrefix = "/registry"
	// DefaultDialTimeout bounds New's wait for the cluster (kube-apiserver
	// waits 20s for its etcd client).
	DefaultDialTimeout = 20 * time.Second
	// DefaultCompactionInterval is kube-apiserver's
	// --etcd-compaction-interval.
	DefaultCompactionInterval = 5 * time.Minute
	// healthTimeout is kube-apiserver's --etcd-healthcheck-timeout.
	healthTimeout = 2 * time.Second
)

// Options configures a Backend.
type Options struct {
	// Servers are the client URLs of the cluster's members
	// (kube-apiserver's --etcd-servers). Required.
	Servers []string
	// Prefix is the key prefix of every object (--etcd-prefix). Two servers
	// on one cluster with different prefixes never see each other's objects.
	// Default DefaultPrefix.
	Prefix string
	// CAFile, CertFile and KeyFile are the client TLS files (--etcd-cafile,
	// --etcd-certfile, --etcd-keyfile); none for plain HTTP.
	CAFile, CertFile, KeyFile string
	// DialTimeout bounds how long New waits for the cluster to answer.
	// Default DefaultDialTimeout.
	DialTimeout time.Duration
	// RequestTimeout, when positive, bounds every storage call that has no
	// earlier deadline. Requests already end at the server's request
	// timeout (60s), as on kube-apiserver; zero adds no bound of its own.
	RequestTimeout time.Duration
	// CompactionInterval is how often old revisions are compacted
	// (--etcd-compaction-interval). Default DefaultCompactionInterval;
	// negative never compacts.
	CompactionInterval time.Duration
	// WatchCache puts k8s.io/apiserver's watch cache in front of each
	// resource, as kube-apiserver's --watch-cache (on there by default):
	// lists and watches are served from memory kept current by one etcd
	// watch per resource.
	WatchCache bool
	// Logger receives the etcd client's warnings; nil discards them.
	Logger *zap.Logger
	// KeepKlogLogger leaves klog's process-wide logger alone, as
	// apiserver.Options.KeepKlogLogger (set both). By default New points it
	// where the first server would, once per process, before the etcd
	// client's goroutines log through it: setting it later, in the server's
	// New, is a data race with them.
	KeepKlogLogger bool
}

func (o Options) withDefaults() (Options, error) {
	if len(o.Servers) == 0 {
		return o, errors.New("etcd: no servers given")
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	o.Prefix = path.Join("/", o.Prefix)
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.CompactionInterval == 0 {
		o.CompactionInterval = DefaultCompactionInterval
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return o, nil
}

// Backend stores through one etcd client shared by all its resources'
// stores, as one kube-apiserver shares its connections to etcd.
type Backend struct {
	opts Options
	// root is Options.Prefix without a trailing "/" ("" for "/").
	root      string
	client    *kubernetes.Client
	compactor compactor

	mu           sync.Mutex
	closed       bool
	serverPrefix string // ResourceConfig.Prefix: what Options.Prefix replaces
	destroys     []func()
	sources      []*cacheSource
	onClose      []func() error
}

var _ kestorage.Backend = (*Backend)(nil)
var _ kestorage.Counter = (*Backend)(nil)
var _ kestorage.Etcd = (*Backend)(nil)

// New connects to the cluster and checks that the prefix holds nothing but
// what a Kubernetes API server writes. It fails, writing nothing, when the
// cluster does not answer within DialTimeout (unreachable, wrong CA...) or
// the prefix holds foreign keys.
func New(ctx context.Context, opts Options) (*Backend, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if !opts.KeepKlogLogger {
		globals.InitKlog()
	}
	client, err := connect(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := checkLayout(ctx, client, opts); err != nil {
		_ = client.Close()
		return nil, err
	}
	settleProgressNotify(ctx, client.Client)
	// With no interval the compactor compacts nothing but still follows
	// the compactions of other servers, for CompactRevision.
	b := &Backend{opts: opts, root: strings.TrimSuffix(opts.Prefix, "/"), client: client,
		compactor: etcd3.NewCompactor(client.Client, max(opts.CompactionInterval, 0), clock.RealClock{}, nil)}
	return b, nil
}

// connect makes the client and waits until the cluster serves a read.
func connect(ctx context.Context, opts Options) (*kubernetes.Client, error) {
	tc, err := tlsConfig(opts)
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.New(clientv3.Config{
		Endpoints:            opts.Servers,
		TLS:                  tc,
		DialTimeout:          opts.DialTimeout,
		DialKeepAliveTime:    30 * time.Second, // kube-apiserver's keepalive
		DialKeepAliveTimeout: 10 * time.Second,
		Logger:               opts.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("etcd %v: %w", opts.Servers, err)
	}
	ctx, cancel := context.WithTimeout(ctx, opts.DialTimeout)
	defer cancel()
	if _, err := client.KV.Get(ctx, path.Join(opts.Prefix, "health")); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("etcd %v did not answer within %v: %w%s", opts.Servers, opts.DialTimeout, err, diagnose(opts.Servers, tc))
	}
	return client, nil
}

// Store returns the etcd3 store of one resource under the backend's prefix
// (the server's ResourceConfig.Prefix is replaced by Options.Prefix), behind
// a watch cache when Options.WatchCache is set.
func (b *Backend) Store(rc kestorage.ResourceConfig) (storage.Interface, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errors.New("etcd: backend is closed")
	}
	b.serverPrefix = path.Join("/", rc.Prefix)
	transformer := rc.Transformer
	if transformer == nil {
		transformer = identity.NewEncryptCheckTransformer()
	}
	versioner := storage.APIObjectVersioner{}
	decoder := etcd3.NewDefaultDecoder(rc.Codec, versioner)
	unsafeDelete := utilfeature.DefaultFeatureGate.Enabled(features.AllowUnsafeMalformedObjectDeletion)
	if unsafeDelete {
		transformer = etcd3.WithCorruptObjErrorHandlingTransformer(transformer)
		decoder = etcd3.WithCorruptObjErrorHandlingDecoder(decoder)
	}
	s, err := etcd3.New(b.client, b.compactor, rc.Codec, rc.NewFunc, rc.NewListFunc,
		b.opts.Prefix, rc.ResourcePrefix, rc.GroupResource, transformer,
		etcd3.NewDefaultLeaseManagerConfig(), decoder, versioner)
	if err != nil {
		return nil, fmt.Errorf("etcd store for %v: %w", rc.GroupResource, err)
	}
	b.destroys = append(b.destroys, s.Close)
	var out storage.Interface = s
	if unsafeDelete {
		out = etcd3.NewStoreWithUnsafeCorruptObjectDeletion(out, rc.GroupResource)
	}
	if b.opts.WatchCache && rc.KeyFunc != nil {
		if out, err = b.cached(out, rc); err != nil {
			return nil, err
		}
	}
	if b.opts.RequestTimeout > 0 {
		out = withTimeout{out, b.opts.RequestTimeout}
	}
	return out, nil
}

// compactor is what etcd3.NewCompactor returns.
type compactor interface {
	etcd3.Compactor
	Stop()
}

// cached puts k8s.io/apiserver's cacher in front of s, as kube-apiserver's
// StorageWithCacher does, its etcd watch on a stream of its own (ownStream).
func (b *Backend) cached(s storage.Interface, rc kestorage.ResourceConfig) (storage.Interface, error) {
	source := newCacheSource(ownStream{s, rc.GroupResource.String()})
	cacher, err := cacherstorage.NewCacherFromConfig(cacherstorage.Config{
		Storage: source, Versioner: storage.APIObjectVersioner{},
		GroupResource: rc.GroupResource, ResourcePrefix: rc.ResourcePrefix,
		KeyFunc: rc.KeyFunc, NewFunc: rc.NewFunc, NewListFunc: rc.NewListFunc,
		GetAttrsFunc: rc.AttrFunc, IndexerFuncs: rc.IndexerFuncs, Indexers: rc.Indexers,
		Codec: rc.Codec, EventsHistoryWindow: storagebackend.DefaultEventsHistoryWindow,
	})
	if err != nil {
		return nil, fmt.Errorf("watch cache for %v: %w", rc.GroupResource, err)
	}
	delegator := cacherstorage.NewCacheDelegator(cacher, s)
	b.sources = append(b.sources, source)
	b.destroys = append(b.destroys, delegator.Stop, cacher.Stop)
	return delegator, nil
}

// Check reads a key through the cluster's quorum, as kube-apiserver's etcd
// health check does.
func (b *Backend) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	if _, err := b.client.KV.Get(ctx, path.Join(b.opts.Prefix, "health")); err != nil {
		return fmt.Errorf("error getting data from etcd: %w", err)
	}
	return nil
}

// Count counts the keys under a prefix (the server's
// apiserver_resource_objects metric). keyPrefix is below the server's prefix
// as ResourceConfig.Prefix gave it; Count moves it under Options.Prefix.
func (b *Backend) Count(ctx context.Context, keyPrefix string) (int64, error) {
	resp, err := b.client.KV.Get(ctx, b.key(keyPrefix), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Count, nil
}

// key maps a key under the server's prefix to Options.Prefix.
func (b *Backend) key(serverKey string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if rest, ok := strings.CutPrefix(serverKey, b.serverPrefix); ok && b.serverPrefix != "" {
		return b.root + rest
	}
	return serverKey
}

// Client is the backend's etcd client, for tests and tools that read keys.
func (b *Backend) Client() *clientv3.Client { return b.client.Client }

// Prefix is the key prefix of every object.
func (b *Backend) Prefix() string { return b.opts.Prefix }

// OnClose registers f to run after Close released the client (the embedded
// server stops there).
func (b *Backend) OnClose(f func() error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.onClose = append(b.onClose, f)
}

// Close stops the watch caches (once their etcd watches have ended:
// cacheSource) and the compactor, ends the stores' watches and closes the
// client. It is safe to call more than once.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	destroys, onClose, sources := b.destroys, b.onClose, b.sources
	b.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range sources {
		wg.Go(s.end)
	}
	wg.Wait()
	for i := len(destroys) - 1; i >= 0; i-- {
		destroys[i]()
	}
	b.compactor.Stop()
	errs := []error{b.client.Close()}
	for _, f := range onClose {
		errs = append(errs, f())
	}
	return errors.Join(errs...)
}
