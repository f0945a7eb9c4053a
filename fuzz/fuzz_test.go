// Package fuzz_test holds Go native fuzz targets on the request path of a
// running server: request bodies, patches, list and watch query
// parameters, CRD schemas, and the manifest files of Options.CRDPaths and
// Options.RBACPaths.
//
// Every target holds one property: a malformed or hostile input gets a 2xx,
// or a 4xx whose body is a metav1.Status with a message; never a 5xx, a
// panic, an answer later than requestTimeout, or goroutines left behind,
// and the server still answers /readyz. Each target function starts one
// server, which all its iterations share, and reaches it in process
// (Server.InProcess): no TCP or TLS, the same handler chain.
//
// go test ./fuzz/ runs the seeds (f.Add and testdata/fuzz/<Target>/);
// hack/fuzz.sh fuzzes each target for FUZZTIME.
package fuzz_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/inproc"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

const (
	// requestTimeout is how long an answer may take: kube-apiserver's own
	// limit is 60 s, but nothing here should take more than a few ms, and a
	// list at a resourceVersion ahead of the server's waits 3 s before its
	// 504 (see allowed5xx).
	requestTimeout = 10 * time.Second
	// checkEvery is how many iterations pass between health checks
	// (/readyz and the goroutine count); the seeds-only run checks once,
	// at the end.
	checkEvery = 200
	// goroutineSlack is how many goroutines above the count after start-up
	// the server may run at a check (informer resyncs, a CRD being torn
	// down): a leak of one per request passes it within one checkEvery.
	goroutineSlack = 60
	// ns is the namespace the targets write in.
	ns = "fuzz"
)

// fixture is the server of one target function and an HTTP client of it.
type fixture struct {
	client *http.Client
	base   string
	iter   atomic.Int64
	// goroutines is the count after start-up, to which the count must come
	// back (within goroutineSlack).
	goroutines int
}

// start starts the server of a target: no controllers and no nodes, so
// that nothing but the fuzzer writes and each input meets the same state;
// the widgets CRD (a structural schema with CEL rules) and namespace ns.
func start(f *testing.F) *fixture {
	f.Helper()
	srv := apiservertest.Start(f, apiservertest.WithOptions(apiserver.Options{
		Controllers: []controllers.Name{},
		Nodes:       []controllers.Node{},
		CRDs:        []*apiextensionsv1.CustomResourceDefinition{widgetCRD(f)},
	}))
	client, err := httpClient(srv)
	if err != nil {
		f.Fatalf("client: %v", err)
	}
	fx := &fixture{client: client, base: srv.URL()}
	fx.must(f, http.MethodPost, "/api/v1/namespaces", "application/json",
		[]byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+ns+`"}}`))
	// Pods need it: ServiceAccount admission, without the controller that
	// would create it.
	fx.must(f, http.MethodPost, "/api/v1/namespaces/"+ns+"/serviceaccounts", "application/json",
		[]byte(`{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"default"}}`))
	fx.goroutines = runtime.NumGoroutine()
	// Cleanups run last-in first-out: this one before the server closes.
	f.Cleanup(func() {
		if err := fx.healthy(); err != nil {
			f.Errorf("after %d iterations: %v", fx.iter.Load(), err)
		}
	})
	return fx
}

// httpClient is an admin's HTTP client of srv, in process.
func httpClient(srv *apiserver.Server) (*http.Client, error) {
	return rest.HTTPClientFor(srv.InProcessRESTConfig())
}

// answer is what the server answered to one request.
type answer struct {
	what    string // method and path, for messages
	code    int
	body    []byte
	bodyErr error // the stream was reset (the handler panicked) with it
}

// do sends one request; a transport error, including no answer within
// requestTimeout, fails the test.
func (fx *fixture) do(t testing.TB, method, path, contentType string, body []byte) answer {
	t.Helper()
	a, err := fx.send(method, path, contentType, body, nil)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return a
}

