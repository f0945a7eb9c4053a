package daemonset

// A DaemonSet's ControllerRevisions, as upstream's constructHistory,
// snapshot, dedupCurHistories and cleanupHistory: the revision of a
// template is a strategic merge patch replacing spec.template, named
// "<name>-<hash>" where the hash is controller.ComputeHash of the
// template and the collision count (the DaemonSet does not use the
// history package's naming, which the StatefulSet does).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/internal/controller"
)

// templatePatch is the revision data of ds's template: its JSON (keys
// sorted) as {"spec":{"template":{...,"$patch":"replace"}}}.
func templatePatch(ds *appsv1.DaemonSet) ([]byte, error) {
	raw, err := json.Marshal(ds)
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := utiljson.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	spec, _ := obj["spec"].(map[string]any)
	template, _ := spec["template"].(map[string]any)
	if template == nil {
		return nil, fmt.Errorf("daemonset %s has no template", ds.Name)
	}
	template["$patch"] = "replace"
	return json.Marshal(map[string]any{"spec": map[string]any{"template": template}})
}

func matches(ds *appsv1.DaemonSet, cr *appsv1.ControllerRevision) (bool, error) {
	patch, err := templatePatch(ds)
	if err != nil {
		return false, err
	}
	return bytes.Equal(patch, cr.Data.Raw), nil
}

// history returns ds's current revision (made if none matches its
// template) and its old ones.
func (c *Controller) history(ctx context.Context, ds *appsv1.DaemonSet) (*appsv1.ControllerRevision, []*appsv1.ControllerRevision, error) {
	all, err := c.claimRevisions(ctx, ds)
	if err != nil {
		return nil, nil, err
	}
	var current, old []*appsv1.ControllerRevision
	for _, cr := range all {
		if _, ok := cr.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]; !ok {
			next := cr.DeepCopy()
			if next.Labels == nil {
				next.Labels = map[string]string{}
			}
			next.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] = next.Name
			if cr, err = c.client.AppsV1().ControllerRevisions(ds.Namespace).Update(ctx, next, metav1.UpdateOptions{}); err != nil {
				return nil, nil, err
			}
		}
		same, err := matches(ds, cr)
		if err != nil {
			return nil, nil, err
		}
		if same {
			current = append(current, cr)
		} else {
			old = append(old, cr)
		}
	}
	want := controller.MaxRevision(old) + 1
	if len(current) == 0 {
		cur, err := c.snapshot(ctx, ds, want)
		return cur, old, err
	}
	cur, err := c.dedup(ctx, ds, current)
	if err != nil {
		return nil, nil, err
	}
	if cur.Revision < want {
		next := cur.DeepCopy()
		next.Revision = want
		if _, err := c.client.AppsV1().ControllerRevisions(ds.Namespace).Update(ctx, next, metav1.UpdateOptions{}); err != nil {
			return nil, nil, err
		}
	}
	return cur, old, nil
}

// claimRevisions adopts and releases the namespace's revisions and
// returns those ds controls.
func (c *Controller) claimRevisions(ctx context.Context, ds *appsv1.DaemonSet) ([]*appsv1.ControllerRevision, error) {
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, err
	}
	all, err := c.revisions.ControllerRevisions(ds.Namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	h := controller.History{Client: c.client, Lister: c.revisions}
	return h.ClaimRevisions(ctx, c.claimer(ds, selector), all)
}

func (c *Controller) claimer(ds *appsv1.DaemonSet, selector labels.Selector) controller.Claimer {
	return controller.Claimer{Owner: ds, OwnerKind: controllerKind, Selector: selector,
		Live: func(ctx context.Context) (metav1.Object, error) {
			return c.client.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
		}}
}

