package runner

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// Target is a running API server, reached over HTTPS like any client does.
type Target struct {
	Name  string
	URL   string
	Token string // admin bearer token (system:masters)
	// Client defaults to one that skips certificate checks: both servers
	// use certificates of their own making, and parity is about the API.
	Client *http.Client
	// Vars are placeholders substituted in steps beside {ns} and {id}
	// (Fixtures.Vars).
	Vars map[string]string
	// Kubelet is the server's simulated kubelet, for cluster scenarios.
	Kubelet Kubelet
	// Settle, if set, waits until the server's own controllers have seen
	// every write (kubeembed's WaitIdle): after a scenario's nodes are
	// added, so that its scheduler does not try a first pod on a node its
	// informer still sees tainted. The reference's kube-scheduler runs in
	// a process of its own, whose informers the runner cannot see; nil.
	Settle func(context.Context) error
}

// clientset is a client-go client of the target as the admin.
func (t *Target) clientset() (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(&rest.Config{Host: t.URL, BearerToken: t.Token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: -1})
}

func (t *Target) client() *http.Client {
	if t.Client == nil {
		t.Client = &http.Client{Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback test servers
			MaxIdleConnsPerHost: 16,
		}}
	}
	return t.Client
}

// Response is what a step got back, before normalisation.
type Response struct {
	Code    int
	Headers map[string][]string
	// Body is the decoded JSON body, or the raw body as a string when it is
	// not JSON; Events holds a watch's events instead.
	Body   any
	Events []any
	Err    string // transport error, if any
	// Raw is the body as the server wrote it, compacted: Until steps match
	// it too, as it keeps the server's field order (Body, re-encoded,
	// sorts the keys).
	Raw string `json:"-"`
}

var comparedHeaders = []string{"Content-Type", "Warning", "Location"}

// MaxBody caps what is read of one response.
const MaxBody = 16 << 20

// Do runs one step against the target, with ns and id substituted, and
// responses of the earlier steps (by step name) for {rv:...} and {uid:...}.
func (t *Target) Do(ctx context.Context, st Step, ns, id string, earlier map[string]Response) Response {
	if st.Verb == "WATCH" {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, st.timeout())
		defer cancel()
	}
	if st.Verb == "KUBELET" {
		return t.doKubelet(ctx, st, t.substituter(ns, id, earlier))
	}
	req, err := t.request(ctx, st, t.substituter(ns, id, earlier))
	if err != nil {
		return Response{Err: err.Error()}
	}
	resp, err := t.client().Do(req)
	if err != nil {
		return Response{Err: err.Error()}
	}
	defer resp.Body.Close()
	out := Response{Code: resp.StatusCode, Headers: map[string][]string{}}
	for _, h := range comparedHeaders {
		if v := resp.Header.Values(h); len(v) > 0 {
			out.Headers[h] = v
		}
	}
	if st.Verb == "WATCH" && resp.StatusCode == http.StatusOK {
		out.Events = readEvents(resp.Body, max(st.Events, 1))
		return out
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	if err != nil {
		out.Err = err.Error()
	}
	out.Body = decodeBody(resp.Header.Get("Content-Type"), data)
	var compact bytes.Buffer
	if json.Compact(&compact, data) == nil {
		out.Raw = compact.String()
	}
	if len(st.MetricFamilies) > 0 && resp.StatusCode == http.StatusOK {
		// Reduced before normalisation, which would rewrite numbers of
		// the text that look like resource versions.
		families, err := metricFamilies(string(data), st.MetricFamilies)
		if err != nil {
			out.Err = err.Error()
		}
		out.Body = families
	}
	return out
}

// substituter replaces a step's placeholders: {ns}, {id}, the target's
// Vars, and {rv:STEP}/{uid:STEP} from the earlier responses.
func (t *Target) substituter(ns, id string, earlier map[string]Response) func(string) string {
	return func(s string) string {
		s = strings.NewReplacer("{ns}", ns, "{id}", id).Replace(s)
		for k, v := range t.Vars {
			s = strings.ReplaceAll(s, k, v)
		}
		return refRE.ReplaceAllStringFunc(s, func(m string) string {
			p := refRE.FindStringSubmatch(m)
			obj, _ := earlier[p[2]].Body.(map[string]any)
			meta, _ := obj["metadata"].(map[string]any)
			key := map[string]string{"rv": "resourceVersion", "uid": "uid"}[p[1]]
			v, _ := meta[key].(string)
			return v
		})
	}
}

// request is the HTTP request of a step: URL, body, content type, the
// admin's token and the impersonation the step asks for.
func (t *Target) request(ctx context.Context, st Step, sub func(string) string) (*http.Request, error) {
	q := url.Values{}
	for k, v := range st.Query {
		q.Set(k, sub(v))
	}
	method := st.Verb
	if method == "WATCH" {
		method = http.MethodGet
		q.Set("watch", "true")
	}
	u := t.URL + sub(st.Path)
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var body io.Reader
	ct := st.ContentType
	switch {
	case st.Raw != "":
		body = strings.NewReader(sub(st.Raw))
	case st.Body != nil:
		b, err := json.Marshal(st.Body)
		if err != nil {
			return nil, err
		}
		body = strings.NewReader(sub(string(b)))
	}
	if body != nil && ct == "" {
		ct = "application/json"
		if method == http.MethodPatch {
			ct = "application/merge-patch+json"
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "parity")
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	if st.Accept != "" {
		req.Header.Set("Accept", st.Accept)
	}
	for k, v := range st.Headers {
		req.Header.Set(k, sub(v))
	}
	if st.User != "anonymous" {
		req.Header.Set("Authorization", "Bearer "+t.Token)
	}
	if st.User != "" && st.User != "anonymous" {
		req.Header.Set("Impersonate-User", sub(st.User))
		for _, g := range st.Groups {
			req.Header.Add("Impersonate-Group", sub(g))
		}
	}
	return req, nil
}

// readEvents reads up to n newline-delimited JSON watch events; it stops
// early when the stream ends or the step's deadline closes it.
func readEvents(r io.Reader, n int) []any {
	var events []any
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxBody)
	for len(events) < n && sc.Scan() {
		var ev any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			ev = sc.Text()
		}
		events = append(events, ev)
	}
	return events
}

func decodeBody(contentType string, data []byte) any {
	if len(data) == 0 {
		return nil
	}
	ct := strings.ToLower(contentType)
	switch {
	case strings.Contains(ct, "json"):
		var v any
		if err := json.Unmarshal(data, &v); err == nil {
			return v
		}
	case strings.Contains(ct, "yaml"):
		var v any
		if err := yaml.Unmarshal(data, &v); err == nil {
			return map[string]any{"yaml": v}
		}
	case strings.Contains(ct, "protobuf"):
		// Protobuf bodies embed resource versions and uids as bytes; compare
		// that one came back, and its content type (compared as a header).
		return "<protobuf>"
	}
	return strings.TrimSpace(string(data))
}

// WaitReady polls /readyz as the admin until it answers 200 or ctx ends.
func (t *Target) WaitReady(ctx context.Context) error {
	var last string
	for {
		r := t.Do(ctx, Step{Verb: "GET", Path: "/readyz"}, "", "", nil)
		if r.Code == http.StatusOK {
			return nil
		}
		last = fmt.Sprintf("code %d %v %s", r.Code, r.Body, r.Err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %s: %w", t.Name, last, errors.Join(ctx.Err()))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// compactJSON is used in reports.
func compactJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSpace(b.String())
}
