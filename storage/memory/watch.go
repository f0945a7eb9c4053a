package memory

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/storage"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"

	"github.com/kubeembed/apiserver/internal/globals"
)

const (
	// resultBuffer is the watch result channel's capacity, as etcd3's store.
	resultBuffer = 100
	// readBatch bounds how many events a watch copies out under the read lock.
	readBatch = 256
)

// watcher streams one watch. It reads the backend's event log at its own
// pace, so a slow consumer never blocks writers or other watches; one that
// falls behind the history window gets a 410 error, like an etcd watcher
// whose start revision was compacted.
type watcher struct {
	s              *store
	pred           storage.SelectionPredicate
	acceptAll      bool
	progressNotify bool
	recordTimes    bool
	ctx            context.Context
	cancel         context.CancelFunc
	result         chan watch.Event
	waiter         *waiter
	// initialAt is the revision the initial state is read at: the latest
	// when the watch is set up, not when its goroutine first runs, so that
	// a write a client makes once Watch has returned is one of its events
	// (read later, a create and delete in between were in neither the
	// state nor the events; kube-apiserver's watch cache takes its state
	// in Watch too).
	initialAt int64
}

func (s *store) watch(ctx context.Context, key string, rev int64, opts storage.ListOptions) (watch.Interface, error) {
	if opts.Recursive && !strings.HasSuffix(key, "/") {
		return nil, fmt.Errorf(`recursive key needs to end with "/"`)
	}
	if opts.ProgressNotify && s.newFunc == nil {
		return nil, apierrors.NewInternalError(errors.New("progressNotify for watch is unsupported by the memory storage because no newFunc was provided"))
	}
	watchList := globals.Features().Enabled(features.WatchList)
	sendInitial := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	forceInitial := (opts.SendInitialEvents == nil && rev == 0) || (watchList && sendInitial)
	endBookmark := watchList && sendInitial && opts.Predicate.AllowWatchBookmarks
	if rev == 0 && watchList && opts.SendInitialEvents != nil && !sendInitial {
		// "Start from now" without initial state.
		rev = s.b.Revision()
	}

	w := &watcher{
		s:              s,
		pred:           opts.Predicate,
		acceptAll:      opts.Predicate.Empty(),
		progressNotify: opts.ProgressNotify,
		recordTimes:    opts.RecordTimestamps,
		result:         make(chan watch.Event, resultBuffer),
		waiter:         newWaiter(key, opts.Recursive),
	}
	if w.acceptAll {
		w.pred = storage.Everything
	}
	w.ctx, w.cancel = context.WithCancel(ctx)

	s.b.mu.Lock()
	if s.b.closed {
		s.b.mu.Unlock()
		w.cancel()
		return nil, ErrClosed
	}
	w.initialAt = s.b.rev
	s.b.watchers.Add(1)
	s.b.addWaiter(w.waiter)
	s.b.mu.Unlock()
	go func() {
		defer s.b.watchers.Done()
		defer s.b.removeWaiter(w.waiter)
		defer close(w.result)
		defer w.cancel()
		w.run(rev, forceInitial, endBookmark)
	}()
	// Tell API priority and fairness the watch is set up, so the request's
	// seat is released.
	utilflowcontrol.WatchInitialized(ctx)
	return w, nil
}

// Stop implements watch.Interface.
func (w *watcher) Stop() { w.cancel() }

// ResultChan implements watch.Interface.
func (w *watcher) ResultChan() <-chan watch.Event { return w.result }

// begin sends what comes before the changes after rev: the initial state
// (forceInitial) and the bookmark that ends it (endBookmark). It returns the
// revision of the first change to send, and false if the watch is over.
func (w *watcher) begin(rev int64, forceInitial, endBookmark bool) (next int64, ok bool) {
	next = rev + 1
	if forceInitial {
		if cur := w.initialAt; rev > 0 && rev > cur {
			w.sendError(storage.NewTooLargeResourceVersionError(uint64(rev), uint64(cur), 1))
			return 0, false
		}
		at, ok := w.sendInitialState()
		if !ok {
			return 0, false
		}
		next = at + 1
	}
	if endBookmark && !w.sendBookmark(next-1, true) {
		return 0, false
	}
	return next, true
}

