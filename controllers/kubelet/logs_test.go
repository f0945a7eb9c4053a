package kubelet_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// stamp is how the kubelet prefixes a line written at t (timestamps=true).
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000000Z07:00") + " " }

func TestLogs(t *testing.T) {
	t.Parallel()
	e := start(t)
	// Logged before the container starts: its first instance's.
	e.k.SetLogs("default", "p", "app", "one\ntwo\n")
	e.runningPod(t, simplePod("p"))
	t0 := e.clock.Now()
	e.clock.Step(2 * time.Minute)
	e.k.AppendLog("default", "p", "app", "three") // a newline is added
	t1 := e.clock.Now()

	for name, tc := range map[string]struct {
		opts *corev1.PodLogOptions
		want string
	}{
		"all":          {&corev1.PodLogOptions{}, "one\ntwo\nthree\n"},
		"container":    {&corev1.PodLogOptions{Container: "app"}, "one\ntwo\nthree\n"},
		"tailLines":    {&corev1.PodLogOptions{TailLines: ptr.To[int64](2)}, "two\nthree\n"},
		"tailLines 0":  {&corev1.PodLogOptions{TailLines: ptr.To[int64](0)}, ""},
		"limitBytes":   {&corev1.PodLogOptions{LimitBytes: ptr.To[int64](6)}, "one\ntw"},
		"timestamps":   {&corev1.PodLogOptions{Timestamps: true, TailLines: ptr.To[int64](2)}, stamp(t0) + "two\n" + stamp(t1) + "three\n"},
		"sinceSeconds": {&corev1.PodLogOptions{SinceSeconds: ptr.To[int64](60)}, "three\n"},
		"sinceTime":    {&corev1.PodLogOptions{SinceTime: ptr.To(metav1.NewTime(t0.Add(time.Minute)))}, "three\n"},
		"limit with timestamps": {&corev1.PodLogOptions{Timestamps: true, LimitBytes: ptr.To[int64](10)},
			stamp(t0)[:10]},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := e.logs(t, "p", tc.opts)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestLogsFollow(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.runningPod(t, simplePod("p"))
	e.k.SetLogs("default", "p", "app", "before\n")

	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	stream, err := e.client.CoreV1().Pods("default").GetLogs("p", &corev1.PodLogOptions{Follow: true}).Stream(ctx)
	require.NoError(t, err)
	defer stream.Close()
	lines := bufio.NewReader(stream)
	readLine := func() string {
		l, err := lines.ReadString('\n')
		require.NoError(t, err)
		return l
	}
	assert.Equal(t, "before\n", readLine())
	e.k.AppendLog("default", "p", "app", "during 1\nduring 2\n")
	assert.Equal(t, "during 1\n", readLine())
	assert.Equal(t, "during 2\n", readLine())

	// The container ends (and restarts): the log of its instance ends.
	e.k.AppendLog("default", "p", "app", "last words\n")
	require.NoError(t, e.k.Exit(ctx, "default", "p", "app", 1))
	rest, err := io.ReadAll(lines)
	require.NoError(t, err)
	assert.Equal(t, "last words\n", string(rest))
}

func TestLogsPrevious(t *testing.T) {
	t.Parallel()
	e := start(t)
	pod := e.runningPod(t, simplePod("p"))
	_, err := e.logs(t, "p", &corev1.PodLogOptions{Previous: true})
	assertStatus(t, err, http.StatusBadRequest, `previous terminated container "app" in pod "p" not found`)

	e.k.SetLogs("default", "p", "app", "first run\n")
	require.NoError(t, e.k.Exit(t.Context(), "default", "p", "app", 2))
	e.waitPod(t, pod, func(p *corev1.Pod) bool {
		s := status(p, "app")
		return s.RestartCount == 1 && s.State.Running != nil
	})
	e.k.AppendLog("default", "p", "app", "second run\n")

	previous, err := e.logs(t, "p", &corev1.PodLogOptions{Previous: true})
	require.NoError(t, err)
	assert.Equal(t, "first run\n", previous)
	current, err := e.logs(t, "p", &corev1.PodLogOptions{})
	require.NoError(t, err)
	assert.Equal(t, "second run\n", current)
}

func TestLogsOfAWaitingContainer(t *testing.T) {
	t.Parallel()
	e := start(t)
	// The node's runtime is down: the kubelet admits the pod but cannot
	// create its containers.
	require.NoError(t, e.k.SetNodeReady(t.Context(), "node-0", false, ""))
	e.createPod(t, simplePod("p"))
	_, err := e.logs(t, "p", &corev1.PodLogOptions{})
	assertStatus(t, err, http.StatusBadRequest, `container "app" in pod "p" is waiting to start: ContainerCreating`)
}

// assertStatus checks that err is the API's Status with code and message.
func assertStatus(t *testing.T, err error, code int32, message string) {
	t.Helper()
	var status apierrors.APIStatus
	require.ErrorAs(t, err, &status)
	assert.Equal(t, code, status.Status().Code, "code of %q", err)
	assert.Equal(t, message, status.Status().Message)
}
