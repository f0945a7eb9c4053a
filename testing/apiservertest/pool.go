package apiservertest

// A process's started servers, reused by the tests that follow: a test's
// server is handed back at its end, Reset to the state it had once started
// (Server.Reset), and handed to the next test that asks for a server of the
// same Options. Servers a test closed, that failed to reset, whose test
// failed, or whose test wrote CRDs (see wroteCRDs) are closed instead;
// idle servers close themselves after
// poolIdleTimeout, so that a process's goroutines are its own again (a
// goleak check in TestMain) soon after its last test.

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/faults"
	"github.com/kubeembed/apiserver/storage"
)

// ReuseEnv names the environment variable that chooses for every Start
// of the process: KUBEEMBED_TEST_REUSE=0 starts a new server for each test
// (as WithNewServer does for one), 1 or unset reuses servers.
const ReuseEnv = "KUBEEMBED_TEST_REUSE"

// poolIdleTimeout is how long a server waits in the pool for a test before
// it closes.
const poolIdleTimeout = time.Second

// resetTimeout bounds the reset of a server handed back.
const resetTimeout = 30 * time.Second

// WithReuse makes Start reuse a server even when ReuseEnv is 0: what Start
// does by default. Start hands the test a server an earlier test of the
// process handed back, reset to how it was once started (Server.Reset:
// no object, CRD, webhook, fault rule, recorded request, RBAC binding or
// simulated node of the earlier test remains), or starts one that it hands
// back at the test's end. Reuse is for servers of the same Options with
// the in-memory storage and none of: their own Storage, Port, CertDir,
// Providers, Clock, Logger, audit or Timing (those start a server of
// their own). What a test can still tell from a new server is in
// Server.Reset; WithNewServer is for a test that must not see it.
func WithReuse() Option {
	return func(o *apiserver.Options) { reuseServers.Store(o, true) }
}

// WithNewServer makes Start start a new server for the test, closed at its
// end, however ReuseEnv is set: for a test that reads what a reused server
// still shows of earlier tests (/metrics counts since its start,
// resourceVersions that only grow).
func WithNewServer() Option {
	return func(o *apiserver.Options) { reuseServers.Store(o, false) }
}

// reuses reports whether Start reuses servers for a test whose options
// chose choice (nil: no choice, ReuseEnv or the default decides).
func reuses(choice *bool) bool {
	if choice != nil {
		return *choice
	}
	return os.Getenv(ReuseEnv) != "0"
}

// reuseServers marks the options WithReuse (true) or WithNewServer (false)
// was applied to, as an Option can only change Options.
var reuseServers sync.Map

// pooled is a started server, its snapshot after start, and the logger
// that forwards its log to the test that has it.
type pooled struct {
	key  string
	srv  *apiserver.Server
	snap storage.Snapshot
	log  *testLogger
	// idle ends the wait in the pool: stop it before handing out.
	idle *time.Timer
}

type serverPool struct {
	mu   sync.Mutex
	idle map[string][]*pooled
}

var pool = &serverPool{idle: map[string][]*pooled{}}

// take hands out an idle server of key, or nil.
func (p *serverPool) take(key string) *pooled {
	p.mu.Lock()
	defer p.mu.Unlock()
	for list := p.idle[key]; len(list) > 0; list = p.idle[key] {
		s := list[len(list)-1]
		p.idle[key] = list[:len(list)-1]
		if s.idle.Stop() {
			return s
		}
		// Its idle timer fired: it is closing.
	}
	return nil
}

// put makes s idle until a test takes it or poolIdleTimeout passes.
func (p *serverPool) put(s *pooled) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s.idle = time.AfterFunc(poolIdleTimeout, func() { p.expire(s) })
	p.idle[s.key] = append(p.idle[s.key], s)
}

func (p *serverPool) expire(s *pooled) {
	p.mu.Lock()
	list := p.idle[s.key]
	for i, x := range list {
		if x == s {
			p.idle[s.key] = append(list[:i:i], list[i+1:]...)
		}
	}
	p.mu.Unlock()
	_ = s.srv.Close()
}

