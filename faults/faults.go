// Package faults makes a kubeembed server fail the way a real API server
// fails, on purpose, and records what clients asked of it: the test tools
// fake clients approximate and envtest does not have.
//
// An Injector holds rules. A rule matches requests by what kube-apiserver
// knows of them after authentication (verb, group, resource, subresource,
// namespace, name, user, field manager), at most Times times, with a
// Probability, or by any predicate, and answers with an Action instead of
// (or before) the server: an error status shaped as kube-apiserver shapes it
// (409, 429 with Retry-After, 500, 503, 504, 422 with causes, 410 for a stale
// continue token), latency, a watch that ends at once or with a 410 Gone
// event, a dropped connection.
// A Recorder keeps every request with its answer.
//
// The server's own requests (its informers and controllers, user
// system:apiserver) are never faulted nor recorded: rules and records are
// about the clients under test. Server.Faults and Server.Recorder give a
// server's; apiservertest.InjectFault scopes a rule to a test.
package faults

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// Request is what rules match and records keep of a request.
type Request struct {
	// Verb is kube-apiserver's: get, list, watch, create, update, patch,
	// delete, deletecollection; or the HTTP method, lower case, of a
	// non-resource request.
	Verb            string
	Group, Resource string
	Subresource     string
	Namespace, Name string
	Path            string
	User            string
	Groups          []string
	FieldManager    string
	DryRun          bool
	// Continue is the list's continue token, if any; ResourceVersion the
	// resourceVersion a read or watch asked for ("" for the latest).
	Continue, ResourceVersion string
}

// Match selects requests: each field set must be equal; empty fields match
// anything.
type Match struct {
	Verb, Group, Resource, Subresource, Namespace, Name, User, FieldManager string
}

func (m Match) matches(r Request) bool {
	for _, f := range [][2]string{{m.Verb, r.Verb}, {m.Group, r.Group}, {m.Resource, r.Resource}, {m.Subresource, r.Subresource},
		{m.Namespace, r.Namespace}, {m.Name, r.Name}, {m.User, r.User}, {m.FieldManager, r.FieldManager}} {
		if f[0] != "" && f[0] != f[1] {
			return false
		}
	}
	return true
}

// Action answers a matched request; next is the server.
type Action func(w http.ResponseWriter, r *http.Request, next http.Handler)

// Rule is a fault: which requests, how often, and what happens to them.
type Rule struct {
	Match Match
	// When, if set, must hold too.
	When func(Request) bool
	// Times limits how many requests the rule applies to; 0 is no limit.
	Times int
	// Probability that a matched request is faulted; 0 means 1.
	Probability float64
	Action      Action
}

// Injector holds the fault rules of a server. It is safe for concurrent use;
// the zero value has no rules.
type Injector struct {
	mu    sync.Mutex
	rules []*activeRule
}

type activeRule struct {
	Rule
	applied int
}

// Add adds rule and returns a func that removes it.
func (i *Injector) Add(rule Rule) (remove func()) {
	r := &activeRule{Rule: rule}
	i.mu.Lock()
	i.rules = append(i.rules, r)
	i.mu.Unlock()
	return func() {
		i.mu.Lock()
		defer i.mu.Unlock()
		for k, x := range i.rules {
			if x == r {
				i.rules = append(i.rules[:k], i.rules[k+1:]...)
				return
			}
		}
	}
}

// Reset removes every rule.
func (i *Injector) Reset() {
	i.mu.Lock()
	i.rules = nil
	i.mu.Unlock()
}

// action returns the action of the first rule that applies to req, counting
// it, or nil.
func (i *Injector) action(req Request) Action {
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, r := range i.rules {
		if (r.Times > 0 && r.applied >= r.Times) || !r.Match.matches(req) || (r.When != nil && !r.When(req)) {
			continue
		}
		if r.Probability > 0 && r.Probability < 1 && rand.Float64() >= r.Probability {
			continue
		}
		r.applied++
		return r.Action
	}
	return nil
}

// Fail answers with err as kube-apiserver writes errors: a metav1.Status
// with its code, reason, message and details, and Retry-After when the
// error says when to retry (apierrors.NewTooManyRequests,
// NewServerTimeout, ...). Build err with k8s.io/apimachinery's apierrors.
func Fail(err error) Action {
	if _, ok := err.(apierrors.APIStatus); !ok {
		err = apierrors.NewInternalError(err)
	}
	return func(w http.ResponseWriter, r *http.Request, _ http.Handler) {
		if d := err.(apierrors.APIStatus).Status().Details; d != nil && d.RetryAfterSeconds > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(d.RetryAfterSeconds)))
		}
		responsewriters.ErrorNegotiated(err, statusCodecs, metav1.SchemeGroupVersion, w, r)
	}
}