func (w *watcher) run(rev int64, forceInitial, endBookmark bool) {
	b := w.s.b
	next, ok := w.begin(rev, forceInitial, endBookmark)
	if !ok {
		return
	}
	var tick <-chan time.Time
	if w.progressNotify {
		t := time.NewTicker(b.opts.ProgressNotifyInterval)
		defer t.Stop()
		tick = t.C
	}
	// bookmark: progress was asked for; it is sent once everything
	// committed until then is read, at the revision read up to.
	bookmark := false
	for {
		progress := b.progressCh()
		evs, after, err := b.changes(w.waiter, next, readBatch)
		if err != nil {
			w.sendError(apierrors.NewResourceExpired(msgWatchExpired))
			return
		}
		for i := range evs {
			ev := &evs[i]
			if !w.matchesKey(ev.key) {
				continue
			}
			out, err := w.transform(ev)
			if err != nil {
				w.sendError(err)
				return
			}
			if out != nil && !w.send(*out) {
				return
			}
		}
		next = after
		if len(evs) > 0 {
			continue
		}
		if bookmark {
			if !w.sendBookmark(next-1, false) {
				return
			}
			bookmark = false
		}
		select {
		case <-w.ctx.Done():
			return
		case <-b.done:
			return
		case <-w.waiter.wake:
		case <-progress:
			bookmark = bookmark || w.progressNotify
		case <-tick:
			bookmark = true
		}
	}
}

func (w *watcher) matchesKey(key string) bool { return w.waiter.matches(key) }

// sendInitialState sends the state at initialAt as ADDED events and
// returns the revision it was read at.
func (w *watcher) sendInitialState() (int64, bool) {
	var res rangeResult
	var err error
	key := w.waiter.key
	if w.waiter.recursive {
		res, err = w.s.b.rangeKeys(key, key, w.initialAt, 0)
		defer func() { releaseKVs(res.kvs) }()
	} else {
		var item kv
		var found bool
		var cur int64
		item, found, cur, err = w.s.b.get(key, w.initialAt)
		if res.rev = w.initialAt; res.rev == 0 { // an empty backend: read at cur
			res.rev = cur
		}
		if found {
			res.kvs = []kv{item}
		}
	}
	if err != nil {
		w.sendError(err)
		return 0, false
	}
	for _, item := range res.kvs {
		obj, send, err := w.current(item.key, item.value, item.memo, item.modRev)
		if err != nil {
			w.sendError(err)
			return 0, false
		}
		if !w.matches(obj) {
			continue
		}
		if !w.send(watch.Event{Type: watch.Added, Object: send}) {
			return 0, false
		}
	}
	return res.rev, true
}

// current returns the object of a version at its own revision (a change's
// new state, an initial state's object) and what to send for it: the object
// shared among the store's watches (shared.go). The object is only read.
func (w *watcher) current(key string, data []byte, m *memo, rev int64) (obj, send runtime.Object, err error) {
	if m == nil || w.recordTimes {
		obj, err = w.decode(key, data, m, rev)
		return obj, obj, err
	}
	plain, _, err := w.s.xf().TransformFromStorage(w.ctx, data, dataCtx(key))
	if err != nil {
		return nil, nil, err
	}
	if sh := m.watchedBy(w.s); sh != nil {
		return sh.obj, sh, nil
	}
	if obj, err = w.decodePlain(plain, m, rev); err != nil {
		return nil, nil, err
	}
	sh := m.share(w.s, obj)
	return sh.obj, sh, nil
}

func (w *watcher) decode(key string, data []byte, m *memo, rev int64) (runtime.Object, error) {
	plain, _, err := w.s.xf().TransformFromStorage(w.ctx, data, dataCtx(key))
	if err != nil {
		return nil, err
	}
	return w.decodePlain(plain, m, rev)
}

// decodePlain decodes a version's untransformed bytes, or copies the object
// the store kept of it, and sets its resourceVersion to rev.
func (w *watcher) decodePlain(plain []byte, m *memo, rev int64) (runtime.Object, error) {
	var err error
	obj := w.s.recall(m)
	if obj == nil {
		if obj, err = runtime.Decode(w.s.codec, plain); err != nil {
			return nil, err
		}
	}
	if err := w.s.versioner.UpdateObject(obj, uint64(rev)); err != nil {
		return nil, fmt.Errorf("failure to version api object (%d) %#v: %v", rev, obj, err)
	}
	return obj, nil
}

