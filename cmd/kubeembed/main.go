// Command kubeembed runs an in-process Kubernetes API server standalone and
// writes a kubeconfig for it, so kubectl and clients in any language can use
// it:
//
//	go run ./cmd/kubeembed --kubeconfig /tmp/kubeembed.kubeconfig
//	KUBECONFIG=/tmp/kubeembed.kubeconfig kubectl get namespaces
//
// It stops cleanly on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/metricsapi"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "kubeembed:", err)
		}
		os.Exit(1)
	}
}

type stringList []string

func (s *stringList) String() string     { return fmt.Sprint(*s) }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func joinNames(names []controllers.Name) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return strings.Join(s, ", ")
}

// controllersFlag is --controllers if given, else nil: the profile's.
func controllersFlag(fs *flag.FlagSet, v string) []controllers.Name {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "controllers" })
	if !set {
		return nil
	}
	return splitNames(v)
}

// nodesFlag is --nodes: nil (the profile's) when not given.
func nodesFlag(n int) []controllers.Node {
	if n < 0 {
		return nil
	}
	return controllers.Nodes(n)
}

// splitNames reads --controllers; an empty value runs none.
func splitNames(v string) []controllers.Name {
	names := []controllers.Name{}
	for _, n := range strings.Split(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, controllers.Name(n))
		}
	}
	return names
}

// flags are the command line.
type flags struct {
	kubeconfig, bind, auditLog, auditPolicy, profile, ctrls, serviceRange string
	port, nodes                                                           int
	verbose, apf, metrics                                                 bool
	crds, rbac, failPulls                                                 stringList
	podExits                                                              podExits
	storage                                                               storageFlags
}

func parseFlags(args []string, stderr io.Writer) (*flags, *flag.FlagSet, error) {
	fs := flag.NewFlagSet("kubeembed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := &flags{}
	fs.StringVar(&f.kubeconfig, "kubeconfig", filepath.Join(os.TempDir(), "kubeembed.kubeconfig"), "where to write the kubeconfig of the admin user")
	fs.StringVar(&f.bind, "bind-address", "127.0.0.1", "IP address to listen on")
	fs.IntVar(&f.port, "port", 0, "TCP port to listen on; 0 picks a free one (with --data-dir: the one its last server used, if any)")
	fs.StringVar(&f.serviceRange, "service-cluster-ip-range", "10.0.0.0/24", "the IPv4 range of Services' cluster IPs, as kube-apiserver's flag of that name")
	fs.BoolVar(&f.verbose, "v", false, "log at debug level")
	fs.BoolVar(&f.apf, "enable-priority-and-fairness", true, "apply API Priority and Fairness, as kube-apiserver's flag of that name")
	fs.StringVar(&f.auditLog, "audit-log-path", "", "write audit events (audit.k8s.io/v1 JSON lines) to this file; - for standard output")
	fs.StringVar(&f.auditPolicy, "audit-policy-file", "", "the audit policy; without one nothing is audited")
	fs.StringVar(&f.profile, "profile", string(apiserver.ProfileCluster), "what runs besides the API: 'cluster' (the controllers, "+
		"default service accounts) or 'envtest' (as envtest's control plane: no controllers, no ServiceAccount admission)")
	fs.StringVar(&f.ctrls, "controllers", "*", "the controllers to run, as kube-controller-manager's flag of that name: "+
		"'*' all, 'name' one, '-name' not that one (comma-separated); default: the profile's; known: "+joinNames(controllers.All()))
	fs.IntVar(&f.nodes, "nodes", -1, "simulated nodes to register (node-0, node-1, ...), whose pods the simulated kubelet runs; "+
		"default: the profile's (1 for 'cluster', 0 for 'envtest')")
	fs.BoolVar(&f.metrics, "metrics", false, "serve metrics.k8s.io (kubectl top, HorizontalPodAutoscalers) as metrics-server does, "+
		"with simulated values, since no container runs: each container of a Running pod uses what it requests (0 if nothing), "+
		"each node the sum of its pods' usage. Off by default: an HPA whose target is under 100% utilization would always see 100% "+
		"and scale to its maximum; and it adds ~0.07 s to the start (the aggregator's first check of the Service)")
	fs.Var(&f.crds, "crds", "file or directory of CRD YAML/JSON to install before serving (repeatable)")
	fs.Var(&f.podExits, "pod-exit", podExitUsage)
	fs.Var(&f.failPulls, "fail-image-pull", "an image the simulated nodes cannot pull (repeatable): its containers wait with "+
		"ErrImagePull, then ImagePullBackOff, as kubelet.FailImagePulls makes them for tests in Go")
	fs.Var(&f.rbac, "rbac", "file or directory of RBAC manifests (config/rbac) to create before serving (repeatable)")
	f.storage.register(fs)
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	if fs.NArg() > 0 {
		return nil, nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return f, fs, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, fs, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	level := zapcore.InfoLevel
	if f.verbose {
		level = zapcore.DebugLevel
	}
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.AddSync(stderr), level))
	defer func() { _ = log.Sync() }()

	warnIfExposed(log, f.bind)
	backend, err := f.storage.backend(ctx, log)
	if err != nil {
		return err
	}
	if backend != nil {
		defer func() {
			if err := backend.Close(); err != nil {
				log.Error("close storage", zap.Error(err))
			}
		}()
	}
	port, kept, err := f.storage.port(f.port, f.bind)
	if err != nil {
		return err
	}
	srv, err := apiserver.New(apiserver.Options{Logger: log, BindAddress: f.bind, Port: port, CRDPaths: f.crds, RBACPaths: f.rbac,
		DisablePriorityAndFairness: !f.apf, AuditLogPath: f.auditLog, AuditPolicyFile: f.auditPolicy,
		Profile: apiserver.Profile(f.profile), Controllers: controllersFlag(fs, f.ctrls), Nodes: nodesFlag(f.nodes),
		Storage: backend, CertDir: f.storage.certDir(), ServiceClusterIPRange: f.serviceRange})
	if err != nil && kept {
		return fmt.Errorf("%w (the port of --data-dir's last server, kept in %s: give --port to choose another)", err, f.storage.portFile())
	}
	if err != nil {
		return err
	}
	if err := f.storage.keepPort(srv.URL()); err != nil {
		return errors.Join(err, srv.Close())
	}
	if err := addPodExits(srv, f.podExits, f.failPulls); err != nil {
		return errors.Join(err, srv.Close())
	}
	defer func() {
		if err := srv.Close(); err != nil {
			log.Error("close", zap.Error(err))
		}
	}()
	return serve(ctx, srv, f, stdout, log)
}

