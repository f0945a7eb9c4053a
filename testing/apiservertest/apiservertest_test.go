package apiservertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/timing"
)

func TestOptionsCompose(t *testing.T) {
	t.Parallel()
	testLog, userLog := zap.NewNop(), zap.NewExample()
	for _, tc := range []struct {
		name  string
		opts  []Option
		paths []string
		token string
		log   *zap.Logger
	}{
		{"none", nil, nil, "", testLog},
		{"paths then options", []Option{WithCRDPaths("a"), WithOptions(apiserver.Options{AdminToken: "t"})}, []string{"a"}, "t", testLog},
		{"options then paths", []Option{WithOptions(apiserver.Options{CRDPaths: []string{"a"}}), WithCRDPaths("b")}, []string{"a", "b"}, "", testLog},
		{"two options", []Option{WithOptions(apiserver.Options{AdminToken: "t", CRDPaths: []string{"a"}}),
			WithOptions(apiserver.Options{CRDPaths: []string{"b"}})}, []string{"a", "b"}, "t", testLog},
		{"a logger replaces the test's", []Option{WithOptions(apiserver.Options{Logger: userLog})}, nil, "", userLog},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, _ := options(testLog, tc.opts)
			assert.Equal(t, tc.paths, o.CRDPaths)
			assert.Equal(t, tc.token, o.AdminToken)
			assert.Same(t, tc.log, o.Logger)
		})
	}
}

// An empty list is a value (Options.Controllers: {} runs none), not
// "unset": it survives WithOptions, and an option before or after it.
func TestOptionsKeepAnEmptyList(t *testing.T) {
	t.Parallel()
	none := apiserver.Options{Controllers: []controllers.Name{}}
	for name, opts := range map[string][]Option{
		"alone":              {WithOptions(none)},
		"after other option": {WithCRDPaths("a"), WithOptions(none)},
		"before a nil list":  {WithOptions(none), WithOptions(apiserver.Options{AdminToken: "t"})},
	} {
		t.Run(name, func(t *testing.T) {
			o, _ := options(zap.NewNop(), opts)
			assert.NotNil(t, o.Controllers)
			assert.Empty(t, o.Controllers)
		})
	}
	o, _ := options(zap.NewNop(), []Option{WithOptions(none), WithOptions(apiserver.Options{Controllers: []controllers.Name{"namespace"}})})
	assert.Equal(t, []controllers.Name{"namespace"}, o.Controllers, "a list after it is appended")
}

// A server started with no controllers runs none: a deleted namespace
// stays Terminating (its content is never deleted), as on envtest.
func TestStartWithNoControllersRunsNone(t *testing.T) {
	t.Parallel()
	srv := Start(t, WithOptions(apiserver.Options{Controllers: []controllers.Name{}}))
	client, err := srv.Clientset()
	require.NoError(t, err)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}
	_, err = client.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = client.CoreV1().ConfigMaps("kept").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, client.CoreV1().Namespaces().Delete(t.Context(), "kept", metav1.DeleteOptions{}))
	WaitIdle(t, srv) // returns at once: nothing runs

	got, err := client.CoreV1().Namespaces().Get(t.Context(), "kept", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.NamespaceTerminating, got.Status.Phase)
	_, err = client.CoreV1().ConfigMaps("kept").Get(t.Context(), "c", metav1.GetOptions{})
	assert.NoError(t, err, "no namespace controller deleted the content")
}

// fakeTB records what Start does with its TB.
type fakeTB struct {
	ctx      context.Context
	mu       sync.Mutex
	cleanups []func()
	fatal    string
	logs     []string
}

func (f *fakeTB) Helper()                  {}
func (f *fakeTB) Context() context.Context { return f.ctx }
func (f *fakeTB) Cleanup(fn func())        { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
}

// Failed reports whether Fatalf was called.
func (f *fakeTB) Failed() bool { return f.fatal != "" }

func (f *fakeTB) Logf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs = append(f.logs, fmt.Sprintf(format, args...))
}

// runCleanups runs the cleanups last-in first-out, as testing does.
func (f *fakeTB) runCleanups() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

func TestStartFailsTheTestOnBadOptions(t *testing.T) {
	t.Parallel()
	tb := &fakeTB{ctx: t.Context()}
	srv := Start(tb, WithOptions(apiserver.Options{Port: -1}))
	assert.Nil(t, srv)
	assert.Contains(t, tb.fatal, "apiservertest: create server")
	assert.Contains(t, tb.fatal, "Port -1")
	tb.runCleanups()
}

