package replicaset

import (
	"context"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeembed/apiserver/internal/controller"
)

// sync brings one ReplicaSet's pods and status in line.
func (c *Controller) sync(ctx context.Context, k string) error {
	ns, name, _ := strings.Cut(k, "/")
	rs, err := c.kind.get(ns, name)
	if apierrors.IsNotFound(err) {
		c.expect.Forget(k)
		return nil
	}
	if err != nil {
		return err
	}
	needsSync := c.expect.Satisfied(k)
	selector, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil || rs.Spec.Selector == nil {
		return nil // refused by validation; upstream logs and drops it
	}
	candidates, err := c.candidates(rs)
	if err != nil {
		return err
	}
	active, err := c.claim(ctx, rs, selector, activeOnly(candidates))
	if err != nil {
		return err
	}
	var manageErr error
	if needsSync && rs.DeletionTimestamp == nil {
		manageErr = c.manage(ctx, k, rs, active)
	}
	now := c.clock.Now()
	written, err := c.writeStatus(ctx, rs, c.status(rs, active, terminatingOf(rs, selector, candidates), manageErr, now))
	if err != nil {
		return err
	}
	if manageErr != nil {
		return manageErr
	}
	if m := written.Spec.MinReadySeconds; m > 0 && written.Status.ReadyReplicas != written.Status.AvailableReplicas {
		c.queue.AddAfterOn(c.clock, k, controller.NextAvailable(active, m, now, c.clock.Now()))
	}
	return nil
}

// candidates are the pods rs controls and the orphans of its namespace.
func (c *Controller) candidates(rs *appsv1.ReplicaSet) ([]*corev1.Pod, error) {
	return controller.ControlledAndOrphans(c.pods, c.kind.gvk.Kind, rs)
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func activeOnly(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if !terminal(p) && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// terminatingOf counts rs's own matching pods being deleted.
func terminatingOf(rs *appsv1.ReplicaSet, selector labels.Selector, pods []*corev1.Pod) int {
	n := 0
	for _, p := range pods {
		ref := metav1.GetControllerOf(p)
		if p.DeletionTimestamp != nil && !terminal(p) && ref != nil && ref.UID == rs.UID && selector.Matches(labels.Set(p.Labels)) {
			n++
		}
	}
	return n
}

// claim adopts matching orphans and releases own pods that no longer
// match, returning the pods rs then owns; any failed patch fails the sync.
func (c *Controller) claim(ctx context.Context, rs *appsv1.ReplicaSet, selector labels.Selector, pods []*corev1.Pod) ([]*corev1.Pod, error) {
	return controller.Claim(ctx, controller.Claimer{Owner: rs, OwnerKind: c.kind.gvk, Selector: selector, Kind: "Pod",
		Live: func(ctx context.Context) (metav1.Object, error) { return c.kind.live(ctx, rs.Namespace, rs.Name) },
		Patch: func(ctx context.Context, o metav1.Object, body string) error {
			_, err := c.client.CoreV1().Pods(o.GetNamespace()).Patch(ctx, o.GetName(), types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{})
			return err
		}}, pods)
}