// warnIfExposed warns when the server listens beyond this machine: only
// an explicit --bind-address does that (the default is loopback, where
// kube-apiserver's is 0.0.0.0, since a development cluster's admin
// credentials sit in a file anyone who can read it may use).
func warnIfExposed(log *zap.Logger, bind string) {
	if ip := net.ParseIP(bind); ip != nil && !ip.IsLoopback() {
		log.Warn("serving beyond this machine: anyone who can reach the port may call the API anonymously "+
			"(as kube-apiserver allows: /version and the health checks) and anyone with the kubeconfig's token is cluster-admin",
			zap.String("bind-address", bind))
	}
}

// serve starts srv (and metrics.k8s.io with --metrics), writes its
// kubeconfig and serves until ctx ends.
func serve(ctx context.Context, srv *apiserver.Server, f *flags, stdout io.Writer, log *zap.Logger) error {
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := srv.Start(startCtx); err != nil {
		return err
	}
	if f.metrics {
		m, err := metricsapi.Serve(startCtx, srv, metricsapi.Options{Logger: log})
		if err != nil {
			return err
		}
		defer func() { // before the server's Close (deferred by run)
			if err := m.Close(); err != nil {
				log.Error("close metrics.k8s.io", zap.Error(err))
			}
		}()
	}
	kubeconfig := f.kubeconfig
	if err := writeKubeconfig(srv, kubeconfig); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "kubeembed: serving %s; use it with: export KUBECONFIG=%s\n", srv.URL(), kubeconfig)
	<-ctx.Done()
	log.Info("shutting down")
	return nil
}

// writeKubeconfig writes the admin's kubeconfig of srv to path.
func writeKubeconfig(srv *apiserver.Server, path string) error {
	kc, err := srv.Kubeconfig()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	// WriteFile keeps the mode of a file that exists: a kubeconfig left
	// readable by others would hand them the admin token.
	if err := os.Chmod(path, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}
