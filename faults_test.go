package apiserver_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/kubeembed/apiserver/faults"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// A reconciler that updates with RetryOnConflict survives a server that
// answers half its updates with 409 Conflict: the count comes out exact,
// and the recorder shows what it cost.
func TestReconcilerSurvivesConflicts(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	cms := c.CoreV1().ConfigMaps("default")
	_, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "counter"}, Data: map[string]string{"n": "0"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.InjectFault(t, srv, faults.Rule{
		Match:       faults.Match{Verb: "update", Resource: "configmaps", Name: "counter"},
		Probability: 0.5,
		Action:      faults.Fail(apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "counter", errConflict)),
	})
	const increments = 20
	for range increments {
		// Enough attempts that 50% conflicts never exhaust them (2^-20).
		require.NoError(t, retry.RetryOnConflict(wait.Backoff{Steps: 20, Duration: time.Millisecond}, func() error {
			cm, err := cms.Get(t.Context(), "counter", metav1.GetOptions{})
			if err != nil {
				return err
			}
			n, _ := strconv.Atoi(cm.Data["n"])
			cm.Data["n"] = strconv.Itoa(n + 1)
			_, err = cms.Update(t.Context(), cm, metav1.UpdateOptions{})
			return err
		}))
	}
	cm, err := cms.Get(t.Context(), "counter", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(increments), cm.Data["n"])

	updates := faults.Matching(faults.Match{Verb: "update", Name: "counter"})
	conflicts := srv.Recorder().Count(updates, func(r faults.Record) bool { return r.Faulted })
	assert.Equal(t, increments+conflicts, srv.Recorder().Count(updates), "every update recorded, faulted or not")
	assert.Positive(t, conflicts, "half the updates conflict")
	for _, r := range srv.Recorder().Records(updates) {
		want := http.StatusOK
		if r.Faulted {
			want = http.StatusConflict
		}
		assert.Equal(t, want, r.Code)
	}
}

var errConflict = errString("the object has been modified; please apply your changes to the latest version and try again")

type errString string

func (e errString) Error() string { return string(e) }

func TestFaultsShapedAsTheServer(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	cms := c.CoreV1().ConfigMaps("default")
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "x",
		field.ErrorList{field.Invalid(field.NewPath("data"), "x", "not today")})
	remove := srv.Faults().Add(faults.Rule{Match: faults.Match{Verb: "create", Resource: "configmaps"}, Times: 1, Action: faults.Fail(invalid)})
	_, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	assert.Equal(t, "data", err.(apierrors.APIStatus).Status().Details.Causes[0].Field)
	_, err = cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	assert.NoError(t, err, "Times: 1")
	remove()

	// 429 with Retry-After, as a throttling server answers (raw: client-go
	// would wait and retry).
	srv.Faults().Add(faults.Rule{Match: faults.Match{Verb: "get", Resource: "configmaps", Name: "x"},
		Action: faults.Fail(apierrors.NewTooManyRequests("slow down", 7))})
	code, h := headers(t, srv.RESTConfig(), "/api/v1/namespaces/default/configmaps/x")
	assert.Equal(t, http.StatusTooManyRequests, code)
	assert.Equal(t, "7", h.Get("Retry-After"))
	srv.Faults().Reset()

	// Protobuf clients get a protobuf Status, as from the server.
	pcfg := srv.RESTConfig()
	pcfg.ContentType = runtime.ContentTypeProtobuf
	pc, err := kubernetes.NewForConfig(pcfg)
	require.NoError(t, err)
	apiservertest.InjectFault(t, srv, faults.Rule{Match: faults.Match{Verb: "delete", Name: "x"},
		Action: faults.Fail(apierrors.NewServiceUnavailable("maintenance"))})
	err = pc.CoreV1().ConfigMaps("default").Delete(t.Context(), "x", metav1.DeleteOptions{})
	assert.True(t, apierrors.IsServiceUnavailable(err), "%v", err)
	assert.ErrorContains(t, err, "maintenance")
}

