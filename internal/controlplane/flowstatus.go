package controlplane

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/util/shufflesharding"
	flowcontrolapply "k8s.io/client-go/applyconfigurations/flowcontrol/v1"
	"k8s.io/client-go/informers"
	flowcontrolclient "k8s.io/client-go/kubernetes/typed/flowcontrol/v1"
	flowcontrollisters "k8s.io/client-go/listers/flowcontrol/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeembed/apiserver/internal/controller"
	"github.com/kubeembed/apiserver/internal/writes"
)

// flowSchemaStatus is what WaitIdle asks of API Priority and Fairness.
// Its configuration controller (upstream's, started by a post-start hook)
// writes each FlowSchema's Dangling condition from a queue of its own,
// after the informers show a FlowSchema or priority level change, and
// retries a failed write after a backoff: neither shows as a write
// WaitIdle could wait for. So WaitIdle waits until the informers it shares
// with that controller have seen every write to both resources and each
// FlowSchema's condition is what the controller would write from them;
// the controller then has nothing to write. Without it a snapshot taken
// after WaitIdle could miss a status write still queued, which every
// restore to that snapshot then took back and the controller wrote again.
//
// The controller writes through client: its status writes return once
// the informers show them. Without that, a sync while its informer did
// not yet show its last write wrote the same condition again (a new
// transition time, a new change, another sync); after 6 writes of a
// FlowSchema in a minute the controller delays the next 30 to 75 s, and
// a start under load (-race, many servers at once) left a condition
// written while its priority level was not yet in the informer (NotFound)
// that long.
type flowSchemaStatus struct {
	observer *controller.Observer
	schemas  flowcontrollisters.FlowSchemaLister
	levels   flowcontrollisters.PriorityLevelConfigurationLister

	mu sync.Mutex
	// written are the times of the controller's status writes of each
	// FlowSchema in the last minute: it holds back the next of one
	// written more than 5 times (its shouldDelayUpdate), and WaitIdle
	// does not wait for that.
	written map[string][]time.Time
	writing map[string]int // status writes under way, by FlowSchema
}

