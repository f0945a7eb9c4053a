package load

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// watcher watches one shard from before the first write until it sees the
// shard's fence, recording every event. A watch that ends is resumed from
// the last event seen (no gap allowed); one the server ends with 410 Gone
// starts a new segment from a list, as an informer does.
type watcher struct {
	id, shard int
	cms       corev1client.ConfigMapInterface
	segments  []segment
	opened    chan struct{} // closed when the first watch is open
	isOpen    bool          // opened is closed (run's own)
	fence     chan struct{} // closed when the fence is seen
	done      chan struct{} // closed when run returns
	err       error         // why it gave up, if it did
}

type segment struct {
	from   uint64            // events of this segment come after it
	listed map[string]uint64 // the relist that began it (nil: the first)
	events []event
	gone   bool // the server ended it with 410 Gone
}

type event struct {
	typ  watch.EventType
	name string
	rv   uint64
}

// startWatchers opens o.Watches watches from resourceVersion from, spread
// over the shards and the clients, and returns once each is open.
func startWatchers(ctx context.Context, clients []kubernetes.Interface, o Options, from string) ([]*watcher, error) {
	ws := make([]*watcher, o.Watches)
	for i := range ws {
		ws[i] = &watcher{id: i, shard: i % shards, cms: clients[i%len(clients)].CoreV1().ConfigMaps(o.Namespace),
			segments: []segment{{from: rv(from)}},
			opened:   make(chan struct{}), fence: make(chan struct{}), done: make(chan struct{})}
		go ws[i].run(ctx)
	}
	for _, w := range ws {
		select {
		case <-w.opened:
		case <-w.done:
			return nil, fmt.Errorf("watch %d: %w", w.id, w.err)
		}
	}
	return ws, nil
}

func (w *watcher) run(ctx context.Context) {
	defer close(w.done)
	sel := shardLabel + "=" + strconv.Itoa(w.shard)
	for failures := 0; ctx.Err() == nil; {
		wi, err := w.cms.Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: strconv.FormatUint(w.resumeFrom(), 10)})
		switch {
		case err == nil:
			failures = 0
			if !w.isOpen {
				close(w.opened)
				w.isOpen = true
			}
			if w.consume(ctx, wi) {
				return
			}
		case outcome(err) == "expired":
			if w.err = w.relist(ctx, sel); w.err != nil {
				return
			}
		case failures == 20:
			w.err = fmt.Errorf("open: %w", err)
			return
		default:
			failures++
			select { // a back-off, not a synchronisation
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// resumeFrom is the resourceVersion to watch from: the last event seen.
func (w *watcher) resumeFrom() uint64 {
	s := &w.segments[len(w.segments)-1]
	if n := len(s.events); n > 0 {
		return s.events[n-1].rv
	}
	return s.from
}

// consume records wi's events until it ends (false: resume) or the fence
// or ctx's end came (true).
func (w *watcher) consume(ctx context.Context, wi watch.Interface) bool {
	defer wi.Stop()
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return true
		case ev, ok = <-wi.ResultChan():
		}
		switch {
		case !ok:
			return false
		case ev.Type == watch.Error:
			err := apierrors.FromObject(ev.Object)
			if outcome(err) != "expired" {
				return false // resume: the server said why in err
			}
			if w.err = w.relist(ctx, shardLabel+"="+strconv.Itoa(w.shard)); w.err != nil {
				return true
			}
			return false
		case ev.Type == watch.Bookmark:
			continue
		}
		cm, isCM := ev.Object.(*corev1.ConfigMap)
		if !isCM {
			w.err = fmt.Errorf("event %s of a %T", ev.Type, ev.Object)
			return true
		}
		s := &w.segments[len(w.segments)-1]
		s.events = append(s.events, event{ev.Type, cm.Name, rv(cm.ResourceVersion)})
		if ev.Type == watch.Added && cm.Name == fenceName(w.shard) {
			close(w.fence)
			return true
		}
	}
}

// relist ends the current segment (410 Gone) and starts one from a list.
func (w *watcher) relist(ctx context.Context, sel string) error {
	ctx, cancel := guard(ctx)
	defer cancel()
	list, err := w.cms.List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return fmt.Errorf("relist: %w", err)
	}
	w.segments[len(w.segments)-1].gone = true
	listed := map[string]uint64{}
	for _, cm := range list.Items {
		listed[cm.Name] = rv(cm.ResourceVersion)
	}
	w.segments = append(w.segments, segment{from: rv(list.ResourceVersion), listed: listed})
	return nil
}

func (w *watcher) eventCount() int {
	n := 0
	for _, s := range w.segments {
		n += len(s.events)
	}
	return n
}

// awaitFences waits until every watch saw its fence, or gave up, for at
// most a minute: a watch that falls that far behind is a finding.
func awaitFences(ctx context.Context, ws []*watcher) []string {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var problems []string
	for _, w := range ws {
		select {
		case <-w.fence:
		case <-w.done:
			if fenced(w) {
				continue
			}
			problems = append(problems, fmt.Sprintf("watch %d ended before its fence: %v", w.id, w.err))
		case <-ctx.Done():
			problems = append(problems, fmt.Sprintf("watch %d: no fence within a minute (%d events seen)", w.id, w.eventCount()))
		}
	}
	return problems
}

func fenced(w *watcher) bool {
	select {
	case <-w.fence:
		return true
	default:
		return false
	}
}