func TestFaultsOnConnectionsListsAndWatches(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	cms := clientset(t, srv).CoreV1().ConfigMaps("default")
	for _, name := range []string{"a", "b", "c"} {
		_, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	apiservertest.InjectFault(t, srv, faults.Rule{Match: faults.Match{Verb: "list", Resource: "configmaps"},
		When: faults.HasContinue, Action: faults.ExpiredContinue()})
	page, err := cms.List(t.Context(), metav1.ListOptions{Limit: 1})
	require.NoError(t, err, "the first page is served")
	_, err = cms.List(t.Context(), metav1.ListOptions{Limit: 1, Continue: page.Continue})
	assert.True(t, apierrors.IsResourceExpired(err), "a stale continue token: %v", err)

	apiservertest.InjectFault(t, srv, faults.Rule{Match: faults.Match{Verb: "watch", Resource: "configmaps"}, Times: 1, Action: faults.EndWatch()})
	w, err := cms.Watch(t.Context(), metav1.ListOptions{ResourceVersion: page.ResourceVersion})
	require.NoError(t, err)
	_, open := <-w.ResultChan()
	assert.False(t, open, "the watch ends at once, without events")

	// A 410 Gone event, to JSON and protobuf watchers alike.
	for _, contentType := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		cfg := srv.RESTConfig()
		cfg.ContentType = contentType
		c, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		apiservertest.InjectFault(t, srv, faults.Rule{Match: faults.Match{Verb: "watch", Resource: "configmaps"}, Times: 1, Action: faults.WatchGone()})
		w, err := c.CoreV1().ConfigMaps("default").Watch(t.Context(), metav1.ListOptions{ResourceVersion: page.ResourceVersion})
		require.NoError(t, err)
		ev, ok := <-w.ResultChan()
		require.True(t, ok, contentType)
		assert.Equal(t, watch.Error, ev.Type, contentType)
		assert.True(t, apierrors.IsResourceExpired(apierrors.FromObject(ev.Object)), "%s: %v", contentType, ev.Object)
		_, open := <-w.ResultChan()
		assert.False(t, open, "then the watch ends")
	}

	apiservertest.InjectFault(t, srv, faults.Rule{Match: faults.Match{Verb: "get", Name: "a"}, Times: 1, Action: faults.DropConnection()})
	_, err = cms.Get(t.Context(), "a", metav1.GetOptions{})
	require.Error(t, err)
	_, isStatus := err.(apierrors.APIStatus)
	assert.False(t, isStatus, "no answer, not a status: %v", err)
	rec := srv.Recorder().Records(faults.Matching(faults.Match{Verb: "get", Name: "a"}))
	require.NotEmpty(t, rec)
	assert.True(t, rec[0].Faulted)
}

func TestRecorder(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	cms := clientset(t, srv).CoreV1().ConfigMaps("default")
	srv.Recorder().KeepBodies(true)
	_, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
		metav1.CreateOptions{FieldManager: "my-controller", DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err)
	_, err = cms.List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)

	writes := srv.Recorder().Records(faults.Writes)
	require.Len(t, writes, 1)
	w := writes[0]
	assert.Equal(t, faults.Request{Verb: "create", Resource: "configmaps", Namespace: "default", Path: "/api/v1/namespaces/default/configmaps",
		User: "kubeembed-admin", Groups: w.Groups, FieldManager: "my-controller", DryRun: true}, w.Request)
	assert.Equal(t, http.StatusCreated, w.Code)
	assert.Contains(t, string(w.RequestBody), "ConfigMap", "the body as sent (protobuf)")
	assert.Contains(t, string(w.ResponseBody), "default", "the object as stored")
	assert.Equal(t, 1, srv.Recorder().Count(faults.Matching(faults.Match{Verb: "list", Resource: "configmaps"})))
	unbounded := func(r faults.Record) bool { return r.Verb == "list" && r.ResourceVersion == "" }
	assert.Equal(t, 1, srv.Recorder().Count(unbounded), "a list without a resourceVersion")
	assert.Zero(t, srv.Recorder().Count(faults.Writes, faults.Not(faults.Matching(faults.Match{FieldManager: "my-controller"}))),
		"every write used the field manager")
	for _, r := range srv.Recorder().Records() {
		assert.NotEqual(t, "system:apiserver", r.User, "the server's own requests are not recorded")
	}
	srv.Recorder().Reset()
	assert.Zero(t, srv.Recorder().Count())
}
