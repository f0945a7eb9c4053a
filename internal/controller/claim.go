package controller

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Claimer is kube-controller-manager's ControllerRefManager: what an owner
// (a ReplicaSet, a Deployment) claims of the objects it may control.
type Claimer struct {
	Owner     metav1.Object
	OwnerKind schema.GroupVersionKind
	Selector  labels.Selector
	// Kind names the claimed objects in errors ("Pod", "ReplicaSet").
	Kind string
	// Live reads the owner uncached, before the first adoption.
	Live func(ctx context.Context) (metav1.Object, error)
	// Patch applies a strategic merge patch to a claimed object.
	Patch func(ctx context.Context, obj metav1.Object, body string) error
}

// Claim adopts the orphans the selector matches (a patch of their owner
// references, guarded by their uid, once the owner is read uncached and
// found alive) and releases the objects the owner controls that it no
// longer matches; it returns those the owner then controls. An owner being
// deleted adopts and releases nothing. Errors are all returned; a caller
// stops its sync on any.
func Claim[T metav1.Object](ctx context.Context, m Claimer, objs []T) ([]T, error) {
	var owned []T
	var errs []error
	var canAdopt func() error
	deleting := m.Owner.GetDeletionTimestamp() != nil
	for _, o := range objs {
		matches := m.Selector.Matches(labels.Set(o.GetLabels()))
		if ref := metav1.GetControllerOfNoCopy(o); ref != nil {
			switch {
			case ref.UID != m.Owner.GetUID():
			case matches:
				owned = append(owned, o)
			case !deleting:
				body := fmt.Sprintf(`{"metadata":{"uid":%q,"ownerReferences":[{"$patch":"delete","uid":%q}]}}`, o.GetUID(), m.Owner.GetUID())
				if err := m.Patch(ctx, o, body); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsInvalid(err) {
					errs = append(errs, err)
				}
			}
			continue
		}
		if deleting || !matches || o.GetDeletionTimestamp() != nil || o.GetNamespace() != m.Owner.GetNamespace() {
			continue
		}
		if canAdopt == nil {
			canAdopt = m.recheck(ctx)
		}
		err := canAdopt()
		if err == nil {
			err = m.Patch(ctx, o, fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":%q,"kind":%q,"name":%q,"uid":%q,"controller":true,"blockOwnerDeletion":true}],"uid":%q}}`,
				m.OwnerKind.GroupVersion().String(), m.OwnerKind.Kind, m.Owner.GetName(), m.Owner.GetUID(), o.GetUID()))
		} else {
			err = fmt.Errorf("can't adopt %s %v/%v (%v): %v", m.Kind, o.GetNamespace(), o.GetName(), o.GetUID(), err)
		}
		switch {
		case err == nil:
			owned = append(owned, o)
		case !apierrors.IsNotFound(err):
			errs = append(errs, err)
		}
	}
	return owned, errors.Join(errs...)
}

// recheck reads the owner uncached, once: it must be the same object and
// not being deleted (upstream's RecheckDeletionTimestamp).
func (m Claimer) recheck(ctx context.Context) func() error {
	var done bool
	var err error
	o := m.Owner
	return func() error {
		if done {
			return err
		}
		done = true
		fresh, getErr := m.Live(ctx)
		switch {
		case getErr != nil:
			err = fmt.Errorf("can't recheck DeletionTimestamp: %v", getErr)
		case fresh.GetUID() != o.GetUID():
			err = fmt.Errorf("can't recheck DeletionTimestamp: original %s %s/%s is gone: got uid %v, wanted %v",
				m.OwnerKind.Kind, o.GetNamespace(), o.GetName(), fresh.GetUID(), o.GetUID())
		case fresh.GetDeletionTimestamp() != nil:
			err = fmt.Errorf("%s/%s has just been deleted at %v", o.GetNamespace(), o.GetName(), fresh.GetDeletionTimestamp())
		}
		return err
	}
}
