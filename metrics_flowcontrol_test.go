package apiserver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/faults"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// metricsOf scrapes the family name from srv's /metrics (see scrape).
func metricsOf(t *testing.T, srv *apiserver.Server, name string) map[string]float64 {
	t.Helper()
	code, body := get(t, srv.RESTConfig(), "/metrics")
	require.Equal(t, http.StatusOK, code)
	return scrape(t, body, name)
}

// Priority and fairness' families count each server's own requests: a
// user's reads on one server are not the other's.
func TestFlowControlMetricsPerServer(t *testing.T) {
	t.Parallel()
	srv, other := apiservertest.Start(t), apiservertest.Start(t)
	// Until priority and fairness has digested the bootstrap FlowSchemas
	// (a server on etcd is new), alice's requests are catch-all's.
	apiservertest.WaitIdle(t, srv)
	const flow = "flow_schema=global-default,priority_level=global-default"
	before, otherBefore := metricsOf(t, srv, "apiserver_flowcontrol_dispatched_requests_total"), metricsOf(t, other, "apiserver_flowcontrol_dispatched_requests_total")
	waitsBefore := metricsOf(t, srv, "apiserver_flowcontrol_request_wait_duration_seconds")
	// An authenticated user of no other FlowSchema is global-default's;
	// forbidden or not, each request is dispatched first.
	alice := apiservertest.ClientsetFor(t, srv, "alice")
	for range 3 {
		_, err := alice.CoreV1().ConfigMaps("default").List(t.Context(), metav1.ListOptions{})
		require.True(t, apierrors.IsForbidden(err), "%v", err)
	}
	assert.Equal(t, 3.0, metricsOf(t, srv, "apiserver_flowcontrol_dispatched_requests_total")[flow]-before[flow])
	assert.Equal(t, otherBefore[flow], metricsOf(t, other, "apiserver_flowcontrol_dispatched_requests_total")[flow], "the other server's")
	waits := metricsOf(t, srv, "apiserver_flowcontrol_request_wait_duration_seconds")
	assert.Equal(t, 3.0, waits["execute=true,"+flow]-waitsBefore["execute=true,"+flow], "each waited, if not long")
	executions := metricsOf(t, srv, "apiserver_flowcontrol_request_execution_seconds")
	assert.GreaterOrEqual(t, executions[flow+",type=regular"], 3.0)
	assert.Zero(t, metricsOf(t, srv, "apiserver_flowcontrol_current_executing_requests")[flow], "all done")
	_, queued := metricsOf(t, srv, "apiserver_flowcontrol_current_inqueue_requests")[flow]
	assert.True(t, queued, "a queuing level queues every request, if only for a moment")
	assert.Contains(t, metricsOf(t, srv, "apiserver_flowcontrol_dispatched_requests_total"), "flow_schema=exempt,priority_level=exempt", "the admin's")
	inflight := metricsOf(t, srv, "apiserver_current_inflight_requests")
	assert.Contains(t, inflight, "request_kind=readOnly")
	assert.Contains(t, inflight, "request_kind=mutating")
}

// A new PriorityLevelConfiguration is in apiserver_flowcontrol_*_limit_seats
// once priority and fairness has taken it in, with upstream's arithmetic:
// 10 shares of 255 (the bootstrap levels' 245 and these) of 600 seats.
func TestFlowControlLimitSeats(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	// As kube-apiserver's /readyz, Start does not wait for the
	// configuration controller's first digest of the bootstrap levels (a
	// server that apiservertest reuses has had it): until then only the
	// mandatory levels it imagines are in force.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		nominal := metricsOf(t, srv, "apiserver_flowcontrol_nominal_limit_seats")
		assert.Equal(c, 245.0, nominal["priority_level=workload-low"], "100 shares of 245")
		assert.Equal(c, 0.0, nominal["priority_level=exempt"])
	}, 10*time.Second, 10*time.Millisecond)
	_, err := clientset(t, srv).FlowcontrolV1().PriorityLevelConfigurations().Create(t.Context(), &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "ten-shares"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: ptr(int32(10)),
				LendablePercent: ptr(int32(50)), BorrowingLimitPercent: ptr(int32(100)),
				LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	created := time.Now()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, metricsOf(t, srv, "apiserver_flowcontrol_nominal_limit_seats"), "priority_level=ten-shares")
	}, 10*time.Second, 10*time.Millisecond)
	t.Logf("in apiserver_flowcontrol_nominal_limit_seats after %v", time.Since(created))
	const level = "priority_level=ten-shares"
	assert.Equal(t, 24.0, metricsOf(t, srv, "apiserver_flowcontrol_nominal_limit_seats")[level], "ceil(600 * 10 / 255)")
	assert.Equal(t, 12.0, metricsOf(t, srv, "apiserver_flowcontrol_lower_limit_seats")[level], "less the 50% it may lend")
	assert.Equal(t, 48.0, metricsOf(t, srv, "apiserver_flowcontrol_upper_limit_seats")[level], "plus the 100% it may borrow")
	current := metricsOf(t, srv, "apiserver_flowcontrol_current_limit_seats")[level]
	assert.True(t, current >= 12 && current <= 48, "current %v within the bounds", current)
	assert.Equal(t, 236.0, metricsOf(t, srv, "apiserver_flowcontrol_nominal_limit_seats")["priority_level=workload-low"], "100 shares of 255")
}

