package apiserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport/spdy"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/faults"
	"github.com/kubeembed/apiserver/internal/leaktest"
	"github.com/kubeembed/apiserver/storage/memory"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// way is a client of the server, over the network or in process; ct its
// content type (JSON and protobuf decode an empty list differently, so
// answers compare within a content type).
type way struct {
	name, ct string
	c        kubernetes.Interface
}

// bothWays returns clients of cfg over the network and in process, in JSON
// and in protobuf.
func bothWays(t *testing.T, srv *apiserver.Server, cfg *rest.Config) []way {
	t.Helper()
	inproc, err := srv.InProcess(cfg)
	require.NoError(t, err)
	var out []way
	for _, ct := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		for name, cfg := range map[string]*rest.Config{"network": cfg, "in-process": inproc} {
			cfg = rest.CopyConfig(cfg)
			cfg.ContentType = ct
			c, err := kubernetes.NewForConfig(cfg)
			require.NoError(t, err)
			out = append(out, way{name + " " + ct, ct, c})
		}
	}
	slices.SortFunc(out, func(a, b way) int { return strings.Compare(b.name, a.name) }) // network first
	return out
}

// answer is what a client can observe of a request's answer, without what
// differs between two equal requests (UIDs, resourceVersions, times).
func answer(obj runtime.Object, err error) any {
	if err != nil {
		if s, ok := err.(apierrors.APIStatus); ok {
			return s.Status()
		}
		return err.Error()
	}
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		cm = cm.DeepCopy()
		cm.UID, cm.ResourceVersion, cm.CreationTimestamp = "", "", metav1.Time{}
		for i := range cm.ManagedFields {
			cm.ManagedFields[i].Time = nil
		}
		return cm
	}
	if l, ok := obj.(metav1.ListInterface); ok {
		l.SetResourceVersion("") // the server's controllers write meanwhile
	}
	return obj
}

// configMapAnswers runs the same requests, in order, and keeps their
// answers: a create, a get, an update, a conflict (409), a not found
// (404), an invalid object (422 with causes), a namespace's admission
// denial, a delete.
func configMapAnswers(ctx context.Context, c kubernetes.Interface) []any {
	cms := c.CoreV1().ConfigMaps("default")
	var out []any
	created, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Data: map[string]string{"a": "1"}}, metav1.CreateOptions{})
	out = append(out, answer(created, err))
	out = append(out, answer(cms.Get(ctx, "x", metav1.GetOptions{})))
	if created == nil {
		return out
	}
	updated := created.DeepCopy()
	updated.Data["a"] = "2"
	out = append(out, answer(cms.Update(ctx, updated, metav1.UpdateOptions{})))
	created.Data["a"] = "3" // from the first resourceVersion: stale
	out = append(out, answer(cms.Update(ctx, created, metav1.UpdateOptions{})))
	out = append(out, answer(cms.Get(ctx, "missing", metav1.GetOptions{})))
	out = append(out, answer(cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "Bad_Name"}}, metav1.CreateOptions{})))
	out = append(out, answer(c.CoreV1().ConfigMaps("nowhere").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})))
	out = append(out, answer(nil, cms.Delete(ctx, "x", metav1.DeleteOptions{})))
	return out
}

// In process and over the network, in JSON and in protobuf, the same
// requests get the same answers, errors included.
func TestInProcessAnswersAsNetwork(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	first := map[string][]any{}
	for _, w := range bothWays(t, srv, srv.RESTConfig()) {
		got := configMapAnswers(t.Context(), w.c)
		require.Len(t, got, 8, w.name)
		if first[w.ct] == nil {
			first[w.ct] = got
			assert.IsType(t, &corev1.ConfigMap{}, got[2], "the update")
			for i, code := range map[int]int32{3: 409, 4: 404, 5: 422, 6: 404} {
				require.IsType(t, metav1.Status{}, got[i], "answer %d", i)
				assert.Equal(t, code, got[i].(metav1.Status).Code, "answer %d", i)
			}
			assert.NotEmpty(t, got[5].(metav1.Status).Details.Causes, "the 422 says why")
			continue
		}
		assert.Empty(t, cmp.Diff(first[w.ct], got), "%s answers differently", w.name)
	}
}

