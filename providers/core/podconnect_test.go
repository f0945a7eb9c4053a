package core_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// deadline bounds each request of these tests.
const deadline = 20 * time.Second

// server is a server that runs no kubelet (or the kubelet of nodes), and
// pods that no scheduler binds: the tests put them where they want.
type server struct {
	srv    *apiserver.Server
	client kubernetes.Interface
}

func startServer(t *testing.T, withKubelet bool) server {
	t.Helper()
	opts := apiserver.Options{Controllers: []controllers.Name{controllers.ServiceAccount}, Nodes: []controllers.Node{}}
	if withKubelet {
		opts.Controllers, opts.Nodes = append(opts.Controllers, controllers.Kubelet), controllers.Nodes(1)
	}
	srv := apiservertest.Start(t, apiservertest.WithOptions(opts))
	client, err := srv.Clientset()
	require.NoError(t, err)
	return server{srv: srv, client: client}
}

// pod creates a pod with containers (init containers first, named
// "init..."), on node ("": not scheduled).
func (s server) pod(t *testing.T, name, node string, containers ...string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{NodeName: node}}
	for _, c := range containers {
		spec := corev1.Container{Name: c, Image: "busybox"}
		if len(c) > 4 && c[:4] == "init" {
			p.Spec.InitContainers = append(p.Spec.InitContainers, spec)
			continue
		}
		p.Spec.Containers = append(p.Spec.Containers, spec)
	}
	_, err := s.client.CoreV1().Pods("default").Create(t.Context(), p, metav1.CreateOptions{})
	require.NoError(t, err)
}

// node creates a Node with addresses, as a test would (no kubelet runs
// it).
func (s server) node(t *testing.T, name string, addresses ...corev1.NodeAddress) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Addresses: addresses}}
	_, err := s.client.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{})
	require.NoError(t, err)
}

// request sends a request to a pod's subresource (with a query) and
// returns the API's answer: its code and Status (no Status on success).
func (s server) request(t *testing.T, method, pod, sub string, query url.Values) (int, metav1.Status) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	r := s.client.CoreV1().RESTClient().Verb(method).Namespace("default").Resource("pods").Name(pod).SubResource(sub)
	for k, vs := range query {
		for _, v := range vs {
			r.Param(k, v)
		}
	}
	var code int
	err := r.Do(ctx).StatusCode(&code).Error()
	var status apierrors.APIStatus
	if err != nil {
		require.ErrorAs(t, err, &status)
		return code, status.Status()
	}
	return code, metav1.Status{}
}

// upgrade sends an upgrade request (SPDY, as client-go's executor) to a
// pod's subresource and returns the answer when it is not an upgrade.
func (s server) upgrade(t *testing.T, pod, sub string, query url.Values) (int, metav1.Status) {
	t.Helper()
	cfg := s.srv.RESTConfig()
	cfg.NextProtos = []string{"http/1.1"} // no upgrades over HTTP/2
	transport, err := rest.TransportFor(cfg)
	require.NoError(t, err)
	u := s.client.CoreV1().RESTClient().Post().Namespace("default").Resource("pods").Name(pod).SubResource(sub).URL()
	u.RawQuery = query.Encode()
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), nil)
	require.NoError(t, err)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "SPDY/3.1")
	req.Header.Set("X-Stream-Protocol-Version", "v4.channel.k8s.io")
	resp, err := transport.RoundTrip(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var status metav1.Status
	require.NoError(t, json.Unmarshal(body, &status), "body %q", body)
	return resp.StatusCode, status
}

type answer struct {
	code    int
	message string
}

// checkUpgrade checks the answer to an upgrade request.
func (s server) checkUpgrade(t *testing.T, want answer, pod, sub string, query url.Values) {
	t.Helper()
	code, status := s.upgrade(t, pod, sub, query)
	check(t, want, code, status)
}

func check(t *testing.T, want answer, code int, status metav1.Status) {
	t.Helper()
	assert.Equal(t, want, answer{code, status.Message})
	if code >= 300 {
		assert.Equal(t, int32(code), status.Code)
	}
}

