package timing

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/watch"
)

// delayedWatch delivers a watch's events each after its own delay, in the
// order they came. It queues without bound rather than hold the inner
// watch back: a delay must not turn into the inner watch's back-pressure,
// which could end it (a memory watch that falls behind gets 410 Gone).
type delayedWatch struct {
	inner    watch.Interface
	out      chan watch.Event
	stop     chan struct{}
	stopOnce sync.Once
}

type pendingEvent struct {
	ev watch.Event
	at time.Time
}

// delayed returns w with each event delayed by a draw from d. The watch
// ends when w ends and every queued event is delivered, when it is
// stopped, or when ctx (the watch request's) ends.
func delayed(ctx context.Context, w watch.Interface, d Distribution, r *rand.Rand) watch.Interface {
	dw := &delayedWatch{inner: w, out: make(chan watch.Event), stop: make(chan struct{})}
	go dw.run(ctx, d, r)
	return dw
}

func (dw *delayedWatch) ResultChan() <-chan watch.Event { return dw.out }

func (dw *delayedWatch) Stop() {
	dw.stopOnce.Do(func() { close(dw.stop) })
	dw.inner.Stop()
}

func (dw *delayedWatch) run(ctx context.Context, d Distribution, r *rand.Rand) {
	defer close(dw.out)
	defer dw.inner.Stop()
	in := dw.inner.ResultChan()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var queue []pendingEvent
	var last time.Time // when the last queued event is due
	for in != nil || len(queue) > 0 {
		var send chan watch.Event
		var head watch.Event
		spin := false
		if len(queue) > 0 {
			switch wait := time.Until(queue[0].at); {
			case wait <= 0:
				send, head = dw.out, queue[0].ev
			case wait <= timerSlack: // see timerSlack
				spin = true
			default:
				timer.Reset(wait - timerSlack)
			}
		}
		if spin {
			if !dw.poll(ctx, in, &queue, &last, d, r) {
				return
			}
			continue
		}
		select {
		case ev, ok := <-in:
			if !ok {
				in = nil
				continue
			}
			queue = dw.enqueue(queue, ev, &last, d, r)
		case send <- head:
			queue[0] = pendingEvent{}
			queue = queue[1:]
		case <-timer.C:
		case <-dw.stop:
			return
		case <-ctx.Done():
			return
		}
	}
}

// enqueue queues ev with its delay.
func (dw *delayedWatch) enqueue(queue []pendingEvent, ev watch.Event, last *time.Time, d Distribution, r *rand.Rand) []pendingEvent {
	// Never before the event ahead of it: the watch keeps order.
	*last = later(*last, time.Now().Add(d.draw(r)))
	return append(queue, pendingEvent{ev, *last})
}

// poll takes what the watch's channels have ready without blocking, then
// yields: the head event is due within timerSlack. It returns false when
// the watch is over.
func (dw *delayedWatch) poll(ctx context.Context, in <-chan watch.Event, queue *[]pendingEvent, last *time.Time, d Distribution, r *rand.Rand) bool {
	select {
	case ev, ok := <-in:
		if ok {
			*queue = dw.enqueue(*queue, ev, last, d, r)
			return true
		}
		// The inner watch ended: deliver what is queued, then end.
		for _, p := range *queue {
			if wait(ctx, time.Until(p.at)) != nil {
				return false
			}
			select {
			case dw.out <- p.ev:
			case <-dw.stop:
				return false
			case <-ctx.Done():
				return false
			}
		}
		return false
	case <-dw.stop:
		return false
	case <-ctx.Done():
		return false
	default:
		runtime.Gosched()
		return true
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