// A new server (WithNewServer) closes with its test; a reused one is
// handed back (pool_test.go).
func TestStartServesUntilCleanup(t *testing.T) {
	t.Parallel()
	tb := &fakeTB{ctx: t.Context()}
	srv := Start(tb, WithNewServer())
	require.Empty(t, tb.fatal)
	require.NotNil(t, srv)
	addr := strings.TrimPrefix(srv.URL(), "https://")
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	_ = conn.Close()
	tb.runCleanups()
	_, err = net.Dial("tcp", addr)
	assert.True(t, errors.Is(err, syscall.ECONNREFUSED), "closed by the cleanup: %v", err)
	tb.mu.Lock()
	n := len(tb.logs)
	tb.mu.Unlock()
	srvLog := newTestLogger(tb)
	srvLog.stop()
	srvLog.logger.Info("after the test")
	tb.mu.Lock()
	defer tb.mu.Unlock()
	assert.Len(t, tb.logs, n, "a stopped logger writes nothing to the test")
}

// With EtcdEnv set, Start stores in that etcd: a namespace the server
// creates is a key there, under the server's own prefix.
func TestStartStoresInTestEtcd(t *testing.T) {
	servers := os.Getenv(EtcdEnv)
	if servers == "" {
		t.Skip(EtcdEnv + " is not set: servers store in memory")
	}
	t.Parallel()
	client, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(servers, ","), DialTimeout: 10 * time.Second})
	require.NoError(t, err)
	defer client.Close()
	srv := Start(t)
	c, err := srv.Clientset()
	require.NoError(t, err)
	name := "stored-" + randomName()
	_, err = c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	resp, err := client.Get(t.Context(), "/kubeembed-test/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	require.NoError(t, err)
	var keys []string
	for _, kv := range resp.Kvs {
		if strings.HasSuffix(string(kv.Key), "/namespaces/"+name) {
			keys = append(keys, string(kv.Key))
		}
	}
	assert.Len(t, keys, 1, "the namespace is a key in etcd")
}

// A test that does nothing wrong sees nothing from its servers at the
// default level: five cluster-profile servers that roll a Deployment out,
// delete a namespace and close log no line to the test (client-go's
// warnings of the servers' own requests, "v1 Endpoints is deprecated",
// included).
func TestServersLogNothingByDefault(t *testing.T) {
	t.Parallel()
	for i := range 5 {
		tb := &fakeTB{ctx: t.Context()}
		srv := Start(tb)
		require.Empty(t, tb.fatal)
		c, err := srv.Clientset()
		require.NoError(t, err)
		_, err = c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "work"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = c.AppsV1().Deployments("work").Create(t.Context(), &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		WaitIdle(t, srv)
		require.NoError(t, c.CoreV1().Namespaces().Delete(t.Context(), "work", metav1.DeleteOptions{}))
		if i%2 == 0 {
			WaitIdle(t, srv) // the others close while the namespace goes
		}
		tb.runCleanups()
		tb.mu.Lock()
		assert.Empty(t, tb.logs, "server %d logged to the test", i)
		tb.mu.Unlock()
	}
}

// LogLevelEnv lowers the level: at info, a server says when it is ready.
// Not parallel: it sets an environment variable of the process.
func TestLogLevelEnv(t *testing.T) {
	t.Setenv(LogLevelEnv, "info")
	tb := &fakeTB{ctx: t.Context()}
	Start(tb)
	require.Empty(t, tb.fatal)
	tb.runCleanups()
	tb.mu.Lock()
	defer tb.mu.Unlock()
	assert.Contains(t, strings.Join(tb.logs, "\n"), "kube-apiserver ready")
}

// timing.Env gives a server whose options have no timing one, and the
// test's log says how to replay it; a bad value fails the test. Not
// parallel: it sets an environment variable of the process.
func TestTimingEnv(t *testing.T) {
	t.Setenv(timing.Env, "shake:7")
	tb := &fakeTB{ctx: t.Context()}
	srv := Start(tb)
	require.Empty(t, tb.fatal)
	assert.Equal(t, int64(7), srv.Timing().Seed)
	assert.True(t, srv.Timing().Enabled())
	tb.runCleanups()
	tb.mu.Lock()
	assert.Contains(t, strings.Join(tb.logs, "\n"), "replay with Options.Timing.Seed = 7")
	tb.mu.Unlock()

	// Options that give a timing keep theirs.
	tb = &fakeTB{ctx: t.Context()}
	srv = Start(tb, WithOptions(apiserver.Options{Timing: timing.Shake(9)}))
	require.Empty(t, tb.fatal)
	assert.Equal(t, int64(9), srv.Timing().Seed)
	tb.runCleanups()

	t.Setenv(timing.Env, "slow")
	tb = &fakeTB{ctx: t.Context()}
	assert.Nil(t, Start(tb))
	assert.Contains(t, tb.fatal, `KUBEEMBED_TIMING: timing: unknown profile "slow"`)
	tb.runCleanups()
}
