package kubelet

// The kubelet's server, as each simulated node's kubelet serves it on port
// 10250 to kube-apiserver: containerLogs, exec, attach and portForward,
// healthz and pods (what nodes/proxy reaches), with the kubelet's checks
// and errors (pkg/kubelet/server/server.go), then the CRI streaming
// server's protocols (k8s.io/cri-streaming). A WebSocket exec or attach
// (v5.channel.k8s.io) is translated here to the SPDY the streaming server
// speaks, and a WebSocket port-forward tunnels
// SPDY, as a v1.37 kubelet does (ExtendWebSocketsToKubelet): the API server
// passes them through when the Node declares that feature, and translates
// them itself otherwise.
//
// It is plain HTTP over in-process pipes (DialContext), not HTTPS: no
// client but the API server reaches it.

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	translator "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// newServer is the kubelet's server: one for every node, a request knows
// the node it was sent to (nodeOf).
func (k *Kubelet) newServer() *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", k.serveContainerLogs)
	mux.HandleFunc("/healthz", serveHealthz)
	mux.HandleFunc("/healthz/{check}", serveHealthCheck)
	mux.HandleFunc("GET /pods", k.servePods)
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		mux.HandleFunc(m+" /exec/{namespace}/{pod}/{container}", k.serveExec)
		mux.HandleFunc(m+" /exec/{namespace}/{pod}/{uid}/{container}", k.serveExec)
		mux.HandleFunc(m+" /attach/{namespace}/{pod}/{container}", k.serveAttach)
		mux.HandleFunc(m+" /attach/{namespace}/{pod}/{uid}/{container}", k.serveAttach)
		mux.HandleFunc(m+" /portForward/{namespace}/{pod}", k.servePortForward)
		mux.HandleFunc(m+" /portForward/{namespace}/{pod}/{uid}", k.servePortForward)
	}
	return &http.Server{Handler: mux, ConnContext: trackConn}
}

// kubeletChecks are the kubelet's health checks; each passes while its
// server serves.
var kubeletChecks = []string{"ping", "log", "syncloop"}

// serveHealthz is the kubelet's /healthz, as k8s.io/apiserver's healthz
// handler serves its checks: ok, or each check's line with ?verbose
// (?exclude=name skips one).
func serveHealthz(w http.ResponseWriter, req *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if _, verbose := req.URL.Query()["verbose"]; !verbose {
		_, _ = io.WriteString(w, "ok")
		return
	}
	excluded := sets.New(req.URL.Query()["exclude"]...)
	for _, c := range kubeletChecks {
		if excluded.Has(c) {
			excluded.Delete(c)
			fmt.Fprintf(w, "[+]%s excluded: ok\n", c)
			continue
		}
		fmt.Fprintf(w, "[+]%s ok\n", c)
	}
	if excluded.Len() > 0 {
		var quoted []string
		for _, name := range sets.List(excluded) {
			quoted = append(quoted, strconv.Quote(name))
		}
		fmt.Fprintf(w, "warn: some health checks cannot be excluded: no matches for %s\n", strings.Join(quoted, ","))
	}
	_, _ = io.WriteString(w, "healthz check passed\n")
}

// serveHealthCheck is /healthz/{check}: ok for one of the kubelet's.
func serveHealthCheck(w http.ResponseWriter, req *http.Request) {
	if !slices.Contains(kubeletChecks, req.PathValue("check")) {
		http.NotFound(w, req)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = io.WriteString(w, "ok")
}

// servePods is the kubelet's /pods: a v1 PodList of the pods bound to its
// node, as its pod manager has them from the API server.
func (k *Kubelet) servePods(w http.ResponseWriter, req *http.Request) {
	pods, err := k.pods.List(labels.Everything())
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	list := &corev1.PodList{}
	for _, p := range pods {
		if p.Spec.NodeName == nodeOf(req.Context()) {
			list.Items = append(list.Items, *p)
		}
	}
	slices.SortFunc(list.Items, func(a, b corev1.Pod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	data, err := runtime.Encode(scheme.Codecs.LegacyCodec(corev1.SchemeGroupVersion), list)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
}

// dialNode connects to the kubelet server of the node.
func (k *Kubelet) dialNode(node string) net.Conn { return serveHTTP(k.server, node) }

// nodeTransport reaches the kubelet of the node whatever the address: the
// kubelet's own client, for what it translates to SPDY.
func (k *Kubelet) nodeTransport(node string) *http.Transport {
	return &http.Transport{
		DialContext:       func(context.Context, string, string) (net.Conn, error) { return k.dialNode(node), nil },
		DisableKeepAlives: true,
	}
}

// nodePod is the pod as the kubelet of the request's node knows it: bound
// to that node. It is read from the API, not the kubelet's cache, so that
// a request right after the pod's creation finds it.
func (k *Kubelet) nodePod(ctx context.Context, namespace, name string) (*corev1.Pod, bool) {
	pod, err := k.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil || pod.Spec.NodeName != nodeOf(ctx) {
		return nil, false
	}
	return pod, true
}

// runningContainer is the ID of the running instance of the pod's
// container (and the pod has the UID asked for, if one is).
func (k *Kubelet) runningContainer(pod *corev1.Pod, uid, name string) (string, bool) {
	if uid != "" && types.UID(uid) != pod.UID {
		return "", false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if r := k.running[pod.UID]; r == nil || r.deleted {
		return "", false
	}
	c := k.runtimeContainer(pod.Namespace+"/"+pod.Name, name)
	if c == nil || !c.instance.running() {
		return "", false
	}
	return c.instance.id, true
}

// translate serves a WebSocket exec or attach of the v5 protocol (the
// one client-go speaks) by translating it to SPDY to the kubelet itself;
// false for other requests.
func (k *Kubelet) translate(w http.ResponseWriter, req *http.Request, opts *remotecommand.Options) bool {
	if !wsstream.IsWebSocketRequestWithStreamCloseProtocol(req) {
		return false
	}
	node := nodeOf(req.Context())
	h := translator.NewStreamTranslatorHandler(selfURL(req), k.nodeTransport(node), 0,
		translator.Options{Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr, Tty: opts.TTY})
	h.ServeHTTP(w, req)
	return true
}

// selfURL is the URL of the request, at the kubelet it was sent to.
func selfURL(req *http.Request) *url.URL {
	return &url.URL{Scheme: "http", Host: req.Host, Path: req.URL.Path, RawQuery: req.URL.RawQuery}
}

// kubeletResponder answers a proxying error as the kubelet's responder: a
// 500 with the error's text.
type kubeletResponder struct{}

func (kubeletResponder) Error(w http.ResponseWriter, _ *http.Request, err error) {
	http.Error(w, err.Error(), http.StatusInternalServerError)
}
