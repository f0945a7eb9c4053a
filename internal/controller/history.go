package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/util/retry"
)

// This file is kube-controller-manager's controller history
// (pkg/controller/history): the ControllerRevisions in which the StatefulSet
// and DaemonSet controllers record their templates.
//
// The API:
//   - RevisionHash(data, collisionCount) and RevisionName(parent, hash):
//     a revision is named <parent>-<hash>, the hash being upstream's (FNV-1
//     32 of Data.Raw, then of the decimal collision count if not nil, the
//     uint32 printed in decimal and passed through rand.SafeEncodeString),
//     so names and controller-revision-hash labels are a cluster's.
//   - NewRevision: an unsaved revision of a parent (labels copied from the
//     template plus controller.kubernetes.io/hash, the parent's controller
//     reference, the revision number), named with the collision count.
//   - SortRevisions (by Revision, then creation time, then name),
//     EqualRevision, FindEqualRevisions, MaxRevision.
//   - History{Client, Lister}: List (the revisions a selector matches that
//     the parent controls or no one does; the StatefulSet adopts those
//     orphans with Adopt), ClaimRevisions (the DaemonSet's
//     ControllerRevisionControllerRefManager: adopt and release through
//     Claim), Create (retries with a bumped collision count while the name
//     is taken by different data), UpdateRevision (retried on conflict),
//     Delete, Adopt and Release.

// RevisionHashLabel is the label NewRevision puts the hash in
// (upstream's history.ControllerRevisionHashLabel).
const RevisionHashLabel = "controller.kubernetes.io/hash"

// RevisionName is <prefix>-<hash>, the prefix cut to 223 bytes so that the
// name fits 253.
func RevisionName(prefix, hash string) string {
	if len(prefix) > 223 {
		prefix = prefix[:223]
	}
	return prefix + "-" + hash
}

// RevisionHash is upstream's HashControllerRevision for a revision whose
// data is raw (both controllers store Data.Raw only). Upstream uses the
// FNV-1 (not FNV-1a) 32-bit hash.
func RevisionHash(raw []byte, collisionCount *int32) string {
	h := fnv.New32()
	h.Write(raw)
	if collisionCount != nil {
		h.Write([]byte(strconv.FormatInt(int64(*collisionCount), 10)))
	}
	return rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// NewRevision returns an unsaved revision of parent (of kind parentKind)
// holding data, numbered revision, labelled with templateLabels and the
// hash, and named with collisionCount (which may be nil).
func NewRevision(parent metav1.Object, parentKind schema.GroupVersionKind, templateLabels map[string]string,
	data []byte, revision int64, collisionCount *int32) *appsv1.ControllerRevision {
	lbls := make(map[string]string, len(templateLabels)+1)
	for k, v := range templateLabels {
		lbls[k] = v
	}
	hash := RevisionHash(data, collisionCount)
	lbls[RevisionHashLabel] = hash
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:            RevisionName(parent.GetName(), hash),
			Labels:          lbls,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(parent, parentKind)},
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: revision,
	}
}

// SortRevisions sorts revisions by Revision, ties by creation time, then
// by name (stable, as upstream).
func SortRevisions(revisions []*appsv1.ControllerRevision) {
	sort.SliceStable(revisions, func(i, j int) bool {
		a, b := revisions[i], revisions[j]
		if a.Revision != b.Revision {
			return a.Revision < b.Revision
		}
		if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.Name < b.Name
		}
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	})
}

// EqualRevision reports whether both are nil or both hold the same data.
func EqualRevision(a, b *appsv1.ControllerRevision) bool {
	if a == nil || b == nil {
		return a == b
	}
	return bytes.Equal(a.Data.Raw, b.Data.Raw) && apiequality.Semantic.DeepEqual(a.Data.Object, b.Data.Object)
}

// FindEqualRevisions returns the revisions equal to needle, in order.
func FindEqualRevisions(revisions []*appsv1.ControllerRevision, needle *appsv1.ControllerRevision) []*appsv1.ControllerRevision {
	var eq []*appsv1.ControllerRevision
	for _, r := range revisions {
		if EqualRevision(r, needle) {
			eq = append(eq, r)
		}
	}
	return eq
}

// MaxRevision is the highest Revision of revisions, 0 if none.
func MaxRevision(revisions []*appsv1.ControllerRevision) int64 {
	var m int64
	for _, r := range revisions {
		m = max(m, r.Revision)
	}
	return m
}

// History reads revisions from Lister (the shared informer's) and writes
// them through Client (the controller's named client).
type History struct {
	Client kubernetes.Interface
	Lister appslisters.ControllerRevisionLister
}