func TestPodConnectChecks(t *testing.T) {
	t.Parallel()
	s := startServer(t, false)
	s.pod(t, "multi", "", "init1", "a", "b")
	s.pod(t, "single", "", "app")
	const choose = "a container name must be specified for pod multi, choose one of: [init1 a b]"
	v := func(kv ...string) url.Values {
		q := url.Values{}
		for i := 0; i < len(kv); i += 2 {
			q.Add(kv[i], kv[i+1])
		}
		return q
	}
	for name, tc := range map[string]struct {
		method, pod, sub string
		query            url.Values
		want             answer
	}{
		"log: which container":       {"GET", "multi", "log", nil, answer{400, choose}},
		"exec: which container":      {"POST", "multi", "exec", v("command", "ls", "stdout", "true"), answer{400, choose}},
		"attach: which container":    {"POST", "multi", "attach", v("stdout", "true"), answer{400, choose}},
		"log: not the pod's":         {"GET", "multi", "log", v("container", "y"), answer{400, "container y is not valid for pod multi"}},
		"exec: not the pod's":        {"POST", "single", "exec", v("container", "y", "command", "ls"), answer{400, "container y is not valid for pod single"}},
		"exec: init container":       {"POST", "multi", "exec", v("container", "init1", "command", "ls"), answer{400, "pod multi does not have a host assigned"}},
		"exec: not scheduled":        {"POST", "single", "exec", v("command", "ls"), answer{400, "pod single does not have a host assigned"}},
		"attach: not scheduled":      {"POST", "single", "attach", v("stdin", "1"), answer{400, "pod single does not have a host assigned"}},
		"portforward: not scheduled": {"POST", "multi", "portforward", nil, answer{400, "pod multi does not have a host assigned"}},
		"log: not scheduled":         {"GET", "single", "log", nil, answer{204, ""}},
		"log: no such pod":           {"GET", "ghost", "log", nil, answer{404, `pods "ghost" not found`}},
		"exec: no such pod":          {"POST", "ghost", "exec", nil, answer{404, `pods "ghost" not found`}},
		"portforward: no such pod":   {"POST", "ghost", "portforward", nil, answer{404, `pods "ghost" not found`}},
		"exec: bad bool is true":     {"POST", "single", "exec", v("stdin", "yes"), answer{400, "pod single does not have a host assigned"}},
		"log: bad number":            {"GET", "single", "log", v("tailLines", "x"), answer{400, `strconv.ParseInt: parsing "x": invalid syntax`}},
		"log: bad time": {"GET", "single", "log", v("sinceTime", "yesterday"),
			answer{400, `parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006"`}},
		"portforward: bad port": {"POST", "single", "portforward", v("ports", "x"),
			answer{400, `cannot convert to []int32: strconv.ParseUint: parsing "x": invalid syntax`}},
		"log: tailLines": {"GET", "single", "log", v("tailLines", "-1"),
			answer{422, `PodLogOptions "single" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0`}},
		"log: limitBytes": {"GET", "single", "log", v("limitBytes", "0"),
			answer{422, `PodLogOptions "single" is invalid: limitBytes: Invalid value: 0: must be greater than 0`}},
		"log: sinceSeconds": {"GET", "single", "log", v("sinceSeconds", "0"),
			answer{422, `PodLogOptions "single" is invalid: sinceSeconds: Invalid value: 0: must be greater than 0`}},
		"log: both since": {"GET", "single", "log", v("sinceSeconds", "10", "sinceTime", "2026-01-01T00:00:00Z"),
			answer{422, "PodLogOptions \"single\" is invalid: []: Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified"}},
		"log: stream": {"GET", "single", "log", v("stream", "Stdout"),
			answer{422, `PodLogOptions "single" is invalid: stream: Forbidden: may not be specified`}},
		"proxy: no pod IP":    {"GET", "single", "proxy", nil, answer{400, "address not allowed"}},
		"proxy: invalid name": {"GET", "a:b:c:d", "proxy", nil, answer{400, `invalid pod request "a:b:c:d"`}},
	} {
		t.Run(name, func(t *testing.T) {
			code, status := s.request(t, tc.method, tc.pod, tc.sub, tc.query)
			check(t, tc.want, code, status)
		})
	}
}

func TestPodConnectUnreachableKubelet(t *testing.T) {
	t.Parallel()
	for name, withKubelet := range map[string]bool{"no kubelet runs": false, "not a simulated node": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, withKubelet)
			s.node(t, "other", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.9"})
			s.node(t, "named", corev1.NodeAddress{Type: corev1.NodeHostName, Address: "worker-1"})
			s.node(t, "bare")
			s.pod(t, "p", "other", "app")
			s.pod(t, "q", "named", "app")
			s.pod(t, "r", "bare", "app")
			s.pod(t, "s", "gone", "app")
			refused := "dial tcp 10.0.0.9:10250: connect: connection refused"
			exec := url.Values{"command": {"ls"}, "stdout": {"1"}}
			s.checkUpgrade(t, answer{500, "error dialing backend: " + refused}, "p", "exec", exec)
			s.checkUpgrade(t, answer{500, "error dialing backend: " + refused}, "p", "attach", url.Values{"stdout": {"1"}})
			s.checkUpgrade(t, answer{500, "error dialing backend: " + refused}, "p", "portforward", nil)
			s.checkUpgrade(t, answer{500, "error dialing backend: dial tcp: lookup worker-1: no such host"}, "q", "exec", exec)
			s.checkUpgrade(t, answer{500, "no preferred addresses found; known addresses: []"}, "r", "exec", exec)
			// The node's store answers for the request's resource, as
			// kube-apiserver's (its NotFound names the pods).
			s.checkUpgrade(t, answer{404, `pods "gone" not found`}, "s", "exec", exec)
			code, status := s.request(t, "GET", "p", "log", nil)
			check(t, answer{500, `Get "http://10.0.0.9:10250/containerLogs/default/p/app": ` + refused}, code, status)
			// Without an upgrade, nothing is dialled.
			code, status = s.request(t, "POST", "p", "exec", exec)
			check(t, answer{400, "Upgrade request required"}, code, status)
		})
	}
}

// TestPodExecNeedsCreate: a WebSocket client's GET of pods/exec must also
// be allowed to create it, as a SPDY client's POST.
func TestPodExecNeedsCreate(t *testing.T) {
	t.Parallel()
	s := startServer(t, false)
	s.node(t, "other", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.9"})
	s.pod(t, "p", "other", "app")
	_, err := s.client.RbacV1().Roles("default").Create(t.Context(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "get-exec"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods/exec", "pods/portforward"}, Verbs: []string{"get"}}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = s.client.RbacV1().RoleBindings("default").Create(t.Context(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "get-exec"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	cfg := s.srv.RESTConfig()
	cfg.Impersonate.UserName = "alice"
	alice, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	as := server{srv: s.srv, client: alice}
	for _, sub := range []string{"exec", "portforward"} {
		code, status := as.request(t, "GET", "p", sub, url.Values{"command": {"ls"}})
		assert.Equal(t, http.StatusForbidden, code)
		assert.Equal(t, metav1.StatusReasonForbidden, status.Reason)
		assert.Contains(t, status.Message, `pods "p" is forbidden`)
	}
}
