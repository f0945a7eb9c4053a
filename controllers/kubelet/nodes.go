package kubelet

// Keeping simulated nodes: heartbeats, status reports, and what a test
// does to a node (add, remove, make NotReady, stop its kubelet).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	nodeutil "k8s.io/component-helpers/node/util"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/nodefeatures"
	"github.com/kubeembed/apiserver/internal/retry"
)

// The kubelet's cadences: the Lease is renewed every quarter of its
// duration; the node's status is reported on a change and every five
// minutes (nodeStatusReportFrequency).
const (
	leaseRenewInterval = leaseDuration * time.Second / 4
	statusReportPeriod = 5 * time.Minute
)

// ErrNoSuchNode is returned for a node the kubelet does not simulate.
var ErrNoSuchNode = errors.New("not a simulated node")

// registerInitial registers the nodes of the server's options, all at
// once (one after another, three nodes added 25 ms to a server's start),
// then reports them started.
func (k *Kubelet) registerInitial(ctx context.Context) {
	defer close(k.registered)
	var wg sync.WaitGroup
	for _, spec := range k.initial {
		n, err := k.add(spec)
		if err != nil {
			continue // validated by the server's options: a duplicate
		}
		wg.Go(func() {
			_ = retry.Until(ctx, func(ctx context.Context) error { return k.register(ctx, n) }) // fails only when ctx ends
		})
	}
	wg.Wait()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.firsts = map[string]node{}
	for name, n := range k.simulated {
		k.firsts[name] = node{spec: n.spec, index: n.index, uid: n.uid, bootID: n.bootID}
	}
}

// Reset forgets what was asked of the kubelet since the server started
// (Server.Reset): nodes added are no longer simulated, initial nodes
// removed are again (with their addresses, UID and boot ID), stopped or
// not-Ready ones run and report Ready again, and the rules, logs and
// handlers of containers are dropped. The nodes' objects and Leases are
// the storage restore's to put back; the pods' runtimes end as the
// restore deletes their pods.
func (k *Kubelet) Reset() {
	k.Parts.Reset()
	k.outcomes.reset()
	k.streams.reset()
	k.mu.Lock()
	defer k.mu.Unlock()
	for name := range k.simulated {
		if _, ok := k.firsts[name]; !ok {
			delete(k.simulated, name)
		}
	}
	for name, first := range k.firsts {
		if n, ok := k.simulated[name]; ok {
			n.notReady, n.stopped = "", false
			continue
		}
		n := first
		n.ipam = newIPAM(n.podCIDR())
		k.simulated[name] = &n
	}
}

// add makes spec a simulated node, with the next free addresses.
func (k *Kubelet) add(spec controllers.Node) (*node, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.simulated[spec.Name]; ok {
		return nil, fmt.Errorf("node %s is already simulated", spec.Name)
	}
	used := map[int]bool{}
	for _, n := range k.simulated {
		used[n.index] = true
	}
	index := 0
	for used[index] {
		index++
	}
	if index >= maxNodes {
		return nil, fmt.Errorf("node %s: kubeembed simulates at most %d nodes", spec.Name, maxNodes)
	}
	n := &node{spec: spec, index: index, bootID: newBootID()}
	n.ipam = newIPAM(n.podCIDR())
	k.simulated[spec.Name] = n
	return n, nil
}

// AddNode registers a simulated node and returns it once it is Ready, as a
// new kubelet joins a cluster.
func (k *Kubelet) AddNode(ctx context.Context, spec controllers.Node) (*corev1.Node, error) {
	if msgs := validation.IsDNS1123Subdomain(spec.Name); len(msgs) > 0 {
		return nil, fmt.Errorf("add node %q: %v", spec.Name, msgs)
	}
	n, err := k.add(spec)
	if err != nil {
		return nil, fmt.Errorf("add node: %w", err)
	}
	if err := k.register(ctx, n); err != nil {
		k.mu.Lock()
		delete(k.simulated, spec.Name)
		k.mu.Unlock()
		return nil, err
	}
	return k.client.CoreV1().Nodes().Get(ctx, spec.Name, metav1.GetOptions{})
}

