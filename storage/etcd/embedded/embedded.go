// Package embedded runs etcd (go.etcd.io/etcd/server/v3/embed) inside the
// process: a data directory, client and peer URLs on free loopback ports,
// started and stopped with the server that stores in it. NewBackend gives a
// storage/etcd Backend that owns its etcd server, so
//
//	b, err := embedded.NewBackend(ctx, embedded.Options{DataDir: "./dev"}, etcd.Options{})
//	srv, err := apiserver.New(apiserver.Options{Storage: b})
//
// keeps a server's objects in ./dev across restarts. A cluster of several
// members (StartCluster) is for tests of a member going away. A member's
// backend quota comes from the room on its data directory's filesystem
// (at most etcd's default 2 GiB), so a full disk refuses writes with etcd's
// "mvcc: database space exceeded" instead of stopping the process.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/kubeembed/apiserver/internal/globals"
	"github.com/kubeembed/apiserver/storage/etcd"
)

// startTimeout bounds how long Start waits for a member to be ready.
const startTimeout = 60 * time.Second

// Options configures one etcd member.
type Options struct {
	// DataDir is where etcd keeps its data. Empty: a temporary directory
	// removed by Close. A directory another process (or server) uses is
	// refused.
	DataDir string
	// Name is the member's name. Default "default".
	Name string
	// ClientPort and PeerPort are the loopback ports to listen on; zero
	// picks free ones. Server.Options returns them filled in, so a member
	// restarts where it was.
	ClientPort, PeerPort int
	// InitialCluster names every member's peer URL ("a=http://127.0.0.1:2380,b=...")
	// for a cluster of several; empty for a single member. StartCluster
	// fills it in.
	InitialCluster string
	// UnsafeNoFsync skips fsync (etcd's --unsafe-no-fsync): much faster,
	// and data written just before a crash of the machine may be lost. For
	// tests.
	UnsafeNoFsync bool
	// Logger receives etcd's logs; nil discards them.
	Logger *zap.Logger
	// KeepKlogLogger leaves klog's process-wide logger alone, as
	// etcd.Options.KeepKlogLogger: by default Start points it where the
	// first server would, before etcd's own gRPC clients log through it.
	KeepKlogLogger bool
}

// Server is a running etcd member.
type Server struct {
	opts    Options
	closing atomic.Bool // its logs of stopping are expected
	etcd    *embed.Etcd
	unlock  func() error
	tempDir bool
	quota   int64 // etcd's backend quota, from the room on DataDir (space.go)
}