// Every kind of identity is the same user in process: the admin token, a
// client certificate with groups, a service account's token, an
// impersonated user; and a user without rights is refused alike.
func TestInProcessIdentitiesAsNetwork(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	admin, err := srv.Clientset()
	require.NoError(t, err)
	_, err = admin.CoreV1().ServiceAccounts("default").Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	alice, err := srv.RESTConfigFor(&user.DefaultInfo{Name: "alice", UID: "a-1", Groups: []string{"dev", "ops"}})
	require.NoError(t, err)
	robot, err := srv.RESTConfigForServiceAccount(t.Context(), "default", "robot")
	require.NoError(t, err)
	bob := srv.RESTConfig()
	bob.Impersonate = rest.ImpersonationConfig{UserName: "bob", Groups: []string{"qa"}, Extra: map[string][]string{"team": {"blue"}}}
	for name, cfg := range map[string]*rest.Config{"admin": srv.RESTConfig(), "alice": alice, "robot": robot, "bob": bob} {
		first := map[string][]any{}
		for _, w := range bothWays(t, srv, cfg) {
			review, err := w.c.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			require.NoError(t, err, "%s %s", name, w.name)
			got := []any{review.Status.UserInfo, answer(w.c.CoreV1().Secrets("kube-system").List(t.Context(), metav1.ListOptions{}))}
			if first[w.ct] == nil {
				first[w.ct] = got
				continue
			}
			assert.Empty(t, cmp.Diff(first[w.ct], got), "%s %s", name, w.name)
		}
		if name != "admin" {
			denied := first[runtime.ContentTypeJSON][1]
			require.IsType(t, metav1.Status{}, denied, name)
			assert.Equal(t, int32(http.StatusForbidden), denied.(metav1.Status).Code, name)
		}
	}
}

// rawAnswer is a request's answer as bytes: status, header names (values
// of Audit-Id and Date differ between any two requests) and body.
type rawAnswer struct {
	Code        int
	Header      []string
	ContentType string
	Length      string // Content-Length
	Body        string
}

func rawGet(t *testing.T, cfg *rest.Config, path, accept string) rawAnswer {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, cfg.Host+path, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", accept)
	resp, err := hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var names []string
	for k := range resp.Header {
		names = append(names, k)
	}
	slices.Sort(names)
	// Content-Length too: HTTP/2 sets it for a short answer written at
	// once, and so does the loopback.
	return rawAnswer{resp.StatusCode, names, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Length"), string(body)}
}

// The bytes of answers are the same, headers too, in JSON, protobuf and
// CBOR (which the server does not serve: 406 both ways).
func TestInProcessRawAnswersAsNetwork(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	apiservertest.WaitIdle(t, srv) // kube-root-ca.crt published, not between two GETs
	inproc := srv.InProcessRESTConfig()
	for _, path := range []string{"/api/v1/namespaces/default/configmaps/kube-root-ca.crt", "/api/v1/namespaces/default/configmaps/missing",
		"/api/v1", "/apis", "/version", "/readyz"} {
		for _, accept := range []string{"application/json", runtime.ContentTypeProtobuf, runtime.ContentTypeCBOR} {
			network := rawGet(t, srv.RESTConfig(), path, accept)
			assert.Equal(t, network, rawGet(t, inproc, path, accept), "%s as %s", path, accept)
		}
	}
}

// watchAnswers watches ConfigMaps of ns as client-go's reflector does with
// watch-list (the objects, then a bookmark), then sees a create, an
// update and a delete; and keeps what the events say.
func watchAnswers(t *testing.T, c kubernetes.Interface, ns string) []string {
	t.Helper()
	ctx := t.Context()
	cms := c.CoreV1().ConfigMaps(ns)
	// Labelled: the server's controller adds kube-root-ca.crt to the
	// namespace meanwhile.
	labels := map[string]string{"watched": "yes"}
	for _, name := range []string{"a", "b"} {
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	yes := true
	w, err := cms.Watch(ctx, metav1.ListOptions{SendInitialEvents: &yes, AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, LabelSelector: "watched=yes"})
	require.NoError(t, err)
	defer w.Stop()
	var out []string
	next := func() {
		select {
		case ev := <-w.ResultChan():
			m, err := metaOf(ev.Object)
			require.NoError(t, err)
			out = append(out, string(ev.Type)+" "+m.GetName()+" "+m.GetAnnotations()[metav1.InitialEventsAnnotationKey])
		case <-time.After(30 * time.Second):
			t.Fatalf("no event after %v", out)
		}
	}
	for range 3 {
		next()
	}
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: labels}}, metav1.CreateOptions{})
	require.NoError(t, err)
	cm.Data = map[string]string{"k": "v"}
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, cms.Delete(ctx, "c", metav1.DeleteOptions{}))
	for range 3 {
		next()
	}
	return out
}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	if s, ok := obj.(*metav1.Status); ok {
		return nil, apierrors.FromObject(s)
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, errors.New("not an object")
	}
	return m, nil
}