// Delay waits d (or until the request is cancelled), then lets the server
// answer.
func Delay(d time.Duration) Action {
	return func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			next.ServeHTTP(w, r)
		case <-r.Context().Done():
		}
	}
}

// DropConnection aborts the request without an answer: the client sees its
// connection (HTTP/1) or stream (HTTP/2) reset.
func DropConnection() Action {
	return func(http.ResponseWriter, *http.Request, http.Handler) { panic(http.ErrAbortHandler) }
}

// EndWatch answers a watch with an empty stream that ends at once, as when
// a server closes its watches: the client watches again from its last
// resourceVersion. Match it with Verb "watch".
func EndWatch() Action {
	return func(w http.ResponseWriter, _ *http.Request, _ http.Handler) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
	}
}

// WatchGone answers a watch with one ERROR event carrying kube-apiserver's
// 410 Gone status ("too old resource version"), then ends it, as a server
// whose history was compacted past the client's resourceVersion: the client
// lists again. The event is encoded as the client asked (JSON or protobuf).
// Match it with Verb "watch".
func WatchGone() Action {
	gone := apierrors.NewResourceExpired("too old resource version").Status()
	return func(w http.ResponseWriter, r *http.Request, _ http.Handler) {
		info, err := negotiation.NegotiateOutputMediaTypeStream(r, statusCodecs, watchStreams{})
		if err != nil {
			responsewriters.ErrorNegotiated(err, statusCodecs, metav1.SchemeGroupVersion, w, r)
			return
		}
		embedded, err := runtime.Encode(statusCodecs.EncoderForVersion(info.Serializer, metav1.SchemeGroupVersion), &gone)
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		w.Header().Set("Content-Type", info.MediaType)
		w.WriteHeader(http.StatusOK)
		frames := info.StreamSerializer.Framer.NewFrameWriter(w)
		_ = streaming.NewEncoder(frames, info.StreamSerializer.Serializer).Encode(&metav1.WatchEvent{
			Type: string(watch.Error), Object: runtime.RawExtension{Raw: embedded}})
	}
}

// watchStreams allows the watch stream of any media type the codecs have.
type watchStreams struct{}

func (watchStreams) AllowsMediaTypeTransform(_, _ string, target *schema.GroupVersionKind) bool {
	return target == nil
}
func (watchStreams) AllowsServerVersion(string) bool  { return false }
func (watchStreams) AllowsStreamSchema(s string) bool { return s == "watch" }

// ExpiredContinue is Fail with kube-apiserver's 410 Gone for a continue
// token too old to serve; use it with When: HasContinue, so the client's
// first page is served and a later one fails, as after a compaction.
func ExpiredContinue() Action {
	return Fail(apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."))
}

// HasContinue says whether a request continues a paginated list.
func HasContinue(r Request) bool { return r.Continue != "" }

// statusCodecs encode metav1.Status in JSON, YAML or protobuf, as the client
// asked: errors written by Fail look like the server's own.
var statusCodecs = func() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
	scheme.AddUnversionedTypes(metav1.SchemeGroupVersion, &metav1.Status{}, &metav1.WatchEvent{})
	return serializer.NewCodecFactory(scheme)
}()

// requestOf reads what kube-apiserver knows of r after authentication.
func requestOf(r *http.Request) Request {
	q := r.URL.Query()
	out := Request{Path: r.URL.Path, FieldManager: q.Get("fieldManager"), DryRun: len(q["dryRun"]) > 0,
		Continue: q.Get("continue"), ResourceVersion: q.Get("resourceVersion")}
	if info, ok := request.RequestInfoFrom(r.Context()); ok {
		out.Verb = info.Verb
		out.Group, out.Resource, out.Subresource = info.APIGroup, info.Resource, info.Subresource
		out.Namespace, out.Name = info.Namespace, info.Name
	}
	if u, ok := request.UserFrom(r.Context()); ok {
		out.User, out.Groups = u.GetName(), u.GetGroups()
	}
	return out
}

// isServer says whether r is the server's own (its loopback user).
func isServer(req Request) bool { return req.User == user.APIServerUser }