// snapshot creates the revision of ds's template; a name taken by other
// data bumps the DaemonSet's collision count and fails the sync, as
// upstream (the next sync names it anew).
func (c *Controller) snapshot(ctx context.Context, ds *appsv1.DaemonSet, revision int64) (*appsv1.ControllerRevision, error) {
	patch, err := templatePatch(ds)
	if err != nil {
		return nil, err
	}
	hash := controller.ComputeHash(&ds.Spec.Template, ds.Status.CollisionCount)
	lbls := make(map[string]string, len(ds.Spec.Template.Labels)+1)
	for k, v := range ds.Spec.Template.Labels {
		lbls[k] = v
	}
	lbls[appsv1.DefaultDaemonSetUniqueLabelKey] = hash
	cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: ds.Name + "-" + hash, Namespace: ds.Namespace, Labels: lbls,
		Annotations: ds.Annotations, OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, controllerKind)}},
		Data: runtime.RawExtension{Raw: patch}, Revision: revision}
	revisions := c.client.AppsV1().ControllerRevisions(ds.Namespace)
	created, err := revisions.Create(ctx, cr, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return created, err
	}
	existing, getErr := revisions.Get(ctx, cr.Name, metav1.GetOptions{})
	if getErr != nil {
		return nil, getErr
	}
	if same, err := matches(ds, existing); err != nil || same {
		return existing, err
	}
	return nil, c.bumpCollisions(ctx, ds, err)
}

func (c *Controller) bumpCollisions(ctx context.Context, ds *appsv1.DaemonSet, collision error) error {
	fresh, err := c.client.AppsV1().DaemonSets(ds.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if !ptr.Equal(fresh.Status.CollisionCount, ds.Status.CollisionCount) {
		return fmt.Errorf("found a stale collision count (%d, expected %d) of DaemonSet %q while processing; will retry until it is updated",
			ds.Status.CollisionCount, fresh.Status.CollisionCount, ds.Name)
	}
	fresh.Status.CollisionCount = ptr.To(ptr.Deref(fresh.Status.CollisionCount, 0) + 1)
	if _, err := c.client.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(ctx, fresh, metav1.UpdateOptions{}); err != nil {
		return err
	}
	return collision
}

// dedup keeps the highest of several revisions of the current template:
// ds's pods are relabelled with its hash, the others deleted.
func (c *Controller) dedup(ctx context.Context, ds *appsv1.DaemonSet, current []*appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	if len(current) == 1 {
		return current[0], nil
	}
	keep := current[0]
	for _, cr := range current {
		if cr.Revision >= keep.Revision {
			keep = cr
		}
	}
	pods, err := c.claimPods(ctx, ds)
	if err != nil {
		return nil, err
	}
	hash := keep.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]
	for _, p := range pods {
		if p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == hash {
			continue
		}
		body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{appsv1.DefaultDaemonSetUniqueLabelKey: hash}}})
		if _, err := c.client.CoreV1().Pods(ds.Namespace).Patch(ctx, p.Name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
			return nil, err
		}
	}
	for _, cr := range current {
		if cr.Name == keep.Name {
			continue
		}
		if err := c.client.AppsV1().ControllerRevisions(ds.Namespace).Delete(ctx, cr.Name, metav1.DeleteOptions{}); err != nil {
			return nil, err
		}
	}
	return keep, nil
}

// pruneHistory deletes the oldest revisions over revisionHistoryLimit
// whose hash no pod of ds (terminal ones included) carries.
func (c *Controller) pruneHistory(ctx context.Context, ds *appsv1.DaemonSet, old []*appsv1.ControllerRevision) error {
	byNode, err := c.podsByNode(ctx, ds, true)
	if err != nil {
		return fmt.Errorf("couldn't get node to daemon pod mapping for daemon set %q: %v", ds.Name, err)
	}
	toKill := len(old) - int(ptr.Deref(ds.Spec.RevisionHistoryLimit, 10))
	if toKill <= 0 {
		return nil
	}
	live := map[string]bool{}
	for _, pods := range byNode {
		for _, p := range pods {
			if h := p.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]; h != "" {
				live[h] = true
			}
		}
	}
	old = append([]*appsv1.ControllerRevision(nil), old...)
	sort.SliceStable(old, func(i, j int) bool { return old[i].Revision < old[j].Revision })
	for _, cr := range old {
		if toKill <= 0 {
			break
		}
		if live[cr.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]] {
			continue
		}
		if err := c.client.AppsV1().ControllerRevisions(ds.Namespace).Delete(ctx, cr.Name, metav1.DeleteOptions{}); err != nil {
			return err
		}
		toKill--
	}
	return nil
}