// Watches see the same events in the same order, bookmarks included, and
// a too old resourceVersion is 410 Gone both ways.
func TestInProcessWatchesAsNetwork(t *testing.T) {
	t.Parallel()
	// A short history: resourceVersion 1 is compacted by the time the
	// server is ready.
	backend := memory.NewBackend(memory.Options{HistoryRevisions: 10})
	t.Cleanup(func() { _ = backend.Close() })
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Storage: backend}))
	admin, err := srv.Clientset()
	require.NoError(t, err)
	var first []string
	var firstGone any
	for i, w := range bothWays(t, srv, srv.RESTConfig()) {
		ns := "w" + string(rune('a'+i))
		_, err := admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
		got := watchAnswers(t, w.c, ns)
		gone := tooOldWatch(t, w.c, ns)
		if first == nil {
			first, firstGone = got, gone
			assert.Equal(t, []string{"ADDED a ", "ADDED b ", "BOOKMARK  true", "ADDED c ", "MODIFIED c ", "DELETED c "}, got)
			require.IsType(t, metav1.Status{}, gone)
			assert.Equal(t, int32(http.StatusGone), gone.(metav1.Status).Code)
			continue
		}
		assert.Equal(t, first, got, w.name)
		assert.Empty(t, cmp.Diff(firstGone, gone), w.name)
	}
}

// tooOldWatch is the answer to a watch from resourceVersion 1: an error,
// or the error event that ends the watch.
func tooOldWatch(t *testing.T, c kubernetes.Interface, ns string) any {
	t.Helper()
	w, err := c.CoreV1().ConfigMaps(ns).Watch(t.Context(), metav1.ListOptions{ResourceVersion: "1"})
	if err != nil {
		return answer(nil, err)
	}
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		require.Equal(t, watch.Error, ev.Type)
		return answer(nil, apierrors.FromObject(ev.Object))
	case <-time.After(30 * time.Second):
		t.Fatal("no event")
		return nil
	}
}

// A request whose caller gives up ends its handler, mid-list and
// mid-watch: the recorder keeps a request when its handler returns.
func TestInProcessCancellationEndsHandler(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c, err := srv.Clientset()
	require.NoError(t, err)
	entered := make(chan struct{}, 1)
	apiservertest.InjectFault(t, srv, faults.Rule{Match: faults.Match{Verb: "list", Namespace: "slow"},
		Action: func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			entered <- struct{}{}
			<-r.Context().Done() // a list that takes as long as its caller waits
		}})
	ended := func(verb, ns string) func() bool {
		return func() bool {
			return srv.Recorder().Count(func(r faults.Record) bool { return r.Verb == verb && r.Namespace == ns }) == 1
		}
	}

	ctx, cancel := context.WithCancel(t.Context())
	listed := make(chan error, 1)
	go func() { _, err := c.CoreV1().ConfigMaps("slow").List(ctx, metav1.ListOptions{}); listed <- err }()
	<-entered
	cancel()
	require.ErrorIs(t, <-listed, context.Canceled)
	require.Eventually(t, ended("list", "slow"), 10*time.Second, time.Millisecond, "the list's handler ended")

	ctx, cancel = context.WithCancel(t.Context())
	w, err := c.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	_, err = c.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	<-w.ResultChan()
	assert.False(t, ended("watch", "default")(), "the watch runs")
	cancel()
	require.Eventually(t, ended("watch", "default"), 10*time.Second, time.Millisecond, "the watch's handler ended")
	for range w.ResultChan() { // closed
	}
}

