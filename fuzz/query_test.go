package fuzz_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// queryPaths are the collections FuzzQuery lists and watches: built-in
// kinds with field selectors of their own (pods' spec.nodeName and
// status.phase, secrets' type, events' involvedObject.*, namespaces'
// status.phase), across namespaces too, and the widgets CRD's selectable
// field spec.color.
var queryPaths = []string{
	"/api/v1/namespaces/" + ns + "/configmaps",
	"/api/v1/pods",
	"/api/v1/namespaces/" + ns + "/secrets",
	"/apis/fuzz.kubeembed.io/v1/widgets",
	"/api/v1/namespaces/" + ns + "/events",
	"/api/v1/namespaces",
}

// tableAccept asks for a list as a Table, as kubectl get does.
const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"

// query is one input of FuzzQuery: the parameters, "" for one left out.
type query struct {
	labelSelector, fieldSelector, continueToken, resourceVersion, resourceVersionMatch, timeoutSeconds, limit string
}

func (q query) values() url.Values {
	v := url.Values{}
	for _, p := range []struct{ name, value string }{
		{"labelSelector", q.labelSelector}, {"fieldSelector", q.fieldSelector}, {"continue", q.continueToken},
		{"resourceVersion", q.resourceVersion}, {"resourceVersionMatch", q.resourceVersionMatch},
		{"timeoutSeconds", q.timeoutSeconds}, {"limit", q.limit},
	} {
		if p.value != "" {
			v.Set(p.name, p.value)
		}
	}
	return v
}

// FuzzQuery lists or watches a collection of queryPaths (target) with
// fuzzed query parameters; mode's bits: watch (0), as a Table (1),
// sendInitialEvents=true (2), allowWatchBookmarks=true (3). A watch is
// closed as soon as it answers: what is fuzzed is how it starts.
func FuzzQuery(f *testing.F) {
	fx := start(f)
	token, rv := populate(f, fx)
	// A token of the right shape whose key leaves the resource's prefix.
	forged := base64.RawURLEncoding.EncodeToString([]byte(`{"v":"meta.k8s.io/v1","rv":1,"start":"../../secrets/x\u0000"}`))
	for _, s := range []struct {
		target, mode uint8
		q            query
	}{
		{0, 0, query{labelSelector: "app=a,tier in (1,2),!gone", limit: "5"}},
		{0, 0, query{continueToken: token, limit: "5"}},
		{0, 0, query{continueToken: forged, limit: "2"}},
		{0, 2, query{resourceVersion: rv, resourceVersionMatch: "Exact", limit: "3"}},
		{0, 0, query{resourceVersion: "0", resourceVersionMatch: "NotOlderThan", timeoutSeconds: "1"}},
		{1, 0, query{fieldSelector: "spec.nodeName=,status.phase!=Running,metadata.namespace=" + ns}},
		{2, 0, query{fieldSelector: "type=kubernetes.io/tls", labelSelector: "app notin (x)"}},
		{3, 2, query{fieldSelector: "spec.color=green", labelSelector: "a"}},
		{4, 0, query{fieldSelector: "involvedObject.kind=Pod,involvedObject.name=p0,reason!=Failed"}},
		{5, 0, query{fieldSelector: "status.phase=Active,metadata.name!=default"}},
		{0, 1, query{resourceVersion: rv, timeoutSeconds: "5"}},
		{0, 1 | 4 | 8, query{resourceVersionMatch: "NotOlderThan", resourceVersion: rv}},
		{3, 1, query{fieldSelector: "spec.color=red", resourceVersion: "1"}},
	} {
		q := s.q
		f.Add(s.target, s.mode, q.labelSelector, q.fieldSelector, q.continueToken, q.resourceVersion,
			q.resourceVersionMatch, q.timeoutSeconds, q.limit)
	}
	f.Fuzz(func(t *testing.T, target, mode uint8, labelSelector, fieldSelector, continueToken,
		resourceVersion, resourceVersionMatch, timeoutSeconds, limit string) {
		q := query{labelSelector, fieldSelector, continueToken, resourceVersion, resourceVersionMatch, timeoutSeconds, limit}
		v := q.values()
		var hdr []string
		if mode&2 != 0 {
			hdr = []string{"Accept", tableAccept}
		}
		if mode&4 != 0 {
			v.Set("sendInitialEvents", "true")
		}
		if mode&8 != 0 {
			v.Set("allowWatchBookmarks", "true")
		}
		path := queryPaths[int(target)%len(queryPaths)]
		if mode&1 != 0 {
			v.Set("watch", "true")
			fx.watch(t, path+"?"+v.Encode(), hdr)
		} else {
			a, err := fx.send(http.MethodGet, path+"?"+v.Encode(), "", nil, hdr)
			if err != nil {
				t.Fatalf("%v", err)
			}
			checkList(t, a, q)
		}
		fx.done(t)
	})
}