func (w *watcher) matches(obj runtime.Object) bool {
	if w.acceptAll {
		return true
	}
	ok, err := w.pred.Matches(obj)
	return err == nil && ok
}

// transform turns a committed change into the event this watch sees, or nil.
// An object that moves into the selector is ADDED, one that moves out is
// DELETED with its previous state, as etcd3's watcher reports.
func (w *watcher) transform(ev *event) (*watch.Event, error) {
	var cur, curSend, prev runtime.Object
	var err error
	if !ev.deleted {
		if cur, curSend, err = w.current(ev.key, ev.value, ev.memo, ev.rev); err != nil {
			return nil, err
		}
	}
	if ev.prevValue != nil && (ev.deleted || !w.acceptAll) {
		// The previous state carries the revision of the change, so a
		// DELETED event has the deletion's resourceVersion.
		if prev, err = w.decode(ev.key, ev.prevValue, ev.prevMemo, ev.rev); err != nil {
			if ev.deleted && globals.Features().Enabled(features.AllowUnsafeMalformedObjectDeletion) {
				// An object that could not be read was deleted on purpose
				// (unsafe deletion); say so, as etcd3's watcher does.
				return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
					Status:  metav1.StatusFailure,
					Code:    http.StatusInternalServerError,
					Reason:  metav1.StatusReasonStoreReadError,
					Message: fmt.Sprintf("saw a DELETED event, but object data is corrupt - %v", err),
				}}
			}
			return nil, err
		}
	}
	var out *watch.Event
	switch {
	case ev.deleted:
		if prev != nil && w.matches(prev) {
			out = &watch.Event{Type: watch.Deleted, Object: prev}
		}
	case ev.created():
		if w.matches(cur) {
			out = &watch.Event{Type: watch.Added, Object: cur}
		}
	case w.acceptAll:
		out = &watch.Event{Type: watch.Modified, Object: cur}
	default:
		now, before := w.matches(cur), prev != nil && w.matches(prev)
		switch {
		case now && before:
			out = &watch.Event{Type: watch.Modified, Object: cur}
		case now:
			out = &watch.Event{Type: watch.Added, Object: cur}
		case before:
			out = &watch.Event{Type: watch.Deleted, Object: prev}
		}
	}
	switch {
	case out == nil:
	case w.recordTimes:
		out.Object = &timedObject{Object: out.Object, at: ev.at}
	case out.Object == cur:
		out.Object = curSend
	}
	return out, nil
}

func (w *watcher) sendBookmark(rev int64, initialEventsEnd bool) bool {
	obj := w.s.newFunc()
	if err := w.s.versioner.UpdateObject(obj, uint64(rev)); err != nil {
		w.sendError(fmt.Errorf("failed to propagate object resource version: %w", err))
		return false
	}
	if initialEventsEnd {
		if err := storage.AnnotateInitialEventsEndBookmark(obj); err != nil {
			w.sendError(fmt.Errorf("annotate initial-events-end bookmark for %v: %w", w.s.gr, err))
			return false
		}
	}
	return w.send(watch.Event{Type: watch.Bookmark, Object: obj})
}

func (w *watcher) send(e watch.Event) bool {
	select {
	case w.result <- e:
		return true
	case <-w.ctx.Done():
		return false
	}
}

// sendError delivers err as an ERROR event with a metav1.Status, unless the
// watch was cancelled.
func (w *watcher) sendError(err error) {
	if errors.Is(err, context.Canceled) || w.ctx.Err() != nil {
		return
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		status = apierrors.NewInternalError(err)
	}
	st := status.Status()
	w.send(watch.Event{Type: watch.Error, Object: &st})
}

// timedObject carries the time a change was committed, for the watch cache's
// latency metrics (storage.ListOptions.RecordTimestamps).
type timedObject struct {
	runtime.Object
	at time.Time
}

var _ storage.WatchEventWithRecordTime = (*timedObject)(nil)

func (t *timedObject) GetObjectMeta() metav1.Object {
	m, _ := meta.Accessor(t.Object)
	return m
}

func (t *timedObject) DeepCopyObject() runtime.Object {
	return &timedObject{Object: t.Object.DeepCopyObject(), at: t.at}
}

func (t *timedObject) RecordTime() time.Time  { return t.at }
func (t *timedObject) Unwrap() runtime.Object { return t.Object }