// Faults apply to in-process clients and their requests are recorded, as
// network clients'.
func TestInProcessFaultsAndRecorder(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	apiservertest.InjectFault(t, srv, faults.Rule{Match: faults.Match{Verb: "get", Resource: "configmaps"},
		Action: faults.Fail(apierrors.NewInternalError(errors.New("injected")))})
	alice, err := srv.RESTConfigFor(&user.DefaultInfo{Name: "alice", Groups: []string{user.SystemPrivilegedGroup}})
	require.NoError(t, err)
	var first any
	for _, w := range bothWays(t, srv, alice) {
		got := answer(w.c.CoreV1().ConfigMaps("default").Get(t.Context(), "kube-root-ca.crt", metav1.GetOptions{}))
		require.IsType(t, metav1.Status{}, got, w.name)
		assert.Equal(t, int32(http.StatusInternalServerError), got.(metav1.Status).Code, w.name)
		if first == nil {
			first = got
		}
		assert.Empty(t, cmp.Diff(first, got), w.name)
	}
	records := srv.Recorder().Records(func(r faults.Record) bool { return r.Verb == "get" && r.Resource == "configmaps" })
	require.Len(t, records, 4)
	for _, r := range records {
		assert.True(t, r.Faulted)
		assert.Equal(t, "alice", r.User)
		assert.Equal(t, http.StatusInternalServerError, r.Code)
	}
}

// InProcess checks what a TLS handshake would: the configuration is for
// this server and trusts its CA; a certificate of another server's CA is
// refused by the server (401) as over the network.
func TestInProcessRefusesWhatNetworkRefuses(t *testing.T) {
	t.Parallel()
	srv, other := apiservertest.Start(t), apiservertest.Start(t)
	_, err := srv.InProcess(other.RESTConfig())
	assert.ErrorContains(t, err, "is not this server")
	untrusting := srv.RESTConfig()
	untrusting.CAData = other.CACert()
	_, err = srv.InProcess(untrusting)
	assert.ErrorContains(t, err, "does not trust the server's CA")
	_, err = srv.InProcess(&rest.Config{Host: srv.URL(), Transport: http.DefaultTransport})
	assert.Error(t, err, "a Transport of its own")

	stranger, err := other.RESTConfigFor(&user.DefaultInfo{Name: "mallory", Groups: []string{user.SystemPrivilegedGroup}})
	require.NoError(t, err)
	stranger.Host, stranger.CAData = srv.URL(), srv.CACert()
	var first any
	for _, w := range bothWays(t, srv, stranger) {
		got := answer(w.c.CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{}))
		require.IsType(t, metav1.Status{}, got, w.name)
		assert.Equal(t, int32(http.StatusUnauthorized), got.(metav1.Status).Code, w.name)
		if first == nil {
			first = got
		}
		assert.Empty(t, cmp.Diff(first, got), w.name)
	}

	again, err := srv.InProcess(srv.InProcessRESTConfig())
	require.NoError(t, err, "an in-process configuration is one already")
	assert.Equal(t, srv.URL(), again.Host)
	assert.Equal(t, srv.CACert(), again.CAData)
}

// An in-process configuration keeps the TLS fields of the configuration it
// was made from, for what reads them (a kubeconfig written from it,
// client-go's SPDY and WebSocket round trippers, which dial the server
// themselves), and its clients still go in process: no round tripper of
// theirs is a network transport. (The kubelet's exec, attach and
// port-forward tests run through in-process configurations too.)
func TestInProcessConfigKeepsTLS(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	network, err := srv.RESTConfigFor(&user.DefaultInfo{Name: "alice"})
	require.NoError(t, err)
	inproc, err := srv.InProcess(network)
	require.NoError(t, err)
	for name, cfg := range map[string]*rest.Config{"admin": srv.InProcessRESTConfig(), "alice": inproc} {
		assert.Equal(t, srv.CACert(), cfg.CAData, name)
		c, err := rest.HTTPClientFor(cfg)
		require.NoError(t, err, name)
		assert.NotContains(t, roundTripperTypes(c.Transport), "*http.Transport", name)
		assert.Contains(t, roundTripperTypes(c.Transport), "apiserver.byHost", name)
		upgrading, _, err := spdy.RoundTripperFor(cfg)
		require.NoError(t, err, name)
		assert.Contains(t, roundTripperTypes(upgrading), "*spdy.SpdyRoundTripper", name)
	}
	assert.Equal(t, network.CertData, inproc.CertData)

	// A copy given another user's certificate is that user, as over the
	// network, still in process.
	bob, err := srv.RESTConfigFor(&user.DefaultInfo{Name: "bob"})
	require.NoError(t, err)
	asBob := rest.CopyConfig(inproc)
	asBob.CertData, asBob.KeyData = bob.CertData, bob.KeyData
	for name, cfg := range map[string]*rest.Config{"alice": inproc, "bob": asBob} {
		c, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		review, err := c.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		require.NoError(t, err)
		assert.Equal(t, name, review.Status.UserInfo.Username)
		hc, err := rest.HTTPClientFor(cfg)
		require.NoError(t, err)
		assert.Contains(t, roundTripperTypes(hc.Transport), "apiserver.byHost", name)
	}

	// A copy whose Host names another server goes to that server, which
	// does not know the admin.
	other := apiservertest.Start(t)
	elsewhere := srv.InProcessRESTConfig()
	elsewhere.Host, elsewhere.CAData = other.URL(), other.CACert()
	c, err := kubernetes.NewForConfig(elsewhere)
	require.NoError(t, err)
	_, err = c.CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{})
	assert.True(t, apierrors.IsUnauthorized(err), "the other server's answer: %v", err)
	net, err := rest.HTTPClientFor(network)
	require.NoError(t, err)
	assert.Contains(t, roundTripperTypes(net.Transport), "*http.Transport", "the test sees a network transport")
}

