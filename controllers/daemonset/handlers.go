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

	"github.com/kubeembed/apiserver/internal/controller"
)

// nodeIndex indexes the pods a DaemonSet controls by node name (upstream
// indexes every pod by node and keeps the DaemonSets' when reading it);
// the pods by owner are internal/controller's OwnerIndex.
const nodeIndex = "daemonset/node"

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
	if err := controller.AddOwnerIndex(pods); err != nil {
		return err
	}
	if _, ok := pods.GetIndexers()[nodeIndex]; ok {
		return nil
	}
	if err := pods.AddIndexers(cache.Indexers{nodeIndex: podNodeKeys}); err != nil {
		return fmt.Errorf("index pods by node: %w", err)
	}
	return nil
}

// dependents routes the events of a DaemonSet's dependents of type T to
// the DaemonSets.
func dependents[T metav1.Object](c *Controller) *controller.Dependents[T, *appsv1.DaemonSet] {
	return &controller.Dependents[T, *appsv1.DaemonSet]{
		Queue: c.queue, Kind: controllerKind.Kind,
		Get: func(ns, name string) (*appsv1.DaemonSet, error) { return c.dsets.DaemonSets(ns).Get(name) },
		List: func(ns string) ([]*appsv1.DaemonSet, error) {
			return c.dsets.DaemonSets(ns).List(labels.Everything())
		},
		Selector: func(ds *appsv1.DaemonSet) *metav1.LabelSelector { return ds.Spec.Selector },
	}
}

// podEvents: a pod seen created or deleted settles its DaemonSet's
// expectations; one being deleted is handled as deleted at once, so that
// its node's replacement is not held up by its grace period.
func (c *Controller) podEvents() *controller.Dependents[*corev1.Pod, *appsv1.DaemonSet] {
	d := dependents[*corev1.Pod](c)
	d.Terminating = controller.TerminatingDeletes
	d.Created = func(ds *appsv1.DaemonSet, _ *corev1.Pod) { c.expect.Created(addsKey(key(ds))) }
	d.Deleted = func(ds *appsv1.DaemonSet, pod *corev1.Pod) { c.expect.Deleted(delsKey(key(ds)), key(pod)) }
	d.Updated = func(ds *appsv1.DaemonSet, old, pod *corev1.Pod) {
		if !controller.PodReady(old) && controller.PodReady(pod) && ds.Spec.MinReadySeconds > 0 {
			// A second more against the skew of AddAfter, as upstream.
			c.enqueueAfter(ds, seconds(ds.Spec.MinReadySeconds)+time.Second)
		}
	}
	return d
}

// revisionEvents: a revision's add wakes only DaemonSets that may adopt
// it, as the DaemonSet that owns it wrote it.
func (c *Controller) revisionEvents() *controller.Dependents[*appsv1.ControllerRevision, *appsv1.DaemonSet] {
	d := dependents[*appsv1.ControllerRevision](c)
	d.IgnoreOwnedAdds = true
	return d
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
