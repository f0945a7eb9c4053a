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

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kubeembed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		kubeconfig  = fs.String("kubeconfig", filepath.Join(os.TempDir(), "kubeembed.kubeconfig"), "where to write the kubeconfig of the admin user")
		bind        = fs.String("bind-address", "127.0.0.1", "IP address to listen on")
		port        = fs.Int("port", 0, "TCP port to listen on; 0 picks a free one")
		verbose     = fs.Bool("v", false, "log at debug level")
		apf         = fs.Bool("enable-priority-and-fairness", true, "apply API Priority and Fairness, as kube-apiserver's flag of that name")
		auditLog    = fs.String("audit-log-path", "", "write audit events (audit.k8s.io/v1 JSON lines) to this file; - for standard output")
		auditPolicy = fs.String("audit-policy-file", "", "the audit policy; without one nothing is audited")
		profile     = fs.String("profile", string(apiserver.ProfileCluster), "what runs besides the API: 'cluster' (the controllers, "+
			"default service accounts) or 'envtest' (as envtest's control plane: no controllers, no ServiceAccount admission)")
		ctrls = fs.String("controllers", "*", "the controllers to run, as kube-controller-manager's flag of that name: "+
			"'*' all, 'name' one, '-name' not that one (comma-separated); default: the profile's; known: "+joinNames(controllers.All()))
		crds stringList
		rbac stringList
	)
	fs.Var(&crds, "crds", "file or directory of CRD YAML/JSON to install before serving (repeatable)")
	fs.Var(&rbac, "rbac", "file or directory of RBAC manifests (config/rbac) to create before serving (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}

	level := zapcore.InfoLevel
	if *verbose {
		level = zapcore.DebugLevel
	}
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.AddSync(stderr), level))
	defer func() { _ = log.Sync() }()

	srv, err := apiserver.New(apiserver.Options{Logger: log, BindAddress: *bind, Port: *port, CRDPaths: crds, RBACPaths: rbac,
		DisablePriorityAndFairness: !*apf, AuditLogPath: *auditLog, AuditPolicyFile: *auditPolicy,
		Profile: apiserver.Profile(*profile), Controllers: controllersFlag(fs, *ctrls)})
	if err != nil {
		return err
	}
	defer func() {
		if err := srv.Close(); err != nil {
			log.Error("close", zap.Error(err))
		}
	}()
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := srv.Start(startCtx); err != nil {
		return err
	}
	if err := writeKubeconfig(srv, *kubeconfig); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "kubeembed: serving %s; use it with: export KUBECONFIG=%s\n", srv.URL(), *kubeconfig)
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
	return nil
}
