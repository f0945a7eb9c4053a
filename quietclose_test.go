package apiserver_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeembed/apiserver"
)

// quietChild names the environment variable that makes
// TestCloseIsQuiet's process the child that runs the servers.
const quietChild = "KUBEEMBED_QUIET_CLOSE_CHILD"

// TestCloseIsQuiet closes servers while their controllers are busy (right
// after Start, with objects just written) and checks that nothing was
// logged as an error: neither on stderr, where the libraries' klog output
// goes, nor through the servers' loggers. The servers run in a child
// process of the test binary, whose stderr is the test's alone.
func TestCloseIsQuiet(t *testing.T) {
	if os.Getenv(quietChild) != "" {
		runBusyServers(t)
		return
	}
	t.Parallel()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestCloseIsQuiet$", "-test.count=1")
	cmd.Env = append(os.Environ(), quietChild+"=1")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	require.NoError(t, cmd.Run(), "%s", stderr.String())
	// Not even k8s.io/apiserver's API Priority and Fairness config
	// controller, which writes its flow schemas' status in goroutines no
	// one can wait for: a server closed while it does (a few ms after
	// Start) made it log "failed to set a status.condition for FlowSchema
	// ...: inproc: transport closed" (internal/globals drops it).
	assert.NotContains(t, stderr.String(), "ERROR", "an error logged while servers closed")
}

func runBusyServers(t *testing.T) {
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()),
		zapcore.Lock(os.Stderr), zapcore.WarnLevel)) // Close's own warnings too
	for i := range 5 {
		srv, err := apiserver.New(apiserver.Options{Logger: log})
		require.NoError(t, err)
		require.NoError(t, srv.Start(context.Background()))
		c, err := srv.Clientset()
		require.NoError(t, err)
		ns, err := c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("busy-", i)}}, metav1.CreateOptions{})
		require.NoError(t, err)
		for j := range 20 {
			_, err := c.CoreV1().ConfigMaps(ns.Name).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("c-", j)}}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		require.NoError(t, c.CoreV1().Namespaces().Delete(t.Context(), ns.Name, metav1.DeleteOptions{}))
		closeWithin(t, srv, 5*time.Second)
	}
}

// closeWithin closes srv; if that takes longer than d (Close's own waits
// are 5 s each: one ran out, a hang), it prints every goroutine and fails.
func closeWithin(t *testing.T, srv *apiserver.Server, d time.Duration) {
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-time.After(d):
			_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
			t.Errorf("Close took longer than %v", d)
		}
	}()
	require.NoError(t, srv.Close())
	close(done)
}