// Start starts a member and waits until it serves (for a member of a
// cluster, until the cluster has a leader).
func Start(ctx context.Context, opts Options) (*Server, error) {
	s, err := launchOnFreePorts(opts)
	if err != nil {
		return nil, err
	}
	if err := s.waitReady(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	if err := s.disarmNoSpace(ctx, s.quota); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// launchOnFreePorts launches a member and, when a port it picked was taken
// between the pick and etcd's bind (any connection of another process can
// be given that ephemeral port), picks again. Ports the caller gave are
// not changed.
func launchOnFreePorts(opts Options) (*Server, error) {
	const attempts = 5
	for i := 1; ; i++ {
		s, err := launch(opts)
		picked := opts.ClientPort == 0 || opts.PeerPort == 0
		if err == nil || i == attempts || !picked || !addrInUse(err) {
			return s, err
		}
	}
}

// addrInUse says a listen failed because its address was taken; etcd does
// not always keep the syscall error in the chain, so its text counts too.
func addrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

// launch starts a member without waiting for its cluster.
func launch(opts Options) (*Server, error) {
	if !opts.KeepKlogLogger {
		globals.InitKlog()
	}
	s := &Server{opts: opts}
	if err := s.prepareDir(); err != nil {
		return nil, err
	}
	cfg, err := s.config()
	if err == nil {
		s.etcd, err = embed.StartEtcd(cfg)
	}
	if err != nil {
		_ = s.release()
		return nil, fmt.Errorf("embedded etcd in %s: %w", s.opts.DataDir, err)
	}
	return s, nil
}

// prepareDir makes the data directory (a temporary one if none is given)
// and locks it against a second server.
func (s *Server) prepareDir() error {
	if s.opts.DataDir == "" {
		dir, err := os.MkdirTemp("", "kubeembed-etcd-*")
		if err != nil {
			return err
		}
		s.opts.DataDir, s.tempDir = dir, true
	}
	if err := os.MkdirAll(s.opts.DataDir, 0o700); err != nil {
		return fmt.Errorf("embedded etcd: %w", err)
	}
	unlock, err := lockDir(s.opts.DataDir)
	if err != nil {
		if s.tempDir {
			_ = os.RemoveAll(s.opts.DataDir)
		}
		return err
	}
	s.unlock = unlock
	return nil
}

// config is the member's etcd configuration: loopback only.
func (s *Server) config() (*embed.Config, error) {
	if s.opts.Name == "" {
		s.opts.Name = "default"
	}
	err := s.pickPorts()
	if err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	if s.quota, err = quota(s.opts.DataDir); err != nil {
		return nil, err
	}
	cfg.QuotaBackendBytes, cfg.MaxWalFiles = s.quota, maxWALs
	cfg.Name = s.opts.Name
	cfg.Dir = filepath.Join(s.opts.DataDir, "etcd")
	client, peer := loopbackURL(s.opts.ClientPort), loopbackURL(s.opts.PeerPort)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = s.opts.InitialCluster
	if cfg.InitialCluster == "" {
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		// A single member has no one to hear heartbeats from: a short
		// election makes it leader (and ready) in a tenth of etcd's
		// default second. Members of a cluster keep etcd's timing.
		cfg.TickMs, cfg.ElectionMs = 10, 100
	}
	cfg.InitialClusterToken = "kubeembed"
	cfg.UnsafeNoFsync = s.opts.UnsafeNoFsync
	logger := s.opts.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(quietLogger(logger, &s.closing))
	return cfg, nil
}

func (s *Server) pickPorts() error {
	var err error
	for _, p := range []*int{&s.opts.ClientPort, &s.opts.PeerPort} {
		if *p == 0 {
			if *p, err = pickPort(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	select {
	case <-s.etcd.Server.ReadyNotify():
		return nil
	case err := <-s.etcd.Err():
		return fmt.Errorf("embedded etcd %s: %w", s.opts.Name, err)
	case <-ctx.Done():
		return fmt.Errorf("embedded etcd %s not ready: %w", s.opts.Name, ctx.Err())
	}
}

// ClientURLs are the member's client URLs, for etcd.Options.Servers.
func (s *Server) ClientURLs() []string { return []string{urlString(s.opts.ClientPort)} }

// Options are the member's options with its ports and data directory
// filled in: Start(ctx, s.Options()) after Close starts it again where it
// was, when the data directory was given (a temporary one is removed by
// Close).
func (s *Server) Options() Options { return s.opts }

// Close stops the member and unlocks its data directory (removing it when
// Start made it). It is safe to call more than once.
func (s *Server) Close() error {
	if s.etcd != nil {
		s.closing.Store(true)
		s.etcd.Close()
		s.etcd = nil
	}
	return s.release()
}

func (s *Server) release() error {
	var errs []error
	if s.unlock != nil {
		errs = append(errs, s.unlock())
		s.unlock = nil
	}
	if s.tempDir {
		errs = append(errs, os.RemoveAll(s.opts.DataDir))
		s.tempDir = false
	}
	return errors.Join(errs...)
}

// NewBackend starts a single member and returns a backend on it that stops
// it at Close. Servers in backendOpts is set to the member's URL.
// KeepKlogLogger in either options keeps klog's logger.
func NewBackend(ctx context.Context, opts Options, backendOpts etcd.Options) (*etcd.Backend, error) {
	opts.KeepKlogLogger = opts.KeepKlogLogger || backendOpts.KeepKlogLogger
	backendOpts.KeepKlogLogger = opts.KeepKlogLogger
	s, err := Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	backendOpts.Servers = s.ClientURLs()
	b, err := etcd.New(ctx, backendOpts)
	if err != nil {
		return nil, errors.Join(err, s.Close())
	}
	b.OnClose(s.Close)
	return b, nil
}

// StartCluster starts a cluster of one member per Options (each may give a
// DataDir and ports; names default to m0, m1...) and waits for its leader.
func StartCluster(ctx context.Context, members []Options) ([]*Server, error) {
	var peers []string
	for i := range members {
		m := &members[i]
		if m.Name == "" {
			m.Name = "m" + strconv.Itoa(i)
		}
		if m.PeerPort == 0 {
			p, err := freePort()
			if err != nil {
				return nil, err
			}
			m.PeerPort = p
		}
		peers = append(peers, m.Name+"="+urlString(m.PeerPort))
	}
	servers := make([]*Server, 0, len(members))
	closeAll := func() {
		for _, s := range servers {
			_ = s.Close()
		}
	}
	for _, m := range members {
		m.InitialCluster = strings.Join(peers, ",")
		s, err := launch(m)
		if err != nil {
			closeAll()
			return nil, err
		}
		servers = append(servers, s)
	}
	for _, s := range servers {
		if err := s.waitReady(ctx); err != nil {
			closeAll()
			return nil, err
		}
	}
	return servers, nil
}

func loopbackURL(port int) url.URL {
	return url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
}

// pickPort picks the ports a member is not given; a variable so that a
// test can make it pick a taken one.
var pickPort = freePort

// freePort is a loopback port free now (etcd binds it a moment later).
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func urlString(port int) string {
	u := loopbackURL(port)
	return u.String()
}

// IsLeader reports whether the member leads its cluster now.
func (s *Server) IsLeader() bool {
	return s.etcd != nil && s.etcd.Server.Leader() == s.etcd.Server.MemberID()
}