// send sends one request with the headers hdr (key, value pairs).
func (fx *fixture) send(method, path, contentType string, body []byte, hdr []string) (answer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	a := answer{what: method + " " + path}
	req, err := http.NewRequestWithContext(ctx, method, fx.base+path, bytes.NewReader(body))
	if err != nil {
		// Not the server's concern: a path the client cannot send.
		return answer{what: a.what, code: http.StatusBadRequest, body: statusJSON(err)}, nil
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := fx.client.Do(req)
	if errors.Is(err, inproc.ErrAborted) { // the handler panicked before it answered
		a.bodyErr = err
		return a, nil
	}
	if err != nil {
		return a, fmt.Errorf("%s: no answer within %v: %w", a.what, requestTimeout, err)
	}
	defer resp.Body.Close()
	a.code = resp.StatusCode
	a.body, a.bodyErr = io.ReadAll(resp.Body)
	return a, nil
}

// statusJSON is a Status for a request that could not be sent.
func statusJSON(err error) []byte {
	b, _ := json.Marshal(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Message: err.Error(), Code: http.StatusBadRequest})
	return b
}

// must sends a request that has to succeed: the targets' own setup.
func (fx *fixture) must(t testing.TB, method, path, contentType string, body []byte) answer {
	t.Helper()
	a := fx.do(t, method, path, contentType, body)
	if a.code/100 != 2 {
		t.Fatalf("%s: %d %s", a.what, a.code, a.body)
	}
	return a
}

// check fails t unless a is a 2xx, or a 4xx with a Status of the same
// code and a message.
func check(t testing.TB, a answer) {
	t.Helper()
	if err := a.err(); err != nil {
		t.Fatalf("%v", err)
	}
}

func (a answer) err() error {
	switch {
	case a.bodyErr != nil:
		return fmt.Errorf("%s: %d, reading the body: %w", a.what, a.code, a.bodyErr)
	case a.code/100 == 2:
		return nil
	case a.code/100 != 4:
		return fmt.Errorf("%s: %d (want 2xx or 4xx): %.2000s", a.what, a.code, a.body)
	}
	var st metav1.Status
	if err := json.Unmarshal(a.body, &st); err != nil || st.Kind != "Status" {
		return fmt.Errorf("%s: %d without a Status body (%v): %.2000s", a.what, a.code, err, a.body)
	}
	if st.Message == "" || int(st.Code) != a.code {
		return fmt.Errorf("%s: %d with a Status of code %d and message %q", a.what, a.code, st.Code, st.Message)
	}
	return nil
}

// status is the Status of a 4xx answer (zero for another).
func (a answer) status() metav1.Status {
	var st metav1.Status
	_ = json.Unmarshal(a.body, &st)
	return st
}

// done ends an iteration: every checkEvery iterations, the server must
// still be ready and its goroutines back to their count after start-up.
func (fx *fixture) done(t testing.TB) {
	t.Helper()
	if fx.iter.Add(1)%checkEvery != 0 {
		return
	}
	if err := fx.healthy(); err != nil {
		t.Fatalf("after %d iterations: %v", fx.iter.Load(), err)
	}
}

// healthy reports whether /readyz answers ok and the goroutine count comes
// back within goroutineSlack of its count after start-up, waiting up to
// requestTimeout for what requests left running to end (a watch's
// goroutines end after its client closes it).
func (fx *fixture) healthy() error {
	a, err := fx.send(http.MethodGet, "/readyz", "", nil, nil)
	if err != nil {
		return err
	}
	if a.code != http.StatusOK {
		return fmt.Errorf("/readyz: %d %s", a.code, a.body)
	}
	deadline := time.Now().Add(requestTimeout)
	for n := runtime.NumGoroutine(); n > fx.goroutines+goroutineSlack; n = runtime.NumGoroutine() {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			return fmt.Errorf("%d goroutines, %d after start-up:\n%s", n, fx.goroutines,
				buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond) // polling a count nothing signals
	}
	return nil
}

// printed gets the object just created (body) as a Table, as kubectl get
// does: every object the server stores prints, whatever its fields.
func (fx *fixture) printed(t testing.TB, collection string, body []byte) {
	t.Helper()
	var obj metav1.PartialObjectMetadata
	if json.Unmarshal(body, &obj) != nil || obj.Name == "" {
		return
	}
	path := strings.TrimSuffix(collection, "/") + "/" + url.PathEscape(obj.Name)
	a, err := fx.send(http.MethodGet, path, "", nil, []string{"Accept", tableAccept})
	if err != nil {
		t.Fatalf("%v", err)
	}
	if a.code != http.StatusOK {
		t.Fatalf("%s as a Table: %d (want 200): %.2000s", a.what, a.code, a.body)
	}
}

