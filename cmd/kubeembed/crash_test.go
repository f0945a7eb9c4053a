package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// crashWrites and crashClients are the workload of one round: writes from
// concurrent clients, each on a connection of its own.
const (
	crashWrites  = 1000
	crashClients = 8
)

// buildCLI builds the command into a temporary directory and returns the
// binary's path.
func buildCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kubeembed")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())
	return bin
}

// cliProcess is the command running as a child process.
type cliProcess struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	ready  chan struct{} // closed when it prints its ready line
	exited chan struct{} // closed when it has exited
	err    error         // its exit, once exited is closed
}

func startCLI(t *testing.T, bin string, args ...string) *cliProcess {
	t.Helper()
	p := &cliProcess{cmd: exec.Command(bin, args...), stderr: &lockedBuffer{}, ready: make(chan struct{}), exited: make(chan struct{})}
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	p.cmd.Stderr = p.stderr
	require.NoError(t, p.cmd.Start())
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			if strings.Contains(s.Text(), "serving") {
				close(p.ready)
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout) // until it exits
	}()
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(p.kill)
	return p
}

// waitReady waits for the ready line; the process exiting first, or no
// line within a minute, fails the test with its log.
func (p *cliProcess) waitReady(t *testing.T) {
	t.Helper()
	select {
	case <-p.ready:
	case <-p.exited:
		t.Fatalf("kubeembed exited before serving: %v\n%s", p.err, p.stderr.String())
	case <-time.After(time.Minute):
		t.Fatalf("kubeembed did not serve within a minute\n%s", p.stderr.String())
	}
}

// kill is kill -9 (the process gets no chance to flush or close
// anything); it returns once the process is gone.
func (p *cliProcess) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// acked is what the server acknowledged: ConfigMaps created, and per
// client the last value of its counter ConfigMap the server accepted (a
// client updates its counter with increasing values, one at a time).
type acked struct {
	mu       sync.Mutex
	acks     int // writes acknowledged, creates and updates
	created  []string
	counters [crashClients]int // highest acknowledged value
	tried    [crashClients]int // highest value sent
}

// crashKills is the number of kills: KUBEEMBED_CRASH_KILLS, or 3 (the
// short form CI runs, ~40 s).
func crashKills(t *testing.T) int {
	if v := os.Getenv("KUBEEMBED_CRASH_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "KUBEEMBED_CRASH_KILLS")
		return n
	}
	return 3
}

