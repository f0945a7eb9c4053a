package daemonset

// What wakes a DaemonSet: its pods, its revisions, orphans it may adopt,
// and nodes (through the node update queue).

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// The pod indexes: pods controlled by a DaemonSet by "ns/uid" of their
// controller and orphans by namespace (upstream's controller index), and
// pods controlled by a DaemonSet by node name (upstream indexes every pod
// by node and keeps the DaemonSets' when reading it).
const (
	ownerIndex = "daemonset/owner"
	nodeIndex  = "daemonset/node"
)

func podOwnerKeys(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	switch {
	case ref == nil:
		return []string{pod.Namespace}, nil
	case ref.Kind == controllerKind.Kind:
		return []string{pod.Namespace + "/" + string(ref.UID)}, nil
	}
	return nil, nil
}

func podNodeKeys(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return nil, nil
	}
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil && ref.Kind == controllerKind.Kind {
		return []string{pod.Spec.NodeName}, nil
	}
	return nil, nil
}

func addIndexers(pods cache.Indexer) error {
	have := pods.GetIndexers()
	add := cache.Indexers{}
	if _, ok := have[ownerIndex]; !ok {
		add[ownerIndex] = podOwnerKeys
	}
	if _, ok := have[nodeIndex]; !ok {
		add[nodeIndex] = podNodeKeys
	}
	if len(add) == 0 {
		return nil
	}
	if err := pods.AddIndexers(add); err != nil {
		return fmt.Errorf("index pods: %w", err)
	}
	return nil
}

// selecting are the DaemonSets of the namespace whose selector matches
// these labels (upstream's GetPodDaemonSets / GetHistoryDaemonSets).
func (c *Controller) selecting(ns string, set map[string]string) []*appsv1.DaemonSet {
	if len(set) == 0 {
		return nil
	}
	all, err := c.dsets.DaemonSets(ns).List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []*appsv1.DaemonSet
	for _, ds := range all {
		sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(set)) {
			continue
		}
		out = append(out, ds)
	}
	return out
}

func (c *Controller) enqueueAll(dss []*appsv1.DaemonSet) {
	for _, ds := range dss {
		c.enqueue(ds)
	}
}

func (c *Controller) podAdded(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if pod.DeletionTimestamp != nil {
		c.podDeleted(pod)
		return
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		if ds := c.resolve(pod.Namespace, ref); ds != nil {
			c.expect.Created(addsKey(key(ds)))
			c.enqueue(ds)
		}
		return
	}
	c.enqueueAll(c.selecting(pod.Namespace, pod.Labels))
}

func (c *Controller) podUpdated(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Pod)
	pod, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 || pod.ResourceVersion == old.ResourceVersion {
		return
	}
	if pod.DeletionTimestamp != nil {
		c.podDeleted(pod)
		return
	}
	oldRef, ref := metav1.GetControllerOf(old), metav1.GetControllerOf(pod)
	refChanged := !apiequality.Semantic.DeepEqual(oldRef, ref)
	if refChanged && oldRef != nil {
		if ds := c.resolve(old.Namespace, oldRef); ds != nil {
			c.enqueue(ds)
		}
	}
	if ref != nil {
		ds := c.resolve(pod.Namespace, ref)
		if ds == nil {
			return
		}
		c.enqueue(ds)
		if !isReady(old) && isReady(pod) && ds.Spec.MinReadySeconds > 0 {
			// A second more against the skew of AddAfter, as upstream.
			c.enqueueAfter(ds, seconds(ds.Spec.MinReadySeconds)+time.Second)
		}
		return
	}
	if refChanged || !apiequality.Semantic.DeepEqual(pod.Labels, old.Labels) {
		c.enqueueAll(c.selecting(pod.Namespace, pod.Labels))
	}
}

func (c *Controller) podDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if ds := c.resolve(pod.Namespace, metav1.GetControllerOf(pod)); ds != nil {
		c.expect.Deleted(delsKey(key(ds)), key(pod))
		c.enqueue(ds)
	}
}

func (c *Controller) revisionAdded(obj any) {
	cr, ok := obj.(*appsv1.ControllerRevision)
	if !ok {
		return
	}
	if cr.DeletionTimestamp != nil {
		c.revisionDeleted(cr)
		return
	}
	if metav1.GetControllerOf(cr) != nil {
		return // upstream only notes it
	}
	c.enqueueAll(c.selecting(cr.Namespace, cr.Labels))
}

func (c *Controller) revisionUpdated(oldObj, newObj any) {
	old, ok1 := oldObj.(*appsv1.ControllerRevision)
	cr, ok2 := newObj.(*appsv1.ControllerRevision)
	if !ok1 || !ok2 || cr.ResourceVersion == old.ResourceVersion {
		return
	}
	oldRef, ref := metav1.GetControllerOf(old), metav1.GetControllerOf(cr)
	refChanged := !apiequality.Semantic.DeepEqual(oldRef, ref)
	if refChanged && oldRef != nil {
		if ds := c.resolve(old.Namespace, oldRef); ds != nil {
			c.enqueue(ds)
		}
	}
	if ref != nil {
		if ds := c.resolve(cr.Namespace, ref); ds != nil {
			c.enqueue(ds)
		}
		return
	}
	if refChanged || !apiequality.Semantic.DeepEqual(cr.Labels, old.Labels) {
		c.enqueueAll(c.selecting(cr.Namespace, cr.Labels))
	}
}

func (c *Controller) revisionDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if cr, ok := obj.(*appsv1.ControllerRevision); ok {
		if ds := c.resolve(cr.Namespace, metav1.GetControllerOf(cr)); ds != nil {
			c.enqueue(ds)
		}
	}
}

func (c *Controller) nodeAdded(obj any) {
	if n, ok := obj.(*corev1.Node); ok {
		c.nodeQueue.Add(n.Name)
	}
}

// nodeUpdated queues a node whose labels or taints changed, the only
// fields placement reads.
func (c *Controller) nodeUpdated(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Node)
	n, ok2 := newObj.(*corev1.Node)
	if !ok1 || !ok2 {
		return
	}
	if apiequality.Semantic.DeepEqual(old.Labels, n.Labels) && apiequality.Semantic.DeepEqual(old.Spec.Taints, n.Spec.Taints) {
		return
	}
	c.nodeQueue.Add(n.Name)
}
