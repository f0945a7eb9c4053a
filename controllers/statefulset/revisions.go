package statefulset

// The StatefulSet's ControllerRevisions: its template recorded as a
// strategic merge patch that replaces spec.template.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/internal/controller"
)

// patchCodec encodes as upstream's (apps/v1 JSON with kind and apiVersion),
// so that the revisions' bytes, and the hashes in their names, are a
// cluster's.
var patchCodec = scheme.Codecs.LegacyCodec(appsv1.SchemeGroupVersion)

// templatePatch is the revision data of set: {"spec":{"template":{...,
// "$patch":"replace"}}} with the keys sorted, as upstream's getPatch.
func templatePatch(set *appsv1.StatefulSet) ([]byte, error) {
	data, err := runtime.Encode(patchCodec, set)
	if err != nil {
		return nil, fmt.Errorf("encode statefulset: %w", err)
	}
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	spec, _ := raw["spec"].(map[string]any)
	template, _ := spec["template"].(map[string]any)
	if template == nil {
		return nil, errors.New("statefulset has no template")
	}
	template["$patch"] = "replace"
	return json.Marshal(map[string]any{"spec": map[string]any{"template": template}})
}

// newRevision is set's revision numbered n (upstream's newRevision: the
// template's labels, the set's annotations).
func newRevision(set *appsv1.StatefulSet, n int64, collisionCount *int32) (*appsv1.ControllerRevision, error) {
	patch, err := templatePatch(set)
	if err != nil {
		return nil, err
	}
	r := controller.NewRevision(set, setKind, set.Spec.Template.Labels, patch, n, collisionCount)
	r.Annotations = map[string]string{}
	for k, v := range set.Annotations {
		r.Annotations[k] = v
	}
	return r, nil
}

// applyRevision returns a copy of set with revision's template.
func applyRevision(set *appsv1.StatefulSet, revision *appsv1.ControllerRevision) (*appsv1.StatefulSet, error) {
	clone := set.DeepCopy()
	data, err := runtime.Encode(patchCodec, clone)
	if err != nil {
		return nil, err
	}
	patched, err := strategicpatch.StrategicMergePatch(data, revision.Data.Raw, clone)
	if err != nil {
		return nil, fmt.Errorf("apply revision %s: %w", revision.Name, err)
	}
	restored := &appsv1.StatefulSet{}
	if err := json.Unmarshal(patched, restored); err != nil {
		return nil, err
	}
	clone.Spec = restored.Spec
	return clone, nil
}

func nextRevision(revisions []*appsv1.ControllerRevision) int64 {
	if len(revisions) == 0 {
		return 1
	}
	return revisions[len(revisions)-1].Revision + 1
}

// matchesLatest reports whether restoring latest gives the revision the set
// proposes (StatefulSetSemanticRevisionComparison: bytes that differ only
// in how they were written).
func matchesLatest(set *appsv1.StatefulSet, proposed, latest *appsv1.ControllerRevision) bool {
	restored, err := applyRevision(set, latest)
	if err != nil {
		return false
	}
	again, err := newRevision(restored, -1, nil)
	return err == nil && controller.EqualRevision(proposed, again)
}

// revisions returns set's current and update revisions and its collision
// count, creating the update revision or renumbering an equal older one
// (a rollback); revisions must be sorted.
func (c *Controller) revisions(ctx context.Context, set *appsv1.StatefulSet, revisions []*appsv1.ControllerRevision) (current, update *appsv1.ControllerRevision, collisions int32, err error) {
	if set.Status.CollisionCount != nil {
		collisions = *set.Status.CollisionCount
	}
	update, err = newRevision(set, nextRevision(revisions), &collisions)
	if err != nil {
		return nil, nil, collisions, err
	}
	equal := controller.FindEqualRevisions(revisions, update)
	n := len(revisions)
	switch {
	case len(equal) > 0 && controller.EqualRevision(revisions[n-1], equal[len(equal)-1]):
		update = revisions[n-1]
	case len(equal) > 0:
		update, err = c.history.UpdateRevision(ctx, equal[len(equal)-1], update.Revision)
	case n > 0 && matchesLatest(set, update, revisions[n-1]):
		update = revisions[n-1]
	default:
		update, err = c.history.Create(ctx, set, update, &collisions)
	}
	if err != nil {
		return nil, nil, collisions, err
	}
	for _, r := range revisions {
		if r.Name == set.Status.CurrentRevision {
			current = r
			break
		}
	}
	if current == nil {
		current = update
	}
	return current, update, collisions, nil
}

// truncateHistory deletes the revisions that are neither current, update
// nor any pod's, oldest first, down to revisionHistoryLimit.
func (c *Controller) truncateHistory(ctx context.Context, set *appsv1.StatefulSet, pods []*corev1.Pod, revisions []*appsv1.ControllerRevision, current, update *appsv1.ControllerRevision) error {
	live := map[string]bool{}
	if current != nil {
		live[current.Name] = true
	}
	if update != nil {
		live[update.Name] = true
	}
	for _, p := range pods {
		live[podRevision(p)] = true
	}
	var old []*appsv1.ControllerRevision
	for _, r := range revisions {
		if !live[r.Name] {
			old = append(old, r)
		}
	}
	limit := int(ptr.Deref(set.Spec.RevisionHistoryLimit, 10))
	if limit < 0 || len(old) <= limit {
		return nil
	}
	for _, r := range old[:len(old)-limit] {
		if err := c.history.Delete(ctx, r); err != nil {
			return fmt.Errorf("delete revision %s: %w", r.Name, err)
		}
	}
	return nil
}