// The CLI on --data-dir survives kill -9 (issue 27): the process is
// killed at random points, while crashWrites writes from crashClients
// clients are in flight or while it starts, and restarted on the same
// directory. After each restart it serves, every write acknowledged
// before any kill is there (a created ConfigMap exists; an updated one
// holds the acknowledged value or a later one the server received), and
// the kubeconfig and a service account token of the first start work.
// KUBEEMBED_CRASH_KILLS=20 is the full form; KUBEEMBED_CRASH_SEED
// replays a run.
func TestCLICrashSafety(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("KUBEEMBED_CRASH_SEED"); v != "" {
		var err error
		seed, err = strconv.ParseUint(v, 10, 64)
		require.NoError(t, err)
	}
	t.Logf("KUBEEMBED_CRASH_SEED=%d", seed)
	rnd := rand.New(rand.NewPCG(seed, 0))
	bin := buildCLI(t)
	dir, kc := t.TempDir(), filepath.Join(t.TempDir(), "kc")
	args := []string{"--data-dir", dir, "--kubeconfig", kc, "--nodes", "0"}

	// Kill 1 is during the first start: etcd makes its member, the server
	// its keys, its token and its port file.
	t.Logf("kill 1: %v after the first start", killDuringStart(t, bin, args, rnd))
	p := startCLI(t, bin, args...)
	p.waitReady(t)
	first, err := os.ReadFile(kc)
	require.NoError(t, err)
	c := crashClient(t, kc, "")
	_, err = c.CoreV1().ServiceAccounts("default").Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "crash"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	tr, err := c.CoreV1().ServiceAccounts("default").CreateToken(t.Context(), "crash", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	require.NoError(t, err)

	var state acked
	kills := crashKills(t)
	for round := 1; round < kills; round++ {
		if round > 1 && rnd.IntN(4) == 0 {
			// While it starts: etcd replays its log, the server writes
			// its port and kubeconfig and its bootstrap objects.
			t.Logf("kill %d: %v after the start", round+1, killDuringStart(t, bin, args, rnd))
		} else {
			if round > 1 {
				p = startCLI(t, bin, args...)
				p.waitReady(t)
			}
			at := rnd.IntN(crashWrites)
			crashRound(t, kc, round, at, &state, p)
			t.Logf("kill %d: at the %dth acknowledged write (%d creates acknowledged so far)", round+1, at+1, len(state.created))
		}
		p = startCLI(t, bin, args...)
		p.waitReady(t)
		checkAcked(t, kc, &state)
		checkCredentials(t, first, tr.Status.Token)
		p.kill()
	}
	t.Logf("%d kills, %d writes acknowledged (%d creates), all present", kills, state.acks, len(state.created))
}

// killDuringStart starts the command and kills it at a random point of
// its first two seconds (a start takes ~1 s here), or once it is serving;
// it returns when it was killed.
func killDuringStart(t *testing.T, bin string, args []string, rnd *rand.Rand) time.Duration {
	t.Helper()
	p := startCLI(t, bin, args...)
	delay := time.Duration(rnd.IntN(2000)) * time.Millisecond
	select {
	case <-time.After(delay): // the random kill point, not a wait for a condition
	case <-p.exited:
		t.Fatalf("kubeembed exited: %v\n%s", p.err, p.stderr.String())
	}
	p.kill()
	return delay
}

// crashClient is a client of the kubeconfig; a token replaces its
// credentials when given. Not throttled: the writes are meant to pile up.
func crashClient(t *testing.T, kubeconfig, token string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	cfg.QPS = -1
	if token != "" {
		cfg.BearerToken = token
	}
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return c
}

// crashRound runs crashWrites writes and kills p once `at` of them were
// acknowledged; writes in flight then fail and are not recorded.
func crashRound(t *testing.T, kc string, round, at int, state *acked, p *cliProcess) {
	t.Helper()
	var acks, sent atomic.Int64
	killed := make(chan struct{})
	var once sync.Once
	ack := func() {
		if acks.Add(1) == int64(at)+1 {
			once.Do(func() { p.kill(); close(killed) })
		}
	}
	var wg sync.WaitGroup
	for w := range crashClients {
		c := crashClient(t, kc, "")
		wg.Go(func() {
			for sent.Add(1) <= crashWrites {
				select {
				case <-killed:
					return
				default:
				}
				crashWrite(t.Context(), c, round, w, state, ack)
			}
		})
	}
	wg.Wait()
	once.Do(func() { p.kill(); close(killed) })
	state.acks += int(acks.Load())
}

// crashWrite makes one write of client w: a create, or an update of the
// client's counter (created by its first update).
func crashWrite(ctx context.Context, c kubernetes.Interface, round, w int, state *acked, ack func()) {
	cms := c.CoreV1().ConfigMaps("default")
	state.mu.Lock()
	state.tried[w]++
	v := state.tried[w]
	state.mu.Unlock()
	if v%2 == 0 {
		name := fmt.Sprintf("r%d-c%d-%d", round, w, v)
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err == nil {
			state.mu.Lock()
			state.created = append(state.created, name)
			state.mu.Unlock()
			ack()
		}
		return
	}
	counter := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("counter-%d", w)}, Data: map[string]string{"v": strconv.Itoa(v)}}
	_, err := cms.Update(ctx, counter, metav1.UpdateOptions{}) // no resourceVersion: unconditional
	if err != nil && strings.Contains(err.Error(), "not found") {
		_, err = cms.Create(ctx, counter, metav1.CreateOptions{})
	}
	if err == nil {
		state.mu.Lock()
		state.counters[w] = max(state.counters[w], v)
		state.mu.Unlock()
		ack()
	}
}

