// Package apiservertest gives a test an in-process Kubernetes API server:
// ready when Start returns, and when the test ends reset for the next test
// of the same Options (or closed; see Start).
//
//	func TestReconcile(t *testing.T) {
//		srv := apiservertest.Start(t)
//		client, err := srv.Clientset()
//		...
//	}
package apiservertest

import (
	"context"
	"os"
	"reflect"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/faults"
	"github.com/kubeembed/apiserver/timing"
)

// TB is the part of testing.TB that Start uses; Ginkgo's GinkgoT() has it.
type TB interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Context() context.Context
}

// Option changes the options of the server Start creates.
type Option func(*apiserver.Options)

// WithOptions sets the fields of opts that are not zero, whatever options
// come before or after it: list fields (CRDs, CRDPaths, Providers) are
// appended to what others set, other fields replace it. An empty list that
// is not nil counts: Controllers: []controllers.Name{} runs no controller,
// as it does in apiserver.Options. A Logger in opts replaces the test
// logger.
func WithOptions(opts apiserver.Options) Option {
	return func(o *apiserver.Options) {
		dst, src := reflect.ValueOf(o).Elem(), reflect.ValueOf(opts)
		for i := range src.NumField() {
			f, to := src.Field(i), dst.Field(i)
			switch {
			case f.IsZero(): // a nil list too
			case f.Kind() == reflect.Slice && to.IsNil():
				to.Set(reflect.AppendSlice(reflect.MakeSlice(f.Type(), 0, f.Len()), f))
			case f.Kind() == reflect.Slice:
				to.Set(reflect.AppendSlice(to, f))
			default:
				to.Set(f)
			}
		}
	}
}

// WithCRDPaths installs the CRDs in files or directories before Start
// returns.
func WithCRDPaths(paths ...string) Option {
	return func(o *apiserver.Options) { o.CRDPaths = append(o.CRDPaths, paths...) }
}

// StartTimeout bounds how long Start waits for the server to be ready.
const StartTimeout = time.Minute

// Start hands the test a ready server and fails the test if it cannot
// start one. By default (WithReuse) the server is one an earlier test of
// the process with the same Options handed back, reset to how it was once
// started, or a new one; either is handed back at the test's end for the
// next (closed instead if the test failed or closed it). WithNewServer,
// or ReuseEnv=0, starts a new server whose Close t.Cleanup runs. The
// server logs to t at Warn level and above until the test ends
// (LogLevelEnv changes the level): a test that does nothing wrong sees
// nothing from it. Without an Options.Timing,
// timing.Env (KUBEEMBED_TIMING=shake, say) chooses one, and the test's log
// tells how to replay it.
func Start(t TB, opts ...Option) *apiserver.Server {
	t.Helper()
	o, reuse := options(nil, opts)
	if !o.Timing.Enabled() {
		// timing.Env runs a suite under a storage timing (a server of its
		// own: a pooled server keeps none).
		var err error
		if o.Timing, _, err = timing.FromEnv(); err != nil {
			t.Fatalf("apiservertest: %v", err)
			return nil
		}
	}
	if o.Logger == nil && reuses(reuse) {
		if key, ok := poolKey(o); ok {
			return startPooled(t, key, o)
		}
	}
	log := newTestLogger(t)
	if o.Logger == nil {
		o.Logger = log.logger
	}
	// Cleanups run last-in first-out: close the server, then its etcd
	// backend, then cut the logger off, so nothing logs to t after the test
	// ends.
	t.Cleanup(log.stop)
	if err := storeInTestEtcd(t, &o); err != nil {
		t.Fatalf("apiservertest: %v", err)
		return nil
	}
	srv, err := apiserver.New(o)
	if err != nil {
		t.Fatalf("apiservertest: create server: %v", err)
		return nil
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Logf("apiservertest: close server: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), StartTimeout)
	defer cancel()
	if err := srv.Start(ctx); err != nil {
		t.Fatalf("apiservertest: start server: %v", err)
		return nil
	}
	if p := srv.Timing(); p.Enabled() {
		// Shown with the test's failure: how to replay its delays.
		t.Logf("apiservertest: storage timing %v; replay with Options.Timing.Seed = %d", p, p.Seed)
	}
	return srv
}

// options are the server's options: the logger log, then opts in order;
// reuse is the choice of WithReuse or WithNewServer among them, if any.
func options(log *zap.Logger, opts []Option) (o apiserver.Options, reuse *bool) {
	o = apiserver.Options{Logger: log}
	for _, opt := range opts {
		opt(&o)
	}
	if v, ok := reuseServers.LoadAndDelete(&o); ok {
		b := v.(bool)
		reuse = &b
	}
	return o, reuse
}

// testLogger writes zap entries to t until stopped.
type testLogger struct {
	mu      sync.Mutex
	t       TB
	stopped bool
	logger  *zap.Logger
}

// LogLevelEnv names the environment variable that sets the level of the
// servers' logs in tests (debug, info, warn, error; default warn):
// KUBEEMBED_TEST_LOG_LEVEL=info go test -v ./... shows a server's start,
// its post-start hooks and its Close.
const LogLevelEnv = "KUBEEMBED_TEST_LOG_LEVEL"

func newTestLogger(t TB) *testLogger {
	l := &testLogger{t: t}
	level := zapcore.WarnLevel
	if v := os.Getenv(LogLevelEnv); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			t.Logf("apiservertest: %s=%q: %v; logging at warn", LogLevelEnv, v, err)
			level = zapcore.WarnLevel
		}
	}
	enc := zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())
	l.logger = zap.New(zapcore.NewCore(enc, zapcore.AddSync(l), level))
	return l
}

