package controlplane

import (
	"net/http"

	"k8s.io/apimachinery/pkg/util/sets"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericfilters "k8s.io/apiserver/pkg/server/filters"

	"github.com/kubeembed/apiserver/internal/inproc"
)

// longRunning is kube-apiserver's check: streams (watches, logs -f, exec,
// attach, port-forward, proxies) are long-running, not cut at the request
// timeout nor held as a priority and fairness seat.
var longRunning = genericfilters.BasicLongRunningRequestCheck(
	sets.NewString("watch", "proxy"), sets.NewString("attach", "exec", "proxy", "log", "portforward"))

// requestInfos resolves a request as the chain's RequestInfo filter does
// (genericapiserver.NewRequestInfoResolver, with the /api legacy prefix).
var requestInfos = &apirequest.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}

// NewTransport returns an in-process transport that serves the requests
// that are not long-running on their caller's goroutine
// (inproc.Transport.SetInline): the server's own clients' and its users'.
// Streams and watches run on workers.
func NewTransport() *inproc.Transport {
	t := &inproc.Transport{}
	if inlineEnabled {
		t.SetInline(shortRequest)
	}
	return t
}

// inlineEnabled turns inline serving on (see NewTransport). It was off
// for a while (2026-12-04) as the suspect of a Start hang in CI's etcd
// stage; the hang was etcd's progress notifications on a shared watch
// stream (storage/etcd's ownStream), which inline's speed only exposed.
const inlineEnabled = true

// shortRequest reports whether the handler answers r without waiting on
// its caller: not long-running, not an upgrade to a stream.
func shortRequest(r *http.Request) bool {
	if r.Header.Get("Upgrade") != "" {
		return false
	}
	info, err := requestInfos.NewRequestInfo(r)
	return err == nil && !longRunning(r, info)
}