// roundTripperTypes lists the types of rt and of the round trippers it
// wraps, outermost first.
func roundTripperTypes(rt http.RoundTripper) []string {
	var out []string
	for rt != nil {
		out = append(out, fmt.Sprintf("%T", rt))
		w, ok := rt.(utilnet.RoundTripperWrapper)
		if !ok {
			break
		}
		rt = w.WrappedRoundTripper()
	}
	return out
}

// Close ends in-process watches as it closes network connections: the
// watch just ends; and requests after it fail at once, both ways.
func TestInProcessAfterClose(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	ways := bothWays(t, srv, srv.RESTConfig())
	var watches []watch.Interface
	for _, w := range ways {
		wi, err := w.c.CoreV1().ConfigMaps("default").Watch(t.Context(), metav1.ListOptions{ResourceVersion: "0"})
		require.NoError(t, err, w.name)
		defer wi.Stop()
		watches = append(watches, wi)
	}
	require.NoError(t, srv.Close())
	for i, wi := range watches {
		deadline := time.After(10 * time.Second)
	events:
		for {
			select {
			case ev, open := <-wi.ResultChan():
				if !open {
					break events
				}
				assert.NotEqual(t, watch.Error, ev.Type, "%s: %#v", ways[i].name, ev.Object)
			case <-deadline:
				t.Fatalf("%s: the watch outlived Close", ways[i].name)
			}
		}
	}
	for _, w := range ways {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		_, err := w.c.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		cancel()
		require.Error(t, err, w.name)
		assert.NotErrorIs(t, err, context.DeadlineExceeded, "%s fails at once", w.name)
	}
}

// A client that abandons lists mid-body, watches mid-stream and requests
// before their answer, 1,000 times each, leaves no goroutine behind, while
// the server runs and after its Close.
//
// Serial on purpose, as TestNoGoroutineLeakAfterClose: goleak looks at
// every goroutine of the process.
func TestInProcessAbandonedRequestsLeaveNothing(t *testing.T) {
	warm, err := apiserver.New(apiserver.Options{})
	require.NoError(t, err)
	require.NoError(t, warm.Start(t.Context()))
	require.NoError(t, warm.Close())

	before := leaktest.IgnoreCurrent(t)
	srv, err := apiserver.New(apiserver.Options{Controllers: []controllers.Name{}})
	require.NoError(t, err)
	require.NoError(t, srv.Start(t.Context()))
	c, err := srv.Clientset()
	require.NoError(t, err)
	for i := range 100 { // a list of several writes
		_, err := c.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)},
			Data: map[string]string{"k": strings.Repeat("v", 1000)}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	abandon := func() {
		body, err := c.CoreV1().RESTClient().Get().Namespace("default").Resource("configmaps").Stream(t.Context())
		require.NoError(t, err)
		_, err = body.Read(make([]byte, 10))
		require.NoError(t, err)
		require.NoError(t, body.Close())

		w, err := c.CoreV1().ConfigMaps("default").Watch(t.Context(), metav1.ListOptions{ResourceVersion: "0"})
		require.NoError(t, err)
		<-w.ResultChan()
		w.Stop()

		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err = c.CoreV1().ConfigMaps("default").Get(ctx, "cm-0", metav1.GetOptions{})
		require.ErrorIs(t, err, context.Canceled)
	}
	abandon() // the first watch starts what serves every later one
	// The API Priority and Fairness config controller starts its two
	// workers once its informers have synced, polling every 100 ms: maybe
	// after Start returned (CI saw them appear during the loop below).
	require.Eventually(t, func() bool {
		return createdBy("k8s.io/apiserver/pkg/util/flowcontrol.(*configController).Run") == 2
	}, 30*time.Second, time.Millisecond, "the API Priority and Fairness workers")
	running := leaktest.IgnoreCurrent(t)
	for range 1000 {
		abandon()
	}
	// Idle workers of the in-process transport wait for the next request
	// (a second, or until Close: the check after Close sees none).
	idleWorkers := goleak.IgnoreTopFunction("github.com/kubeembed/apiserver/internal/inproc.(*Transport).worker")
	require.NoError(t, leaktest.Find(running, idleWorkers), "goroutines left by abandoned requests")
	require.NoError(t, srv.Close())
	leaktest.VerifyNone(t, before)
}

