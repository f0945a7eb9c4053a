package garbagecollector

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeembed/apiserver/internal/controller"
	"github.com/kubeembed/apiserver/internal/writes"
)

// errClusterScopedWithNamespacedOwner: a cluster-scoped object cannot have
// a namespaced owner; the reference is left alone, as upstream.
var errClusterScopedWithNamespacedOwner = errors.New("cluster-scoped object refers to a namespaced owner")

// unobservedWait is how long a worker waits before it checks again an owner
// that exists but no informer has shown (a kind no monitor watches, or an
// informer behind): not an error, so WaitIdle does not wait for it.
const unobservedWait = time.Second

// snapshot is a node as a worker needs it, copied under the graph's lock.
type snapshot struct {
	identity                         identity
	virtual                          bool
	beingDeleted, deletingDependents bool
	dependents                       int
	// blocking are the dependents blocking the node's deletion, and
	// whether each is itself deleting its dependents.
	blocking         []types.UID
	blockingDeleting []bool
	anyDepDeleting   bool
}

func (gc *GarbageCollector) snapshot(uid types.UID) (snapshot, bool) {
	g := gc.graph
	g.mu.Lock()
	defer g.mu.Unlock()
	n, ok := g.nodes[uid]
	if !ok {
		return snapshot{}, false
	}
	s := snapshot{identity: n.identity, virtual: n.virtual, beingDeleted: n.beingDeleted,
		deletingDependents: n.deletingDependents, dependents: len(n.dependents)}
	for dep := range n.dependents {
		s.anyDepDeleting = s.anyDepDeleting || dep.deletingDependents
		if dep.blocks(uid) {
			s.blocking = append(s.blocking, dep.identity.UID)
			s.blockingDeleting = append(s.blockingDeleting, dep.deletingDependents)
		}
	}
	return s, true
}

// attemptToDelete decides about one object: delete it if it has no owner
// left, drop references to owners that are gone, or finish a foreground
// deletion.
func (gc *GarbageCollector) attemptToDelete(ctx context.Context, key string) error {
	s, ok := gc.snapshot(types.UID(key))
	if !ok || s.beingDeleted && !s.deletingDependents {
		return nil
	}
	latest, err := gc.get(ctx, s.identity)
	switch {
	case apierrors.IsNotFound(err) || err == nil && latest.UID != s.identity.UID:
		gc.apply(gc.removed(s.identity, true))
		return nil
	case errors.Is(err, errClusterScopedWithNamespacedOwner):
		return nil
	case err != nil:
		return mappingLater(err)
	}
	if s.deletingDependents {
		return gc.deletingDependents(ctx, s, latest)
	}
	if err := gc.collect(ctx, s, latest); err != nil {
		return err
	}
	if s.virtual {
		return &controller.Later{After: unobservedWait, Reason: fmt.Sprintf("owner %s exists but is not observed", s.identity)}
	}
	return nil
}

// collect applies the owner references of latest.
func (gc *GarbageCollector) collect(ctx context.Context, s snapshot, latest *metav1.PartialObjectMetadata) error {
	if len(latest.OwnerReferences) == 0 {
		return nil
	}
	solid, dangling, waiting, err := gc.classify(ctx, s.identity, latest.OwnerReferences)
	if errors.Is(err, errClusterScopedWithNamespacedOwner) {
		return nil
	}
	if err != nil {
		return mappingLater(err)
	}
	switch {
	case len(solid) > 0:
		if len(dangling)+len(waiting) == 0 {
			return nil
		}
		return gc.removeOwnerRefs(ctx, s.identity, append(dangling, waiting...))
	case len(waiting) > 0 && s.dependents > 0:
		if s.anyDepDeleting {
			// A cycle may wait on itself: stop blocking the owners.
			if err := gc.unblockOwners(ctx, s.identity); err != nil {
				return err
			}
		}
		return gc.deleteObject(ctx, s.identity, latest, metav1.DeletePropagationForeground)
	}
	policy := metav1.DeletePropagationBackground
	switch {
	case hasFinalizer(latest, metav1.FinalizerOrphanDependents):
		policy = metav1.DeletePropagationOrphan
	case hasFinalizer(latest, metav1.FinalizerDeleteDependents):
		policy = metav1.DeletePropagationForeground
	}
	return gc.deleteObject(ctx, s.identity, latest, policy)
}

// classify sorts an object's owner references: owners that exist, owners
// that are gone (or have another UID), and owners being deleted in the
// foreground.
func (gc *GarbageCollector) classify(ctx context.Context, item identity, refs []metav1.OwnerReference) (solid, dangling, waiting []types.UID, err error) {
	for _, ref := range refs {
		owner, err := gc.owner(ctx, item, ref)
		if err != nil {
			return nil, nil, nil, err
		}
		switch {
		case owner == nil:
			dangling = append(dangling, ref.UID)
		case owner.DeletionTimestamp != nil && hasFinalizer(owner, metav1.FinalizerDeleteDependents):
			waiting = append(waiting, ref.UID)
		default:
			solid = append(solid, ref.UID)
		}
	}
	return solid, dangling, waiting, nil
}