func (l *testLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.t.Logf("%s", trimNewline(p))
	}
	return len(p), nil
}

// attach makes l write to t, the test that now has l's server.
func (l *testLogger) attach(t TB) {
	l.mu.Lock()
	l.t, l.stopped = t, false
	l.mu.Unlock()
}

func (l *testLogger) stop() {
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
}

func trimNewline(p []byte) string {
	if n := len(p); n > 0 && p[n-1] == '\n' {
		p = p[:n-1]
	}
	return string(p)
}

// InjectFault adds rule to the server's faults until the test ends.
func InjectFault(t TB, srv *apiserver.Server, rule faults.Rule) {
	t.Helper()
	t.Cleanup(srv.Faults().Add(rule))
}

// WaitIdleTimeout bounds WaitIdle.
const WaitIdleTimeout = 30 * time.Second

// WaitIdle waits until the server's controllers have nothing left to do
// (Server.WaitIdle: a deleted namespace is gone, an owner's dependents are
// collected), and fails the test if that takes more than WaitIdleTimeout,
// naming what was still busy.
func WaitIdle(t TB, srv *apiserver.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), WaitIdleTimeout)
	defer cancel()
	if err := srv.WaitIdle(ctx); err != nil {
		t.Fatalf("%v", err)
	}
}

// ClientsetFor returns a client authenticated as the user name in groups
// (Server.RESTConfigFor: a client certificate of the server's CA), served
// in process (Server.InProcess), failing the test if it cannot be made.
func ClientsetFor(t TB, srv *apiserver.Server, name string, groups ...string) kubernetes.Interface {
	t.Helper()
	c, err := srv.ClientsetFor(&user.DefaultInfo{Name: name, Groups: groups})
	if err != nil {
		t.Fatalf("client for %s: %v", name, err)
	}
	return c
}

// ClientsetForServiceAccount returns a client authenticated as the service
// account namespace/name (Server.RESTConfigForServiceAccount), which must
// exist, served in process (Server.InProcess).
func ClientsetForServiceAccount(t TB, srv *apiserver.Server, namespace, name string) kubernetes.Interface {
	t.Helper()
	cfg, err := srv.RESTConfigForServiceAccount(t.Context(), namespace, name)
	if err == nil {
		cfg, err = srv.InProcess(cfg)
	}
	if err != nil {
		t.Fatalf("%v", err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("client for service account %s/%s: %v", namespace, name, err)
	}
	return c
}

// StepClock moves the server's fake clock (Options.Clock) on by d, a
// second at a time, waiting for the server's controllers to be idle after
// each: the simulated kubelets renew their Leases and the node lifecycle
// controller sees it, as when time passes on a cluster. One Step of more
// than a kubelet's 10 s heartbeat would be a clock that jumped: nodes may
// be found Unknown.
func StepClock(t TB, srv *apiserver.Server, clock *clocktesting.FakeClock, d time.Duration) {
	t.Helper()
	for d > 0 {
		step := min(d, time.Second)
		clock.Step(step)
		d -= step
		WaitIdle(t, srv)
	}
}
