// Package load runs a concurrent API workload against a server and checks
// afterwards what the server promised: every acknowledged write is there in
// its final state, and every watch saw every event of its objects in
// resourceVersion order, with no gap.
//
// It drives kubeembed (reliability/) and, for comparison in one run,
// kube-apiserver + etcd (envtest/, another module of this repository:
// internal/ is importable there), so it speaks only client-go.
//
// The workload, in one namespace of ConfigMaps: Workers clients, each with
// a connection of its own when over the network, loop until Duration is
// over, each picking at random one of: create a private object, update a
// hot object (shared by all workers: their cached copies go stale, so
// updates meet 409 Conflict and retry from a fresh get), update a private
// object, server-side apply (a field of its own, on a hot or a private
// object), delete a private object, list the namespace in pages
// (limit/continue). Watches watches are opened before the first write,
// each on one shard of the objects (a label), several watches per shard.
// When the workers are done, a fence object is created per shard; a watch
// that saw its fence has seen everything before it, so the checks need no
// waiting on time.
package load

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Options describe one run. The zero value of each field but Config and
// Namespace is its default.
type Options struct {
	// Config is the clients' configuration: their identity and how to
	// reach the server. Each worker makes a client of its own from it
	// (over the network, a connection of its own); QPS limits are lifted.
	// Use a user API Priority and Fairness does not exempt (not
	// system:masters) to see its 429s.
	Config *rest.Config
	// Namespace holds the objects; it must exist and the user may do
	// anything with ConfigMaps in it (Prepare).
	Namespace string
	// Workers is the number of concurrent clients. Default 64.
	Workers int
	// Watches is the number of watches open from the start. Default 64.
	Watches int
	// Duration is how long the workers run. Default 3 s.
	Duration time.Duration
}

const (
	shards     = 16 // label values: Watches/shards watches see each object
	hotObjects = 32 // updated by every worker
	maxPrivate = 40 // a worker's live objects: bounds the lists' size
	pageSize   = 100
	shardLabel = "load-shard"
	// requestTimeout bounds one request: an answer that late is a finding.
	requestTimeout = 30 * time.Second
)

func (o Options) withDefaults() Options {
	if o.Workers == 0 {
		o.Workers = 64
	}
	if o.Watches == 0 {
		o.Watches = 64
	}
	if o.Duration == 0 {
		o.Duration = 3 * time.Second
	}
	return o
}

// Prepare creates namespace and lets group do anything with its
// ConfigMaps (a Role and its RoleBinding), as admin.
func Prepare(ctx context.Context, admin kubernetes.Interface, namespace, group string) error {
	meta := metav1.ObjectMeta{Name: "load", Namespace: namespace}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	role := &rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}}}}
	if _, err := admin.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create role: %w", err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: meta,
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "load"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: group}}}
	if _, err := admin.RbacV1().RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create role binding: %w", err)
	}
	return nil
}

// Run runs the workload and checks its outcome. An error means the run
// could not be made; what the checks found is in Result.Problems.
func Run(ctx context.Context, opts Options) (*Result, error) {
	o := opts.withDefaults()
	var tooMany atomic.Int64
	clients := make([]kubernetes.Interface, o.Workers)
	for i := range clients {
		c, err := newClient(o.Config, &tooMany)
		if err != nil {
			return nil, err
		}
		clients[i] = c
	}
	cms := clients[0].CoreV1().ConfigMaps(o.Namespace)
	start, err := cms.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("list before the run: %w", err)
	}
	watchCtx, stopWatches := context.WithCancel(ctx)
	defer stopWatches()
	watchers, err := startWatchers(watchCtx, clients, o, start.ResourceVersion)
	if err != nil {
		return nil, err
	}
	l := newLedger()
	hot, err := createHot(ctx, clients[0], o.Namespace, l)
	if err != nil {
		return nil, err
	}
	res := &Result{Workers: o.Workers, Watches: o.Watches}
	res.Elapsed, res.stats, res.Problems = runWorkers(ctx, clients, o, l, hot)
	if err := fence(ctx, clients[0], o.Namespace, l); err != nil {
		return nil, err
	}
	res.Problems = append(res.Problems, awaitFences(ctx, watchers)...)
	stopWatches()
	res.Problems = append(res.Problems, checkWatches(l, watchers)...)
	final, err := listAll(ctx, cms, &stats{})
	if err != nil {
		return nil, fmt.Errorf("list after the run: %w", err)
	}
	res.Problems = append(res.Problems, checkFinal(l, final)...)
	res.TooMany, res.Acknowledged, res.Uncertain = tooMany.Load(), l.acknowledged(), l.uncertainCount()
	res.Outcomes = res.stats.outcomes
	for _, w := range watchers {
		res.WatchEvents += w.eventCount()
		res.WatchRelists += len(w.segments) - 1
	}
	return res, nil
}