// checkAcked asserts every acknowledged write is in the restarted server.
func checkAcked(t *testing.T, kc string, state *acked) {
	t.Helper()
	list, err := crashClient(t, kc, "").CoreV1().ConfigMaps("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	have := map[string]corev1.ConfigMap{}
	for _, cm := range list.Items {
		have[cm.Name] = cm
	}
	missing := 0
	for _, name := range state.created {
		if _, ok := have[name]; !ok {
			missing++
		}
	}
	assert.Zero(t, missing, "acknowledged creates missing after kill -9, of %d", len(state.created))
	for w, v := range state.counters {
		if v == 0 {
			continue
		}
		got, err := strconv.Atoi(have[fmt.Sprintf("counter-%d", w)].Data["v"])
		require.NoError(t, err, "counter-%d", w)
		assert.GreaterOrEqual(t, got, v, "counter-%d: an acknowledged update lost", w)
		assert.LessOrEqual(t, got, state.tried[w], "counter-%d: a value never sent", w)
	}
}

// checkCredentials uses the kubeconfig and the service account token of
// the first start.
func checkCredentials(t *testing.T, kubeconfig []byte, token string) {
	t.Helper()
	old := filepath.Join(t.TempDir(), "kc")
	require.NoError(t, os.WriteFile(old, kubeconfig, 0o600))
	_, err := crashClient(t, old, "").CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{})
	require.NoError(t, err, "the first start's kubeconfig")
	review, err := crashClient(t, old, token).AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err, "the first start's service account token")
	assert.Equal(t, "system:serviceaccount:default:crash", review.Status.UserInfo.Username)
}

// mountTmpfs mounts a tmpfs of size (mount's syntax: "64m") on a new
// directory, unmounted at the test's end; the test is skipped where it
// cannot mount (not root).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount a tmpfs (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	return dir
}

func resizeTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	out, err := exec.Command("mount", "-o", "remount,size="+size, dir).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// A full disk under --data-dir (a tmpfs): the CLI refuses to start on
// less room than etcd's write-ahead log takes, saying so; on some room, the
// write that does not fit is refused as kube-apiserver on etcd refuses it
// (etcd's NOSPACE alarm: 500, "etcdserver: mvcc: database space
// exceeded"), the server keeps serving reads, deletes and /readyz, and
// stops cleanly; restarted with more room it takes writes again, with
// every acknowledged object there. (Without the quota etcd set from the
// room, etcd's "failed to commit tx: no space left on device" was fatal
// to the whole process.)
func TestCLIDataDirFullDisk(t *testing.T) {
	t.Parallel()
	mnt := mountTmpfs(t, "64m")
	dir, kc := filepath.Join(mnt, "data"), filepath.Join(t.TempDir(), "kc")
	args := []string{"--data-dir", dir, "--kubeconfig", kc, "--nodes", "0"}
	err := run(t.Context(), args, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "MiB free on the data directory's filesystem: etcd needs")

	resizeTmpfs(t, mnt, "320m")
	log := &lockedBuffer{}
	stop := runLogging(t, log, args...)
	c := crashClient(t, kc, "")
	cms := c.CoreV1().ConfigMaps("default")
	big := strings.Repeat("x", 900<<10)
	var created []string
	for i := 0; ; i++ {
		require.Less(t, i, 400, "the disk never filled")
		name := fmt.Sprintf("big-%d", i)
		_, err = cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": big}}, metav1.CreateOptions{})
		if err != nil {
			break
		}
		created = append(created, name)
	}
	var status apierrors.APIStatus
	require.ErrorAs(t, err, &status)
	assert.Equal(t, int32(http.StatusInternalServerError), status.Status().Code)
	assert.Equal(t, "etcdserver: mvcc: database space exceeded", status.Status().Message)
	t.Logf("%d ConfigMaps of 900 KiB written before the refusal", len(created))
	_, err = cms.Get(t.Context(), created[0], metav1.GetOptions{})
	require.NoError(t, err, "reads are served")
	require.NoError(t, cms.Delete(t.Context(), created[0], metav1.DeleteOptions{}), "deletes are served")
	created = created[1:]
	body, err := c.CoreV1().RESTClient().Get().AbsPath("/readyz").DoRaw(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "ok", string(body))
	stop()
	assert.NotRegexp(t, `FATAL|panic`, log.String())

	resizeTmpfs(t, mnt, "640m")
	runUntilServing(t, args...)
	_, err = cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}, Data: map[string]string{"k": big}}, metav1.CreateOptions{})
	require.NoError(t, err, "with more room, writes are taken again")
	list, err := cms.List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	have := map[string]bool{}
	for _, cm := range list.Items {
		have[cm.Name] = cm.Data["k"] == big || cm.Name == "kube-root-ca.crt"
	}
	for _, name := range append(created, "after") {
		assert.True(t, have[name], "%s is there, whole", name)
	}
}