// A request still running at its timeout gets kube-apiserver's 504 (its
// timeout filter's Status, without kind) in process as over the network;
// one that a fault drops is an error without a status both ways.
func TestInProcessTimeoutAndAbortAsNetwork(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	apiservertest.InjectFault(t, srv, faults.Rule{Match: faults.Match{Verb: "get", Name: "slow"}, Action: faults.Delay(time.Minute)})
	apiservertest.InjectFault(t, srv, faults.Rule{Match: faults.Match{Verb: "get", Name: "dropped"}, Action: faults.DropConnection()})
	for _, w := range bothWays(t, srv, srv.RESTConfig()) {
		body, err := w.c.CoreV1().RESTClient().Get().Namespace("default").Resource("configmaps").Name("slow").
			Param("timeout", "200ms").DoRaw(t.Context())
		require.True(t, apierrors.IsTimeout(err), "%s: %v", w.name, err)
		var status map[string]any
		require.NoError(t, json.Unmarshal(body, &status), w.name)
		assert.Equal(t, map[string]any{"metadata": map[string]any{}, "status": "Failure", "code": float64(504), "reason": "Timeout",
			"message": "Timeout: request did not complete within the allotted timeout", "details": map[string]any{}}, status, w.name)

		_, err = w.c.CoreV1().ConfigMaps("default").Get(t.Context(), "dropped", metav1.GetOptions{})
		require.Error(t, err, w.name)
		_, isStatus := err.(apierrors.APIStatus)
		assert.False(t, isStatus, "%s: no answer, not a status: %v", w.name, err)
	}
}

// A request whose handler panics (kube-apiserver's own panic: server-side
// apply's converter on an IntOrString of no known type, which only a
// protobuf body can carry) is a reset stream without headers in process as
// over the network (the panic filter's 500 is not flushed before its panic
// goes on); never the timeout's 504, which the request's context, ended as
// the panic unwinds the filters, once set off.
func TestInProcessPanicAsNetwork(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "odd-port"}, Spec: corev1.ServiceSpec{
		Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.IntOrString{Type: 7}}}}}
	for _, w := range bothWays(t, srv, srv.RESTConfig()) {
		if w.ct != runtime.ContentTypeProtobuf {
			continue // JSON cannot carry the odd IntOrString
		}
		for range 3 {
			_, err := w.c.CoreV1().Services("default").Create(t.Context(), svc, metav1.CreateOptions{})
			require.Error(t, err, w.name)
			_, isStatus := err.(apierrors.APIStatus)
			assert.False(t, isStatus, "%s: a reset stream, not a status: %v", w.name, err)
			assert.Contains(t, err.Error(), "INTERNAL_ERROR; received from peer", w.name)
		}
	}
}

// createdBy counts the goroutines created by function f.
func createdBy(f string) int {
	buf := make([]byte, 1<<20)
	for {
		n := goruntime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "\ncreated by "+f+" in goroutine ")
		}
		buf = make([]byte, 2*len(buf))
	}
}