// newClient makes a client of cfg with a transport of its own that counts
// 429 answers (client-go retries them, so callers never see most).
func newClient(cfg *rest.Config, tooMany *atomic.Int64) (kubernetes.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	if cfg.Transport == nil {
		// A Proxy function makes client-go build a transport (and so a
		// connection) per client instead of sharing its cached one: 64
		// clients are 64 connections, as 64 controllers would be.
		cfg.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if err == nil && resp.StatusCode == http.StatusTooManyRequests {
				tooMany.Add(1)
			}
			return resp, err
		})
	})
	return kubernetes.NewForConfig(cfg)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// createHot creates the objects every worker updates.
func createHot(ctx context.Context, c kubernetes.Interface, ns string, l *ledger) ([]string, error) {
	names := make([]string, hotObjects)
	for i := range names {
		names[i] = fmt.Sprintf("hot-%02d", i)
		cm, err := c.CoreV1().ConfigMaps(ns).Create(ctx, newObject(names[i], i%shards, "0"), metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create %s: %w", names[i], err)
		}
		l.wrote(cm)
	}
	return names, nil
}

// fence creates one object per shard, after every other write.
func fence(ctx context.Context, c kubernetes.Interface, ns string, l *ledger) error {
	for s := range shards {
		cm, err := c.CoreV1().ConfigMaps(ns).Create(ctx, newObject(fenceName(s), s, "fence"), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create fence: %w", err)
		}
		l.wrote(cm)
	}
	return nil
}

func fenceName(shard int) string { return fmt.Sprintf("fence-%02d", shard) }

func newObject(name string, shard int, value string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{shardLabel: strconv.Itoa(shard)}},
		Data:       map[string]string{"v": value},
	}
}

// rv reads a resourceVersion as the number it is on etcd and kubeembed.
func rv(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}

// outcome sorts a request's error: "" (none), a refusal that wrote nothing
// (conflict, notfound, toomany, expired, refused), or "unknown": the write
// may or may not have happened (a timeout, a 5xx, a broken connection).
func outcome(err error) string {
	switch {
	case err == nil:
		return ""
	case apierrors.IsConflict(err):
		return "conflict"
	case apierrors.IsNotFound(err):
		return "notfound"
	case apierrors.IsTooManyRequests(err):
		return "toomany"
	case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
		return "expired"
	case apierrors.IsBadRequest(err) || apierrors.IsInvalid(err) || apierrors.IsForbidden(err) ||
		apierrors.IsAlreadyExists(err) || apierrors.IsUnauthorized(err):
		return "refused"
	default:
		return "unknown"
	}
}

// Result is what a run measured and found.
type Result struct {
	Workers, Watches int
	Elapsed          time.Duration
	// TooMany counts 429 answers (API Priority and Fairness), retried by
	// client-go or not.
	TooMany int64
	// Acknowledged counts the writes the server acknowledged; Uncertain
	// the objects a write of unknown outcome touched.
	Acknowledged, Uncertain int
	// WatchEvents counts the events the watches received; WatchRelists
	// the lists that restarted a watch after 410 Gone.
	WatchEvents, WatchRelists int
	// Outcomes counts the answers that were not successes by verb and
	// kind ("update conflict": 409s the workers retried).
	Outcomes map[string]int
	// Problems are the checks' findings: none on a correct server.
	Problems []string
	stats    *stats
}

// String is a report: a summary line and a table of latencies per verb.
func (r *Result) String() string {
	var b strings.Builder
	total := r.stats.total()
	fmt.Fprintf(&b, "%d workers, %d watches, %.1f s: %d requests (%.0f/s), %d writes acknowledged, %d 429s, %d watch events, %d relists, %d uncertain objects, %d problems\n",
		r.Workers, r.Watches, r.Elapsed.Seconds(), total, float64(total)/r.Elapsed.Seconds(),
		r.Acknowledged, r.TooMany, r.WatchEvents, r.WatchRelists, r.Uncertain, len(r.Problems))
	for _, k := range slices.Sorted(maps.Keys(r.Outcomes)) {
		fmt.Fprintf(&b, "%s: %d; ", k, r.Outcomes[k])
	}
	if len(r.Outcomes) > 0 {
		b.WriteString("\n")
	}
	b.WriteString(r.stats.table(r.Elapsed))
	return b.String()
}

// Verbs are the request kinds timed, in the report's order.
func Verbs() []string { return []string{"create", "update", "apply", "delete", "get", "list"} }

// Quantile returns the q-th quantile (0-100) of verb's latencies and how
// many requests it timed.
func (r *Result) Quantile(verb string, q int) (time.Duration, int) {
	d := r.stats.sorted(verb)
	if len(d) == 0 {
		return 0, 0
	}
	return d[min(len(d)-1, len(d)*q/100)], len(d)
}

// Throughput is the requests answered per second, all verbs.
func (r *Result) Throughput() float64 { return float64(r.stats.total()) / r.Elapsed.Seconds() }

// guard bounds a request by requestTimeout.
func guard(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, requestTimeout)
}