// owner is the live owner ref points at from item, nil if it is absent.
func (gc *GarbageCollector) owner(ctx context.Context, item identity, ref metav1.OwnerReference) (*metav1.PartialObjectMetadata, error) {
	cluster, local := ownerIdentity(ref, ""), ownerIdentity(ref, item.Namespace)
	if gc.absent.has(cluster) || gc.absent.has(local) {
		return nil, nil
	}
	owner, err := gc.get(ctx, local)
	if apierrors.IsNotFound(err) || err == nil && owner.UID != ref.UID {
		if namespaced, _ := gc.namespaced(ctx, local); !namespaced {
			local = cluster
		}
		gc.absent.add(local)
		return nil, nil
	}
	return owner, err
}

// deletingDependents finishes a foreground deletion once no dependent
// blocks it, and otherwise makes sure the blocking ones are deleted.
//
// "No dependent blocks it" is the graph's view: the graph must have seen
// every object written before the owner's deletion, or a dependent created
// just before, whose informer is behind the owner's (the owner's monitor
// just started, for a new CRD), would not hold the owner back. Until it has,
// the owner is retried as after a failure, not later: the wait is on the
// collector's own work, and WaitIdle must not see the collector idle
// meanwhile (it did, under load: an owner of a cycle outlived WaitIdle).
func (gc *GarbageCollector) deletingDependents(ctx context.Context, s snapshot, owner *metav1.PartialObjectMetadata) error {
	if len(s.blocking) == 0 {
		if err := gc.Observer.CaughtUpTo(gc.cfg.Revisions.Snapshot(), writes.Revision(owner)); err != nil {
			return fmt.Errorf("the graph is behind the owner's deletion: %w", err)
		}
		now, ok := gc.snapshot(s.identity.UID)
		if !ok {
			return nil
		}
		if len(now.blocking) > 0 {
			return gc.deletingDependents(ctx, now, owner)
		}
		return gc.removeFinalizer(ctx, s.identity, metav1.FinalizerDeleteDependents)
	}
	for i, uid := range s.blocking {
		if !s.blockingDeleting[i] {
			gc.deleteQueue.Add(string(uid))
		}
	}
	return nil
}

// attemptToOrphan removes the references to an owner being deleted with
// the orphan finalizer from its dependents, then the finalizer.
//
// The dependents are the graph's: as for a foreground deletion, the graph
// must first have seen every object written before the owner's deletion, or
// a dependent created just before (its informer behind the owner's) would
// keep its reference, and be collected once the owner is gone.
func (gc *GarbageCollector) attemptToOrphan(ctx context.Context, key string) error {
	if err := gc.caughtUpWithOrphaning(ctx, types.UID(key)); err != nil {
		return err
	}
	g := gc.graph
	g.mu.Lock()
	n, ok := g.nodes[types.UID(key)]
	var owner identity
	var dependents []identity
	if ok {
		owner = n.identity
		for dep := range n.dependents {
			dependents = append(dependents, dep.identity)
		}
	}
	g.mu.Unlock()
	if !ok {
		return nil
	}
	var errs []error
	for _, dep := range dependents {
		if err := gc.removeOwnerRefs(ctx, dep, []types.UID{owner.UID}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("orphaning %s failed, %v", dep, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("failed to orphan dependents of owner %s, got errors: %w", owner, errors.Join(errs...))
	}
	return gc.removeFinalizer(ctx, owner, metav1.FinalizerOrphanDependents)
}

// caughtUpWithOrphaning returns nil once the graph has seen every write up
// to the revision that started the orphaning of uid (retried as a failure
// until then, so that WaitIdle waits for it).
func (gc *GarbageCollector) caughtUpWithOrphaning(ctx context.Context, uid types.UID) error {
	gc.graph.mu.Lock()
	n, ok := gc.graph.nodes[uid]
	gc.graph.mu.Unlock()
	if !ok {
		return nil
	}
	owner, err := gc.get(ctx, n.identity)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := gc.Observer.CaughtUpTo(gc.cfg.Revisions.Snapshot(), writes.Revision(owner)); err != nil {
		return fmt.Errorf("the graph is behind the owner's orphaning: %w", err)
	}
	return nil
}

// mappingLater turns a failure to map a kind to a resource (an owner of a
// kind the server does not serve) into a later check: it is not the
// collector's failure, and WaitIdle should not wait for it.
func mappingLater(err error) error {
	if meta.IsNoMatchError(err) {
		return &controller.Later{After: 10 * unobservedWait, Reason: err.Error()}
	}
	return err
}