// RemoveNode stops simulating the node and deletes it, as when a machine
// leaves a cluster: its pods stay bound to it until the pod garbage
// collector deletes them.
func (k *Kubelet) RemoveNode(ctx context.Context, name string) error {
	k.mu.Lock()
	_, ok := k.simulated[name]
	delete(k.simulated, name)
	k.mu.Unlock()
	if !ok {
		return fmt.Errorf("remove node %s: %w", name, ErrNoSuchNode)
	}
	err := k.client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// SetNodeReady makes the node's kubelet report it Ready, or not Ready with
// message as its reason (a runtime or network error a kubelet would name,
// such as "container runtime network not ready: NetworkReady=false
// reason:NetworkPluginNotReady message:Network plugin returns error: cni
// plugin not initialized"); an empty message is "container runtime is
// down".
func (k *Kubelet) SetNodeReady(ctx context.Context, name string, ready bool, message string) error {
	if !ready && message == "" {
		message = "container runtime is down"
	}
	k.mu.Lock()
	n, ok := k.simulated[name]
	if ok {
		n.notReady = ""
		if !ready {
			n.notReady = message
		}
	}
	k.mu.Unlock()
	if !ok {
		return fmt.Errorf("set node %s ready: %w", name, ErrNoSuchNode)
	}
	if err := k.reportStatus(ctx, n); err != nil {
		return err
	}
	if ready {
		k.requeuePods(name) // the runtime is back: the pods' status follows
	}
	return nil
}

// StopNode stops the node's kubelet: it no longer renews the node's Lease,
// reports its status or acts on its pods, as when a machine is cut off.
// The node lifecycle controller then marks it Unknown once its grace
// period is over (on the server's clock). StartNode starts it again.
func (k *Kubelet) StopNode(name string) error { return k.setStopped(name, true) }

// StartNode starts a stopped node's kubelet again: it reports the node's
// status and renews its Lease at once.
func (k *Kubelet) StartNode(ctx context.Context, name string) error {
	if err := k.setStopped(name, false); err != nil {
		return err
	}
	k.mu.Lock()
	n := k.simulated[name]
	k.mu.Unlock()
	if err := k.reportStatus(ctx, n); err != nil {
		return err
	}
	k.requeuePods(name)
	return k.renewLease(ctx, n)
}

func (k *Kubelet) setStopped(name string, stopped bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	n, ok := k.simulated[name]
	if !ok {
		return fmt.Errorf("node %s: %w", name, ErrNoSuchNode)
	}
	n.stopped = stopped
	return nil
}

// Nodes are the names of the simulated nodes.
func (k *Kubelet) Nodes() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for name := range k.simulated {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// reportStatus patches the node's status to what its kubelet reports now,
// with the events of conditions that changed.
func (k *Kubelet) reportStatus(ctx context.Context, n *node) error {
	cur, err := k.client.CoreV1().Nodes().Get(ctx, n.spec.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("report status of node %s: %w", n.spec.Name, err)
	}
	k.mu.Lock()
	want := cur.DeepCopy()
	want.Status.Conditions = n.conditions(cur.Status.Conditions, metav1.NewTime(k.clock.Now()))
	want.Status.DeclaredFeatures = nodefeatures.Declared() // setNodeStatus sets them at every sync
	want.Status.RuntimeHandlers = runtimeHandlers()
	k.mu.Unlock()
	if _, _, err := nodeutil.PatchNodeStatus(k.client.CoreV1(), types.NodeName(n.spec.Name), cur, want); err != nil {
		return fmt.Errorf("report status of node %s: %w", n.spec.Name, err)
	}
	k.nodeEvents(n, cur.Status.Conditions, want.Status.Conditions)
	return nil
}

// nodeEvents records the kubelet's event for each condition whose status
// changed (a Ready condition that did not exist before has none).
func (k *Kubelet) nodeEvents(n *node, old, now []corev1.NodeCondition) {
	reasons := map[corev1.NodeConditionType][2]string{
		corev1.NodeReady:          {"NodeReady", "NodeNotReady"},
		corev1.NodeMemoryPressure: {"NodeHasSufficientMemory", "NodeHasInsufficientMemory"},
		corev1.NodeDiskPressure:   {"NodeHasNoDiskPressure", "NodeHasDiskPressure"},
		corev1.NodePIDPressure:    {"NodeHasSufficientPID", "NodeHasInsufficientPID"},
	}
	rec := k.recorder(n.spec.Name)
	for _, c := range now {
		i := slices.IndexFunc(old, func(o corev1.NodeCondition) bool { return o.Type == c.Type })
		if i < 0 || old[i].Status == c.Status {
			continue
		}
		healthy := (c.Type == corev1.NodeReady) == (c.Status == corev1.ConditionTrue)
		reason := reasons[c.Type][1]
		if healthy {
			reason = reasons[c.Type][0]
		}
		rec.Eventf(n.ref(), corev1.EventTypeNormal, reason, "Node %s status is now: %s", n.spec.Name, reason)
	}
}

// renewLease creates or renews the node's Lease.
func (k *Kubelet) renewLease(ctx context.Context, n *node) error {
	k.mu.Lock()
	lease := n.lease(metav1.NewMicroTime(k.clock.Now()))
	k.mu.Unlock()
	leases := k.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	cur, err := leases.Get(ctx, n.spec.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	cur.Spec.RenewTime = lease.Spec.RenewTime
	_, err = leases.Update(ctx, cur, metav1.UpdateOptions{})
	return err
}

// heartbeatKey is the node queue's key of the kubelets' heartbeat (not a
// node name: those have no colon).
const heartbeatKey = ":heartbeat"

// beat queues the heartbeat every 10 s of the kubelet's clock. It runs in
// a clock's timer callback (for a fake clock, inside Step, which holds the
// clock's lock): it only queues, so that WaitIdle sees the beat pending.
func (k *Kubelet) beat() { k.nodeQueue.Add(heartbeatKey) }

// heartbeat renews every running node's Lease, reports each node's status
// every 5 minutes or when the server's differs from it (the node lifecycle
// controller marked it Unknown), as a kubelet's node status loop, and arms
// the next beat.
func (k *Kubelet) heartbeat(ctx context.Context) error {
	k.mu.Lock()
	report := k.clock.Since(k.reported) >= statusReportPeriod
	if report {
		k.reported = k.clock.Now()
	}
	k.nextBeat = k.clock.AfterFunc(leaseRenewInterval, k.beat)
	k.mu.Unlock()
	for _, n := range k.runningNodes() {
		if err := k.renewLease(ctx, n); err != nil {
			return err
		}
		if report || k.statusChanged(n) {
			if err := k.reportStatus(ctx, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// statusChanged tells whether the node's conditions on the server (as the
// informer has them) differ from those its kubelet reports, times aside,
// or its declared features from the kubelet's (nodeStatusHasChanged).
func (k *Kubelet) statusChanged(n *node) bool {
	cur, err := k.nodes.Get(n.spec.Name)
	if err != nil {
		return false
	}
	k.mu.Lock()
	want := n.conditions(cur.Status.Conditions, metav1.NewTime(k.clock.Now()))
	k.mu.Unlock()
	return !slices.Equal(cur.Status.DeclaredFeatures, nodefeatures.Declared()) ||
		!apiequality.Semantic.DeepEqual(cur.Status.RuntimeHandlers, runtimeHandlers()) ||
		!slices.EqualFunc(cur.Status.Conditions, want, func(a, b corev1.NodeCondition) bool {
			return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message
		})
}

// runningNodes are the registered nodes whose kubelet runs.
func (k *Kubelet) runningNodes() []*node {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []*node
	for _, n := range k.simulated {
		if n.uid != "" && !n.stopped {
			out = append(out, n)
		}
	}
	return out
}

// adopt takes over a Node that exists (a server restarted on its storage,
// or one a test created with the simulated annotation): its status is
// the kubelet's from now on.
func (k *Kubelet) adopt(ctx context.Context, n *node, now metav1.Time) (*corev1.Node, error) {
	cur, err := k.client.CoreV1().Nodes().Get(ctx, n.spec.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	want := cur.DeepCopy()
	obj := n.object(now)
	want.Status = obj.Status
	want.Status.Conditions = n.conditions(cur.Status.Conditions, now)
	updated, _, err := nodeutil.PatchNodeStatus(k.client.CoreV1(), types.NodeName(n.spec.Name), cur, want)
	return updated, err
}

// syncNode follows a Node object: one annotated as simulated that the
// kubelet does not run yet is taken over; a deleted simulated node is no
// longer simulated (its kubelet does not register it again, as upstream's).
func (k *Kubelet) syncNode(ctx context.Context, name string) error {
	if name == heartbeatKey {
		return k.heartbeat(ctx)
	}
	obj, err := k.nodes.Get(name)
	k.mu.Lock()
	n, simulated := k.simulated[name]
	k.mu.Unlock()
	switch {
	case apierrors.IsNotFound(err):
		if simulated && n.uid != "" {
			k.mu.Lock()
			delete(k.simulated, name)
			k.mu.Unlock()
		}
		return nil
	case err != nil:
		return err
	case simulated || obj.Annotations[controllers.SimulatedAnnotation] != "true":
		return nil
	}
	spec := controllers.Node{Name: name, Labels: obj.Labels, Taints: obj.Spec.Taints, Capacity: obj.Status.Capacity}
	if n, err = k.add(spec); err != nil {
		return nil // taken meanwhile, or too many nodes: nothing to retry
	}
	return k.register(ctx, n)
}
