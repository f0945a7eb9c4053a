package garbagecollector

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// effects are what a graph change asks of the workers, applied once the
// graph's lock is released.
type effects struct {
	delete, orphan []types.UID
	// invalid are dependents with a reference to an owner in another
	// namespace, and that owner's UID: an event is recorded on each.
	invalid []invalidRef
}

type invalidRef struct {
	dependent identity
	ref       metav1.OwnerReference
}

func (e *effects) check(nodes ...*node) {
	for _, n := range nodes {
		e.delete = append(e.delete, n.identity.UID)
	}
}

func (e *effects) reportInvalid(dep *node, owner types.UID) {
	if i := slices.IndexFunc(dep.owners, func(r metav1.OwnerReference) bool { return r.UID == owner }); i >= 0 {
		e.invalid = append(e.invalid, invalidRef{dep.identity, dep.owners[i]})
	}
}

// handler feeds the graph from the informer of one resource.
func (gc *GarbageCollector) handler(gvk schema.GroupVersionKind) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { gc.apply(gc.observed(gvk, nil, obj)) },
		UpdateFunc: func(old, obj any) { gc.apply(gc.observed(gvk, old, obj)) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if m, err := meta.Accessor(obj); err == nil {
				gc.apply(gc.removed(identityOf(gvk, m), false))
			}
		},
	}
}

// observed records an added or updated object.
func (gc *GarbageCollector) observed(gvk schema.GroupVersionKind, old, obj any) (e effects) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return e
	}
	g := gc.graph
	g.mu.Lock()
	defer g.mu.Unlock()
	id := identityOf(gvk, m)
	n, found := g.nodes[id.UID]
	if found && n.virtual {
		if n.identity != id {
			// Dependents that named it otherwise are checked again.
			_, mismatch := matching(n.dependents, id)
			for _, dep := range mismatch {
				if id.Namespace != "" && dep.identity.Namespace != id.Namespace {
					e.reportInvalid(dep, id.UID)
				}
				e.check(dep)
			}
			n.identity = id
		}
		n.virtual = false
	}
	if !found {
		n = &node{identity: id, owners: m.GetOwnerReferences(), dependents: map[*node]struct{}{},
			beingDeleted: m.GetDeletionTimestamp() != nil}
		n.deletingDependents = n.beingDeleted && hasFinalizer(m, metav1.FinalizerDeleteDependents)
		check, invalid := g.insert(n)
		e.check(check...)
		for _, uid := range invalid {
			e.reportInvalid(n, uid)
		}
	} else {
		gc.ownersChanged(n, m.GetOwnerReferences(), &e)
		n.beingDeleted = n.beingDeleted || m.GetDeletionTimestamp() != nil
	}
	gc.transitions(old, m, n, &e)
	return e
}

// ownersChanged relinks n to its current owners; owners it no longer
// blocks are checked, as they may be waiting for it.
func (gc *GarbageCollector) ownersChanged(n *node, owners []metav1.OwnerReference, e *effects) {
	g := gc.graph
	added, removed, changed := diff(n.owners, owners)
	if len(added)+len(removed)+len(changed) == 0 {
		return
	}
	for _, r := range removed {
		if owner, ok := g.nodes[r.UID]; ok && isBlocking(r) {
			e.check(owner)
		}
	}
	for _, c := range changed {
		if owner, ok := g.nodes[c[1].UID]; ok && isBlocking(c[0]) && !isBlocking(c[1]) {
			e.check(owner)
		}
	}
	n.owners = owners
	check, invalid := g.link(n, added)
	e.check(check...)
	for _, uid := range invalid {
		e.reportInvalid(n, uid)
	}
	g.unlink(n, removed)
}

// transitions start orphaning or foreground deletion when an object's
// deletion begins with the orphan or foregroundDeletion finalizer.
func (gc *GarbageCollector) transitions(old any, m metav1.Object, n *node, e *effects) {
	if starts(old, m, metav1.FinalizerOrphanDependents) {
		e.orphan = append(e.orphan, n.identity.UID)
		return
	}
	if starts(old, m, metav1.FinalizerDeleteDependents) {
		n.deletingDependents = true
		for dep := range n.dependents {
			e.check(dep)
		}
		e.check(n)
	}
}

// starts reports whether m is being deleted with finalizer f and old was
// not (or there is no old).
func starts(old any, m metav1.Object, f string) bool {
	if m.GetDeletionTimestamp() == nil || !hasFinalizer(m, f) {
		return false
	}
	if old == nil {
		return true
	}
	o, err := meta.Accessor(old)
	return err != nil || o.GetDeletionTimestamp() == nil || !hasFinalizer(o, f)
}

func hasFinalizer(m metav1.Object, f string) bool { return slices.Contains(m.GetFinalizers(), f) }

// removed records that the object at id is gone: observed deleted, or
// (virtual) found absent by a worker. Its dependents are checked, and its
// owners if they wait for their dependents.
func (gc *GarbageCollector) removed(id identity, virtual bool) (e effects) {
	g := gc.graph
	g.mu.Lock()
	defer g.mu.Unlock()
	n, found := g.nodes[id.UID]
	if !found {
		return e
	}
	if virtual && (n.virtual || n.identity != id) {
		match, mismatch := matching(n.dependents, id)
		if !n.virtual || len(mismatch) > 0 {
			// Only the dependents that named it so lose their owner.
			if len(match) > 0 {
				gc.absent.add(id)
				e.check(match...)
			}
			if n.virtual && n.identity == id {
				n.identity = ownerIdentity(ownerRef(mismatch[0], id.UID), mismatch[0].identity.Namespace)
				e.check(n)
			}
			return e
		}
	}
	g.remove(n)
	if len(n.dependents) > 0 {
		gc.absent.add(id)
	}
	for dep := range n.dependents {
		e.check(dep)
	}
	for _, ref := range n.owners {
		if owner, ok := g.nodes[ref.UID]; ok && owner.deletingDependents {
			e.check(owner)
		}
	}
	return e
}

func ownerRef(n *node, uid types.UID) metav1.OwnerReference {
	for _, r := range n.owners {
		if r.UID == uid {
			return r
		}
	}
	return metav1.OwnerReference{UID: uid}
}

// apply queues the effects' work and records their events.
func (gc *GarbageCollector) apply(e effects) {
	for _, uid := range e.delete {
		gc.deleteQueue.Add(string(uid))
	}
	for _, uid := range e.orphan {
		gc.orphanQueue.Add(string(uid))
	}
	for _, inv := range e.invalid {
		ref := &corev1.ObjectReference{Kind: inv.dependent.Kind, APIVersion: inv.dependent.APIVersion,
			Namespace: inv.dependent.Namespace, Name: inv.dependent.Name, UID: inv.dependent.UID}
		owner := ownerIdentity(inv.ref, inv.dependent.Namespace)
		gc.recorder().Eventf(ref, corev1.EventTypeWarning, "OwnerRefInvalidNamespace",
			"ownerRef %s does not exist in namespace %q", owner, inv.dependent.Namespace)
	}
}
