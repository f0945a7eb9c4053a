package controlplane

import (
	"fmt"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
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
type flowSchemaStatus struct {
	observer *controller.Observer
	schemas  flowcontrollisters.FlowSchemaLister
	levels   flowcontrollisters.PriorityLevelConfigurationLister
}

// newFlowSchemaStatus watches the FlowSchemas and priority levels of inf,
// before inf starts.
func newFlowSchemaStatus(inf informers.SharedInformerFactory, log *writes.Log) (*flowSchemaStatus, error) {
	fs, pl := inf.Flowcontrol().V1().FlowSchemas(), inf.Flowcontrol().V1().PriorityLevelConfigurations()
	s := &flowSchemaStatus{observer: controller.NewObserver(log), schemas: fs.Lister(), levels: pl.Lister()}
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

// Idle returns nil once every FlowSchema written has the Dangling
// condition the configuration controller writes for it.
func (s *flowSchemaStatus) Idle(written map[schema.GroupResource]uint64) error {
	if err := s.observer.CaughtUp(written); err != nil {
		return fmt.Errorf("priority and fairness: %w", err)
	}
	levels, err := s.levels.List(labels.Everything())
	if err != nil {
		return err
	}
	// The mandatory levels count as found when missing: the controller
	// imagines them.
	found := map[string]bool{flowcontrolv1.PriorityLevelConfigurationNameExempt: true,
		flowcontrolv1.PriorityLevelConfigurationNameCatchAll: true}
	for _, pl := range levels {
		found[pl.Name] = true
	}
	schemas, err := s.schemas.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, fs := range schemas {
		if !danglingWritten(fs, found[fs.Spec.PriorityLevelConfiguration.Name]) {
			return fmt.Errorf("priority and fairness: FlowSchema %s: its Dangling condition is not written yet", fs.Name)
		}
	}
	return nil
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