// startPooled is Start for options that key: a server of the pool, or a
// new one that joins the pool at the test's end.
func startPooled(t TB, key string, o apiserver.Options) *apiserver.Server {
	t.Helper()
	if s := pool.take(key); s != nil {
		s.log.attach(t)
		t.Cleanup(func() { s.handBack(t) })
		return s.srv
	}
	log := newTestLogger(t)
	o.Logger = log.logger
	srv, err := apiserver.New(o)
	if err != nil {
		log.stop()
		t.Fatalf("apiservertest: create server: %v", err)
		return nil
	}
	s := &pooled{key: key, srv: srv, log: log}
	t.Cleanup(func() { s.handBack(t) })
	ctx, cancel := context.WithTimeout(t.Context(), StartTimeout)
	defer cancel()
	if err := srv.Start(ctx); err != nil {
		t.Fatalf("apiservertest: start server: %v", err)
		return nil
	}
	if err := srv.WaitIdle(ctx); err != nil {
		t.Fatalf("apiservertest: start server: %v", err)
		return nil
	}
	if s.snap, err = srv.Snapshot(); err != nil {
		t.Fatalf("apiservertest: start server: %v", err)
		return nil
	}
	return srv
}

// handBack resets the server of a test that ended and puts it in the pool,
// or closes it: when the test failed (its server may be why), when the test
// never got it started, or when it cannot be reset.
func (s *pooled) handBack(t TB) {
	defer s.log.stop()
	failed, ok := t.(interface{ Failed() bool })
	if s.snap == nil || ok && failed.Failed() || wroteCRDs(s.srv) {
		_ = s.srv.Close()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), resetTimeout)
	defer cancel()
	if err := s.srv.Reset(ctx, s.snap); err != nil {
		t.Logf("apiservertest: the server is not reused: %v", err)
		_ = s.srv.Close()
		return
	}
	pool.put(s)
}

// wroteCRDs reports whether srv's recorder holds a write to a CRD that
// succeeded. Such a server costs more to reset than to replace: Reset
// waits until /openapi/v3 no longer lists what the test's CRDs served,
// which the aggregator refreshes once a second (~1 s measured), where a
// new server starts in ~0.15 s. A test past faults.MaxRecords requests
// may have lost the record: Reset then waits.
func wroteCRDs(srv *apiserver.Server) bool {
	return srv.Recorder().Count(func(r faults.Record) bool {
		return r.Group == apiextensionsv1.GroupName && r.Resource == "customresourcedefinitions" && !r.DryRun &&
			r.Verb != "get" && r.Verb != "list" && r.Verb != "watch" && r.Code >= 200 && r.Code < 300
	}) > 0
}

// poolKey is what servers of the same options share, and false when
// options with them cannot share a server: their own storage, port,
// certificate directory, providers, clock, audit or storage timing.
// o's Logger is the one Start gave it.
func poolKey(o apiserver.Options) (string, bool) {
	if os.Getenv(EtcdEnv) != "" {
		return "", false // etcd: its backend takes no snapshots
	}
	if o.Storage != nil || o.Port != 0 || o.CertDir != "" || len(o.Providers) > 0 || o.Clock != nil ||
		o.AuditPolicy != nil || o.AuditPolicyFile != "" || o.AuditLogPath != "" || o.AuditEvents != nil || o.Timing.Enabled() {
		return "", false
	}
	o.Logger = nil
	if !plainData(reflect.ValueOf(o)) {
		return "", false // a field added since, that this file does not know
	}
	stamps, err := fileStamps(append(append([]string{}, o.CRDPaths...), o.RBACPaths...))
	if err != nil {
		return "", false // Start reports it
	}
	b, err := json.Marshal(struct {
		Options  map[string]any
		Files    []string
		LogLevel string // the test logger's, fixed when the server starts
	}{dataFields(reflect.ValueOf(o)), stamps, os.Getenv(LogLevelEnv)})
	if err != nil {
		return "", false
	}
	return string(b), true
}

// plainData reports whether v holds no function, channel or interface
// value (nil ones aside): what JSON can tell apart.
func plainData(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Func, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return v.IsNil()
	case reflect.Pointer:
		return v.IsNil() || plainData(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if !plainData(v.Field(i)) {
				return false
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if !plainData(v.Index(i)) {
				return false
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if !plainData(it.Key()) || !plainData(it.Value()) {
				return false
			}
		}
	}
	return true
}

// dataFields are the fields of struct v but those of function, channel and
// interface types (nil: plainData), which JSON cannot encode.
func dataFields(v reflect.Value) map[string]any {
	out := map[string]any{}
	for i := range v.NumField() {
		switch v.Field(i).Kind() {
		case reflect.Func, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		default:
			out[v.Type().Field(i).Name] = v.Field(i).Interface()
		}
	}
	return out
}

// fileStamps names each file under paths with its size and modification
// time: a manifest changed between two tests is a new key.
func fileStamps(paths []string) ([]string, error) {
	var out []string
	for _, root := range paths {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			out = append(out, fmt.Sprintf("%s %d %d", path, info.Size(), info.ModTime().UnixNano()))
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