// List returns the revisions in parent's namespace that selector matches
// and that parent controls or nothing controls (upstream's
// ListControllerRevisions; the caller adopts the orphans).
func (h History) List(parent metav1.Object, selector labels.Selector) ([]*appsv1.ControllerRevision, error) {
	all, err := h.Lister.ControllerRevisions(parent.GetNamespace()).List(selector)
	if err != nil {
		return nil, fmt.Errorf("list controllerrevisions: %w", err)
	}
	var owned []*appsv1.ControllerRevision
	for _, r := range all {
		if ref := metav1.GetControllerOfNoCopy(r); ref == nil || ref.UID == parent.GetUID() {
			owned = append(owned, r)
		}
	}
	return owned, nil
}

// ClaimRevisions is upstream's ClaimControllerRevisions with m's owner:
// every revision of the namespace is passed (those the selector no longer
// matches are released), orphans are adopted. m.Patch and m.Kind are set
// here.
func (h History) ClaimRevisions(ctx context.Context, m Claimer, revisions []*appsv1.ControllerRevision) ([]*appsv1.ControllerRevision, error) {
	m.Kind = "ControllerRevision"
	m.Patch = func(ctx context.Context, obj metav1.Object, body string) error {
		_, err := h.Client.AppsV1().ControllerRevisions(obj.GetNamespace()).Patch(ctx, obj.GetName(),
			types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	return Claim(ctx, m, revisions)
}

// Create creates revision (owned by parent) under the name its data and
// *collisionCount give; while that name is taken by a revision with other
// data it bumps *collisionCount and tries again. A taken name with the
// same data returns the existing revision.
func (h History) Create(ctx context.Context, parent metav1.Object, revision *appsv1.ControllerRevision, collisionCount *int32) (*appsv1.ControllerRevision, error) {
	if collisionCount == nil {
		return nil, errors.New("collisionCount should not be nil")
	}
	clone := revision.DeepCopy()
	ns := parent.GetNamespace()
	for {
		clone.Name = RevisionName(parent.GetName(), RevisionHash(revision.Data.Raw, collisionCount))
		created, err := h.Client.AppsV1().ControllerRevisions(ns).Create(ctx, clone, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			return created, err
		}
		exists, err := h.Client.AppsV1().ControllerRevisions(ns).Get(ctx, clone.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if bytes.Equal(exists.Data.Raw, clone.Data.Raw) {
			return exists, nil
		}
		*collisionCount++
	}
}

// UpdateRevision sets revision's Revision to n (an update retried on
// conflict with the cached copy) and returns it.
func (h History) UpdateRevision(ctx context.Context, revision *appsv1.ControllerRevision, n int64) (*appsv1.ControllerRevision, error) {
	clone := revision.DeepCopy()
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if clone.Revision == n {
			return nil
		}
		clone.Revision = n
		updated, err := h.Client.AppsV1().ControllerRevisions(clone.Namespace).Update(ctx, clone, metav1.UpdateOptions{})
		if err == nil {
			clone = updated
			return nil
		}
		if cached, getErr := h.Lister.ControllerRevisions(clone.Namespace).Get(clone.Name); getErr == nil {
			clone = cached.DeepCopy()
		}
		return err
	})
	return clone, err
}

// Delete deletes revision.
func (h History) Delete(ctx context.Context, revision *appsv1.ControllerRevision) error {
	return h.Client.AppsV1().ControllerRevisions(revision.Namespace).Delete(ctx, revision.Name, metav1.DeleteOptions{})
}

// Adopt makes parent (of kind parentKind) the controller of the orphan
// revision with upstream's patch and returns the patched revision.
func (h History) Adopt(ctx context.Context, parent metav1.Object, parentKind schema.GroupVersionKind, revision *appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	if owner := metav1.GetControllerOfNoCopy(revision); owner != nil {
		return nil, fmt.Errorf("attempt to adopt revision owned by %v", owner)
	}
	body := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":%q,"kind":%q,"name":%q,"uid":%q,"controller":true,"blockOwnerDeletion":true}],"uid":%q}}`,
		parentKind.GroupVersion().String(), parentKind.Kind, parent.GetName(), parent.GetUID(), revision.UID)
	return h.Client.AppsV1().ControllerRevisions(parent.GetNamespace()).Patch(ctx, revision.Name,
		types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{})
}

// Release removes parent's reference from revision; a revision gone, or
// no longer parent's, is no error (nil is returned then).
func (h History) Release(ctx context.Context, parent metav1.Object, revision *appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	body := fmt.Sprintf(`{"metadata":{"uid":%q,"ownerReferences":[{"$patch":"delete","uid":%q}]}}`, revision.UID, parent.GetUID())
	released, err := h.Client.AppsV1().ControllerRevisions(revision.Namespace).Patch(ctx, revision.Name,
		types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return nil, nil
	}
	return released, err
}