// remove deletes the object a write answered with (body), below
// collection, its finalizers first, and returns once it is gone, so that
// the next input meets the same state; the deletion's answers must hold
// the property too.
func (fx *fixture) remove(t testing.TB, collection string, body []byte) {
	t.Helper()
	var obj struct {
		Metadata struct {
			Name       string   `json:"name"`
			Finalizers []string `json:"finalizers"`
		} `json:"metadata"`
	}
	if json.Unmarshal(body, &obj) != nil || obj.Metadata.Name == "" {
		return
	}
	collection = strings.TrimSuffix(collection, "/")
	path := collection + "/" + url.PathEscape(obj.Metadata.Name)
	if len(obj.Metadata.Finalizers) > 0 {
		check(t, fx.do(t, http.MethodPatch, path, "application/merge-patch+json",
			[]byte(`{"metadata":{"finalizers":null}}`)))
	}
	// Background: the orphan finalizer a ReplicationController's or a
	// Job's delete adds by default waits for a garbage collector, which
	// the fixture does not run.
	a := fx.do(t, http.MethodDelete, path+"?gracePeriodSeconds=0&propagationPolicy=Background", "", nil)
	switch {
	case a.code == http.StatusNotFound:
	case a.code/100 != 2:
		check(t, a)
	case collection == "/api/v1/namespaces":
		fx.finalizeNamespace(t, path, a.body)
	default:
		fx.waitGone(t, collection, obj.Metadata.Name)
	}
}

// waitGone returns once the object name below collection is gone: its
// delete may leave it to a finalizer of the server's own (a CRD's
// customresourcecleanup, which apiextensions' finalizing controller
// removes once the custom resources are deleted: 2-20 ms here).
func (fx *fixture) waitGone(t testing.TB, collection, name string) {
	t.Helper()
	got := fx.do(t, http.MethodGet, collection+"/"+url.PathEscape(name), "", nil)
	if got.code == http.StatusNotFound {
		return
	}
	check(t, got)
	var obj metav1.PartialObjectMetadata
	if err := json.Unmarshal(got.body, &obj); err != nil {
		t.Fatalf("%s: %v", got.what, err)
	}
	q := url.Values{"watch": {"true"}, "resourceVersion": {obj.ResourceVersion},
		"fieldSelector": {fields.OneTermEqualSelector("metadata.name", name).String()}}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fx.base+collection+"?"+q.Encode(), nil)
	if err != nil {
		t.Fatalf("%v", err)
	}
	resp, err := fx.client.Do(req)
	if err != nil {
		t.Fatalf("watching %s/%s: %v", collection, name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watching %s/%s: %d", collection, name, resp.StatusCode)
	}
	for dec := json.NewDecoder(resp.Body); ; {
		var ev metav1.WatchEvent
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("%s/%s still there %v after its DELETE: %v", collection, name, requestTimeout, err)
		}
		if ev.Type == "DELETED" {
			return
		}
	}
}

// finalizeNamespace removes the namespace at path, which its DELETE
// (answered ns) only marked Terminating: the namespace controller's last
// step, which no controller of the fixture takes, empties its
// spec.finalizers through /finalize, and the namespace goes.
func (fx *fixture) finalizeNamespace(t testing.TB, path string, ns []byte) {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal(ns, &obj); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	obj["spec"] = map[string]any{"finalizers": []string{}}
	body, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	check(t, fx.do(t, http.MethodPut, path+"/finalize", "application/json", body))
	if a := fx.do(t, http.MethodGet, path, "", nil); a.code != http.StatusNotFound {
		t.Fatalf("%s after /finalize: %d %s", path, a.code, a.body)
	}
}

// applyTypedPatchError reports kube-apiserver's 500 to a server-side apply
// whose body has a field the kind's schema does not declare (at a level
// that does not preserve unknown fields): managedfields'
// structuredMergeManager.Apply returns "failed to create typed patch
// object ...: field not declared in schema" as a plain error, which the
// handler answers 500. The code is k8s.io/apimachinery's, unchanged in
// kube-apiserver v1.37.2 (kubernetes/kubernetes#139253, #122480; the fix,
// #139255, answers 400 and is not merged).
func applyTypedPatchError(a answer) bool {
	return a.code == http.StatusInternalServerError && a.bodyErr == nil &&
		strings.HasPrefix(a.status().Message, "failed to create typed patch object (")
}
