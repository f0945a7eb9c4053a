package job

// The pods' tracking finalizer: which pods have it, which removals a sync
// waits to see, and the removal from pods no Job will count.

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
)

func hasFinalizer(pod *corev1.Pod) bool {
	return slices.Contains(pod.Finalizers, batchv1.JobTrackingFinalizer)
}

// removeFinalizerPatch is the strategic merge patch that removes the
// tracking finalizer, nil when pod has none.
func removeFinalizerPatch(pod *corev1.Pod) []byte {
	if !hasFinalizer(pod) {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"$deleteFromPrimitiveList/finalizers": []string{batchv1.JobTrackingFinalizer}}})
	return b
}

func (c *Controller) patchPod(ctx context.Context, ns, name string, patch []byte) error {
	_, err := c.client.CoreV1().Pods(ns).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	return err
}

// uidExpectations are upstream's uidTrackingExpectations: per Job key, the
// pods whose finalizer removal is not seen yet.
type uidExpectations struct {
	mu   sync.Mutex
	uids map[string]sets.Set[types.UID]
}

func newUIDExpectations() *uidExpectations {
	return &uidExpectations{uids: map[string]sets.Set[types.UID]{}}
}

func (u *uidExpectations) expected(k string) sets.Set[types.UID] {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.uids[k].Clone()
}

func (u *uidExpectations) expect(k string, uids []types.UID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.uids[k] == nil {
		u.uids[k] = sets.New[types.UID]()
	}
	u.uids[k].Insert(uids...)
}

func (u *uidExpectations) observed(k string, uid types.UID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.uids[k].Delete(uid)
}

func (u *uidExpectations) forget(k string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.uids, k)
}

// Keys of the orphan queue: one pod, or the pods a selector matches.
const (
	orphanByName     = "pod"
	orphanBySelector = "selector"
)

func orphanKey(kind, ns, value string) string { return kind + "\x00" + ns + "\x00" + value }

func (c *Controller) orphanPod(pod *corev1.Pod) {
	c.orphans.Add(orphanKey(orphanByName, pod.Namespace, pod.Name))
}

// orphansOf queues the pods j's selector matches, for a Job gone or
// finished.
func (c *Controller) orphansOf(j *batchv1.Job) {
	sel, err := metav1.LabelSelectorAsSelector(j.Spec.Selector)
	if err != nil {
		return
	}
	c.orphans.Add(orphanKey(orphanBySelector, j.Namespace, sel.String()))
}

// syncOrphan removes the tracking finalizer from orphaned pods.
func (c *Controller) syncOrphan(ctx context.Context, k string) error {
	parts := strings.SplitN(k, "\x00", 3)
	if len(parts) != 3 {
		return nil
	}
	kind, ns, value := parts[0], parts[1], parts[2]
	if kind == orphanByName {
		obj, ok, err := c.pods.GetByKey(ns + "/" + value)
		if err != nil || !ok {
			return err
		}
		return c.unfinalizeOrphan(ctx, obj.(*corev1.Pod))
	}
	sel, err := labels.Parse(value)
	if err != nil {
		return nil
	}
	objs, err := c.pods.ByIndex(cache.NamespaceIndex, ns)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if p := o.(*corev1.Pod); sel.Matches(labels.Set(p.Labels)) {
			if err := c.unfinalizeOrphan(ctx, p); err != nil {
				c.orphans.AddRateLimited(orphanKey(orphanByName, p.Namespace, p.Name))
			}
		}
	}
	return nil
}

// unfinalizeOrphan removes the finalizer of a pod no running Job of this
// controller owns.
func (c *Controller) unfinalizeOrphan(ctx context.Context, pod *corev1.Pod) error {
	if ref := metav1.GetControllerOf(pod); ref != nil {
		if ref.Kind != jobKind.Kind || ref.APIVersion != batchv1.SchemeGroupVersion.String() {
			return nil
		}
		if j := c.resolve(pod.Namespace, ref); j != nil && (managedByOther(j) || !finished(j)) {
			return nil
		}
	}
	if patch := removeFinalizerPatch(pod); patch != nil {
		if err := c.patchPod(ctx, pod.Namespace, pod.Name, patch); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}