// newFlowSchemaStatus watches the FlowSchemas and priority levels of inf,
// before inf starts.
func newFlowSchemaStatus(inf informers.SharedInformerFactory, log *writes.Log) (*flowSchemaStatus, error) {
	fs, pl := inf.Flowcontrol().V1().FlowSchemas(), inf.Flowcontrol().V1().PriorityLevelConfigurations()
	s := &flowSchemaStatus{observer: controller.NewObserver(log), schemas: fs.Lister(), levels: pl.Lister(),
		written: map[string][]time.Time{}, writing: map[string]int{}}
	for gr, informer := range map[schema.GroupResource]cache.SharedIndexInformer{
		flowcontrolv1.Resource("flowschemas"):                 fs.Informer(),
		flowcontrolv1.Resource("prioritylevelconfigurations"): pl.Informer(),
	} {
		if err := s.observer.Watch(gr, informer, cache.ResourceEventHandlerFuncs{}); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// client is c, whose FlowSchemas' status applies return once the
// informers show what they wrote (at most statusSeenTimeout, or until ctx
// ends).
func (s *flowSchemaStatus) client(ctx context.Context, c flowcontrolclient.FlowcontrolV1Interface) flowcontrolclient.FlowcontrolV1Interface {
	return readsOwnStatus{FlowcontrolV1Interface: c, ctx: ctx, status: s}
}

// statusSeenTimeout bounds the wait for the informers to show a status
// write.
const statusSeenTimeout = 10 * time.Second

type readsOwnStatus struct {
	flowcontrolclient.FlowcontrolV1Interface
	ctx    context.Context
	status *flowSchemaStatus
}

func (c readsOwnStatus) FlowSchemas() flowcontrolclient.FlowSchemaInterface {
	return statusApplier{FlowSchemaInterface: c.FlowcontrolV1Interface.FlowSchemas(), c: c}
}

type statusApplier struct {
	flowcontrolclient.FlowSchemaInterface
	c readsOwnStatus
}

func (a statusApplier) ApplyStatus(ctx context.Context, fs *flowcontrolapply.FlowSchemaApplyConfiguration,
	opts metav1.ApplyOptions) (*flowcontrolv1.FlowSchema, error) {
	if fs.Name != nil {
		defer a.c.status.attempt(*fs.Name)()
	}
	out, err := a.FlowSchemaInterface.ApplyStatus(ctx, fs, opts)
	if err != nil {
		return out, err
	}
	wait, cancel := context.WithTimeout(a.c.ctx, statusSeenTimeout)
	defer cancel()
	written := map[schema.GroupResource]uint64{flowcontrolv1.Resource("flowschemas"): writes.Revision(out)}
	_ = controller.Wait(wait, func() error { return a.c.status.observer.CaughtUp(written) })
	return out, nil
}

// attempt notes a status write of the FlowSchema name, as the
// configuration controller counts it (before the write, failed or not),
// and returns what notes its end (once the informers show it).
func (s *flowSchemaStatus) attempt(name string) (done func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.written[name] = append(recent(s.written[name]), time.Now())
	s.writing[name]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.writing[name]--; s.writing[name] == 0 {
			delete(s.writing, name)
		}
	}
}

// heldBack reports whether the configuration controller puts off the
// status write of the FlowSchema name: more than 5 in the last minute and
// none under way (the sixth, once counted, is still to be waited for).
func (s *flowSchemaStatus) heldBack(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writing[name] > 0 {
		return false
	}
	times := recent(s.written[name])
	if len(times) == 0 {
		delete(s.written, name)
	} else {
		s.written[name] = times
	}
	return len(times) > 5
}

// recent is times without those over a minute old.
func recent(times []time.Time) []time.Time {
	minuteAgo := time.Now().Add(-time.Minute)
	return slices.DeleteFunc(times, func(t time.Time) bool { return t.Before(minuteAgo) })
}

// Idle returns nil once every FlowSchema written has the Dangling
// condition the configuration controller writes for it, but for one whose
// write the controller puts off on purpose (heldBack).
func (s *flowSchemaStatus) Idle(written map[schema.GroupResource]uint64) error {
	if err := s.observer.CaughtUp(written); err != nil {
		return fmt.Errorf("priority and fairness: %w", err)
	}
	levels, err := s.levels.List(labels.Everything())
	if err != nil {
		return err
	}
	// A missing mandatory level is imagined after the FlowSchemas are
	// digested: not found for them either.
	found := map[string]bool{}
	for _, pl := range levels {
		found[pl.Name] = digested(pl)
	}
	schemas, err := s.schemas.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, fs := range schemas {
		if !danglingWritten(fs, found[fs.Spec.PriorityLevelConfiguration.Name]) && !s.heldBack(fs.Name) {
			return fmt.Errorf("priority and fairness: FlowSchema %s: its Dangling condition is not written yet", fs.Name)
		}
	}
	return nil
}

// digested reports whether the configuration controller takes pl in (its
// queueSetCompleterForPL): it leaves out one it finds broken, and the
// FlowSchemas that name it are dangling.
func digested(pl *flowcontrolv1.PriorityLevelConfiguration) bool {
	spec := pl.Spec
	exempt := spec.Type == flowcontrolv1.PriorityLevelEnablementExempt
	switch {
	case (spec.Type == flowcontrolv1.PriorityLevelEnablementLimited) != (spec.Limited != nil),
		exempt != (spec.Exempt != nil), exempt != (pl.Name == flowcontrolv1.PriorityLevelConfigurationNameExempt):
		return false
	case spec.Limited == nil:
		return true
	}
	q := spec.Limited.LimitResponse.Queuing
	if (spec.Limited.LimitResponse.Type == flowcontrolv1.LimitResponseTypeReject) != (q == nil) {
		return false
	}
	if q == nil || q.Queues <= 0 {
		return true
	}
	_, err := shufflesharding.NewDealer(int(q.Queues), int(q.HandSize))
	return err == nil
}

// danglingWritten reports whether fs has the Dangling condition the
// configuration controller writes when its priority level is found or not
// (its presyncFlowSchemaStatus).
func danglingWritten(fs *flowcontrolv1.FlowSchema, found bool) bool {
	level := fs.Spec.PriorityLevelConfiguration.Name
	status, reason := flowcontrolv1.ConditionFalse, "Found"
	message := fmt.Sprintf("This FlowSchema references the PriorityLevelConfiguration object named %q and it exists", level)
	if !found {
		status, reason = flowcontrolv1.ConditionTrue, "NotFound"
		message = fmt.Sprintf("This FlowSchema references the PriorityLevelConfiguration object named %q but there is no such object", level)
	}
	for _, c := range fs.Status.Conditions {
		if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
			return c.Status == status && c.Reason == reason && c.Message == message
		}
	}
	return false
}