// checkList is check, but for kube-apiserver's one 5xx of a list: a
// resourceVersion ahead of the server's, which it waits 3 s for and then
// answers 504 "Too large resource version" (storage.
// NewTooLargeResourceVersionError; the client is to retry). A continue
// token carries a resourceVersion too: under -fuzz, the seed token comes
// from the coordinating process's server, whose start-up may have written
// more than a worker's.
func checkList(t *testing.T, a answer, q query) {
	t.Helper()
	if a.code == http.StatusGatewayTimeout && (q.resourceVersion != "" || q.continueToken != "") {
		if st := a.status(); st.Reason == "Timeout" && st.Details != nil && len(st.Details.Causes) > 0 &&
			st.Details.Causes[0].Type == "ResourceVersionTooLarge" {
			return
		}
	}
	check(t, a)
}

// watch starts a watch at path and closes it once it answers; an error
// answer must hold the property.
func (fx *fixture) watch(t *testing.T, path string, hdr []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fx.base+path, nil)
	if err != nil {
		return // a path the client cannot send
	}
	req.Header.Set("Accept", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := fx.client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: no answer within %v: %v", path, requestTimeout, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return
	}
	a := answer{what: "GET " + path, code: resp.StatusCode}
	a.body, a.bodyErr = io.ReadAll(resp.Body)
	if !watchInvalidResourceVersion(a) {
		check(t, a)
	}
}

// watchInvalidResourceVersion reports kube-apiserver's 500 to a watch at
// a resourceVersion that is not a number: the watch cache (and etcd3's
// Watch) return the versioner's storage.InvalidError as is, which is no
// API status, so the handler answers 500 "resourceVersion: Invalid value".
// A list at such a version is 400 (etcd3's GetList makes it a BadRequest).
// kubernetes/kubernetes#139485 (open; PR #139525 would answer 400).
func watchInvalidResourceVersion(a answer) bool {
	return a.code == http.StatusInternalServerError && a.bodyErr == nil &&
		strings.HasPrefix(a.status().Message, "resourceVersion: Invalid value: ")
}

// populate writes what FuzzQuery lists: 30 labelled ConfigMaps, Secrets of
// two types, pods, events and widgets; it returns the continue token of a
// first page of ConfigMaps and its resourceVersion.
func populate(f *testing.F, fx *fixture) (token, rv string) {
	f.Helper()
	base := "/api/v1/namespaces/" + ns
	for i := range 30 {
		fx.must(f, http.MethodPost, base+"/configmaps", "application/json", fmt.Appendf(nil,
			`{"metadata":{"name":"c%d","labels":{"app":"%c","tier":"%d"}},"data":{"i":"%d"}}`, i, 'a'+i%3, i%4, i))
	}
	for i, typ := range []string{"Opaque", "kubernetes.io/tls", "Opaque"} {
		data := `{"k":"dg=="}`
		if typ == "kubernetes.io/tls" {
			data = `{"tls.crt":"","tls.key":""}`
		}
		fx.must(f, http.MethodPost, base+"/secrets", "application/json", fmt.Appendf(nil,
			`{"metadata":{"name":"s%d","labels":{"app":"a"}},"type":%q,"data":%s}`, i, typ, data))
	}
	for i := range 3 {
		fx.must(f, http.MethodPost, base+"/pods", "application/json", fmt.Appendf(nil,
			`{"metadata":{"name":"p%d","labels":{"app":"a"}},"spec":{"containers":[{"name":"a","image":"nginx"}]}}`, i))
		fx.must(f, http.MethodPost, base+"/events", "application/json", fmt.Appendf(nil,
			`{"metadata":{"name":"e%d"},"involvedObject":{"kind":"Pod","name":"p%d","namespace":%q},"reason":"Started","message":"m","type":"Normal"}`,
			i, i, ns))
	}
	for i, color := range []string{"red", "green", "blue"} {
		fx.must(f, http.MethodPost, widgetsPath, "application/json", fmt.Appendf(nil,
			`{"apiVersion":"fuzz.kubeembed.io/v1","kind":"Widget","metadata":{"name":"w%d","labels":{"a":"b"}},"spec":{"color":%q}}`, i, color))
	}
	a := fx.must(f, http.MethodGet, base+"/configmaps?limit=5", "", nil)
	var list struct {
		Metadata struct {
			Continue        string `json:"continue"`
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(a.body, &list); err != nil || list.Metadata.Continue == "" {
		f.Fatalf("first page: %v %s", err, a.body)
	}
	return list.Metadata.Continue, list.Metadata.ResourceVersion
}