// A level of no seats that rejects (its first request runs all the same,
// as upstream lets one through an empty level) turns the second away:
// rejected_requests_total counts it with upstream's reason.
func TestFlowControlMetricsRejected(t *testing.T) {
	t.Parallel()
	// Its counts are since the server's start.
	srv := apiservertest.Start(t, apiservertest.WithNewServer())
	pl, fs := noSeatLevel(t, srv)
	writer := slowWriter(t, srv)
	writerClient, err := kubernetes.NewForConfig(writer)
	require.NoError(t, err)
	cms := writerClient.CoreV1().ConfigMaps("slow")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, h := headers(t, writer, "/api/v1/namespaces/slow/configmaps/probe")
		assert.Equal(c, string(fs.UID), h.Get("X-Kubernetes-PF-FlowSchema-UID"), "the new configuration applies")
	}, 10*time.Second, 10*time.Millisecond)

	// The held read keeps the level's only seat, inside priority and
	// fairness, until released.
	release := make(chan struct{})
	apiservertest.InjectFault(t, srv, faults.Rule{Match: faults.Match{Verb: "get", Namespace: "slow", Name: "hold"},
		Action: func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			next.ServeHTTP(w, r)
		}})
	held := make(chan error, 1)
	go func() {
		_, err := cms.Get(context.WithoutCancel(t.Context()), "hold", metav1.GetOptions{})
		held <- err
	}()
	flow := "flow_schema=" + fs.Name + ",priority_level=" + pl.Name
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 1.0, metricsOf(t, srv, "apiserver_flowcontrol_current_executing_requests")[flow])
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, 1.0, metricsOf(t, srv, "apiserver_flowcontrol_current_executing_seats")[flow])
	// Not through client-go, which tries a 429 again up to ten times.
	code, h := headers(t, writer, "/api/v1/namespaces/slow/configmaps/next")
	require.Equal(t, http.StatusTooManyRequests, code)
	assert.NotEmpty(t, h.Get("Retry-After"))
	close(release)
	require.True(t, apierrors.IsNotFound(<-held))

	rejected := metricsOf(t, srv, "apiserver_flowcontrol_rejected_requests_total")
	assert.Equal(t, map[string]float64{flow + ",reason=concurrency-limit": 1}, rejected)
	waits := metricsOf(t, srv, "apiserver_flowcontrol_request_wait_duration_seconds")
	assert.Equal(t, 1.0, waits["execute=false,"+flow], "rejected without a queue")
	assert.Zero(t, metricsOf(t, srv, "apiserver_flowcontrol_current_executing_requests")[flow])
	for name, v := range metricsOf(t, srv, "apiserver_flowcontrol_current_limit_seats") {
		if strings.Contains(name, pl.Name) {
			assert.Zero(t, v, "no seats to lend or borrow")
		}
	}
}

// noSeatLevel makes a priority level of no seats that rejects, and a
// FlowSchema sending it slowWriter's reads of ConfigMaps in "slow".
func noSeatLevel(t *testing.T, srv *apiserver.Server) (*flowcontrolv1.PriorityLevelConfiguration, *flowcontrolv1.FlowSchema) {
	t.Helper()
	fc := clientset(t, srv).FlowcontrolV1()
	pl, err := fc.PriorityLevelConfigurations().Create(t.Context(), &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "no-seat"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: ptr(int32(0)),
				LendablePercent: ptr(int32(0)), BorrowingLimitPercent: ptr(int32(0)),
				LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return pl, slowFlow(t, srv, pl.Name, "get")
}
