package controller

import (
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// Dependents is the informer event handler of the objects a kind of owner
// controls (a ReplicaSet's pods, a Deployment's ReplicaSets, a DaemonSet's
// ControllerRevisions): it queues the owners' keys ("namespace/name") that
// an event concerns. Each of kube-controller-manager's workload controllers
// has its own addPod, updatePod and deletePod doing the same routing; this
// is its one copy here:
//
//   - an object with a controller reference wakes that owner, if the
//     reference resolves (see Resolve); an orphan wakes every owner whose
//     selector matches its labels, so that one can adopt it;
//   - an update wakes the previous owner too when the controller reference
//     changed, and matches an orphan again only when its labels or its
//     reference changed; an update that keeps the resourceVersion (a
//     relist's) wakes none;
//   - an object added while being deleted is handled as deleted: a
//     controller manager that restarts meets such pods, and they are no
//     creates to count;
//   - a tombstone (cache.DeletedFinalStateUnknown) is unwrapped.
//
// The hooks, all optional, are where the controllers differ (expectations,
// requeues after minReadySeconds, the Job controller's tracking
// finalizers). Each runs before its owner is queued, so that the worker
// that takes the key sees what the hook recorded.
type Dependents[T, O metav1.Object] struct {
	Queue *Queue
	// Kind is the owners' kind, as controller references name it.
	Kind string
	// Get reads an owner from the informer's cache.
	Get func(namespace, name string) (O, error)
	// List lists a namespace's owners from the informer's cache.
	List func(namespace string) ([]O, error)
	// Selector is an owner's label selector; an empty or invalid one
	// selects nothing.
	Selector func(O) *metav1.LabelSelector
	// Terminating is what an update that marks an object deleted does.
	Terminating Terminating
	// IgnoreOwnedAdds: an owned object's add wakes nobody (the DaemonSet
	// controller's ControllerRevisions: their owner writes them and does
	// not wait to see them).
	IgnoreOwnedAdds bool

	// Created is called with the owner of an object added.
	Created func(owner O, obj T)
	// Updated is called with the owner of an object updated.
	Updated func(owner O, old, obj T)
	// Previous is called with the owner old named when an update changed
	// the controller reference.
	Previous func(owner O, old, obj T)
	// Deleted is called with the owner of an object deleted or, as
	// Terminating says, being deleted.
	Deleted func(owner O, obj T)
	// Orphan is called with an object without a controller reference
	// added or updated, before the owners that select it are queued.
	Orphan func(obj T)
	// Gone, if set, handles an object deleted (final) or being deleted in
	// place of the above (Deleted and the owner's queueing), for a
	// controller that also acts on deleted objects no owner will account
	// for (the Job controller's tracking finalizers).
	Gone func(obj T, final bool)
}

// Terminating is what Dependents does with an update that sets an object's
// deletionTimestamp.
type Terminating int

const (
	// TerminatingUpdates handles it as any update.
	TerminatingUpdates Terminating = iota
	// TerminatingDeletes handles it as the object's deletion, so that its
	// owner replaces it without waiting for its grace period.
	TerminatingDeletes
	// TerminatingDeletesRelabelled handles it as the object's deletion
	// and, when the update changed its labels, as the deletion of its old
	// state too (the ReplicaSet controller's).
	TerminatingDeletesRelabelled
)

// Resolve is the owner ref names, if it is one of Kind, cached, with the
// reference's uid: a reference outlives its owner, and a new owner may
// take the old one's name.
func (d *Dependents[T, O]) Resolve(namespace string, ref *metav1.OwnerReference) (O, bool) {
	return Resolve(namespace, ref, d.Kind, d.Get)
}

// Resolve is the object of kind that ref names in namespace, read with
// get, if its uid is the reference's (Dependents.Resolve).
func Resolve[O metav1.Object](namespace string, ref *metav1.OwnerReference, kind string, get func(namespace, name string) (O, error)) (O, bool) {
	var none O
	if ref == nil || ref.Kind != kind {
		return none, false
	}
	o, err := get(namespace, ref.Name)
	if err != nil || o.GetUID() != ref.UID {
		return none, false
	}
	return o, true
}

// OnAdd handles an object added.
func (d *Dependents[T, O]) OnAdd(obj any, _ bool) {
	o, ok := obj.(T)
	if !ok {
		return
	}
	if o.GetDeletionTimestamp() != nil {
		d.deleted(o, false)
		return
	}
	if ref := metav1.GetControllerOf(o); ref != nil {
		owner, ok := d.Resolve(o.GetNamespace(), ref)
		if !ok || d.IgnoreOwnedAdds {
			return
		}
		if d.Created != nil {
			d.Created(owner, o)
		}
		d.Queue.Add(key(owner))
		return
	}
	if d.Orphan != nil {
		d.Orphan(o)
	}
	d.selecting(o)
}

// OnUpdate handles an object updated.
func (d *Dependents[T, O]) OnUpdate(oldObj, newObj any) {
	old, ok1 := oldObj.(T)
	o, ok2 := newObj.(T)
	if !ok1 || !ok2 || o.GetResourceVersion() == old.GetResourceVersion() {
		return
	}
	relabelled := !apiequality.Semantic.DeepEqual(o.GetLabels(), old.GetLabels())
	if o.GetDeletionTimestamp() != nil && d.Terminating != TerminatingUpdates {
		d.deleted(o, false)
		if relabelled && d.Terminating == TerminatingDeletesRelabelled {
			d.deleted(old, false)
		}
		return
	}
	oldRef, ref := metav1.GetControllerOf(old), metav1.GetControllerOf(o)
	refChanged := !apiequality.Semantic.DeepEqual(oldRef, ref)
	if refChanged && oldRef != nil {
		if owner, ok := d.Resolve(old.GetNamespace(), oldRef); ok {
			if d.Previous != nil {
				d.Previous(owner, old, o)
			}
			d.Queue.Add(key(owner))
		}
	}
	if ref != nil {
		if owner, ok := d.Resolve(o.GetNamespace(), ref); ok {
			if d.Updated != nil {
				d.Updated(owner, old, o)
			}
			d.Queue.Add(key(owner))
		}
		return
	}
	if d.Orphan != nil {
		d.Orphan(o)
	}
	if relabelled || refChanged {
		d.selecting(o)
	}
}

// OnDelete handles an object deleted.
func (d *Dependents[T, O]) OnDelete(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if o, ok := obj.(T); ok {
		d.deleted(o, true)
	}
}

func (d *Dependents[T, O]) deleted(o T, final bool) {
	if d.Gone != nil {
		d.Gone(o, final)
		return
	}
	owner, ok := d.Resolve(o.GetNamespace(), metav1.GetControllerOf(o))
	if !ok {
		return
	}
	if d.Deleted != nil {
		d.Deleted(owner, o)
	}
	d.Queue.Add(key(owner))
}

// selecting queues the owners whose selector matches an orphan's labels.
// An orphan without labels matches none, as upstream's listers'
// GetPod<Owner>s say, even a selector of only NotIn or DoesNotExist.
func (d *Dependents[T, O]) selecting(o T) {
	if len(o.GetLabels()) == 0 {
		return
	}
	all, err := d.List(o.GetNamespace())
	if err != nil {
		return
	}
	set := labels.Set(o.GetLabels())
	for _, owner := range all {
		sel, err := metav1.LabelSelectorAsSelector(d.Selector(owner))
		if err != nil || sel.Empty() || !sel.Matches(set) {
			continue
		}
		d.Queue.Add(key(owner))
	}
}

func key(m metav1.Object) string { return m.GetNamespace() + "/" + m.GetName() }
