package daemonset

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeembed/apiserver/internal/controller"
)

// sync brings one DaemonSet's pods, revisions and status in line, as
// upstream's syncDaemonSet.
func (c *Controller) sync(ctx context.Context, k string) error {
	ns, name, _ := strings.Cut(k, "/")
	ds, err := c.dsets.DaemonSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.forget(k)
		return nil
	}
	if err != nil {
		return fmt.Errorf("unable to retrieve ds %v from store: %v", k, err)
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("couldn't get list of nodes when syncing daemon set %q: %v", ds.Name, err)
	}
	if reflect.DeepEqual(ds.Spec.Selector, &metav1.LabelSelector{}) {
		c.recorder().Eventf(ds, corev1.EventTypeWarning, "SelectingAll", "This daemon set is selecting all pods. A non-empty selector is required.")
		return nil
	}
	if ds.DeletionTimestamp != nil {
		return nil // its revisions may be gone: no status is computed
	}
	cur, old, err := c.history(ctx, ds)
	if err != nil {
		return fmt.Errorf("failed to construct revisions of DaemonSet: %v", err)
	}
	hash := cur.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]
	if !c.satisfied(k) {
		return c.updateStatus(ctx, ds, nodes, hash, false)
	}
	err = c.update(ctx, ds, nodes, hash, k, old)
	statusErr := c.updateStatus(ctx, ds, nodes, hash, true)
	if err != nil {
		return err
	}
	return statusErr
}

// update is upstream's updateDaemonSet: manage, then the rolling update
// once manage's creates and deletes are seen, then the history pruned.
func (c *Controller) update(ctx context.Context, ds *appsv1.DaemonSet, nodes []*corev1.Node, hash, k string, old []*appsv1.ControllerRevision) error {
	if err := c.manage(ctx, ds, nodes, hash); err != nil {
		return err
	}
	if c.satisfied(k) && ds.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if err := c.rollingUpdate(ctx, ds, nodes, hash); err != nil {
			return err
		}
	}
	if err := c.pruneHistory(ctx, ds, old); err != nil {
		return fmt.Errorf("failed to clean up revisions of DaemonSet: %w", err)
	}
	return nil
}

// claimPods adopts and releases pods and returns those ds controls.
func (c *Controller) claimPods(ctx context.Context, ds *appsv1.DaemonSet) ([]*corev1.Pod, error) {
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, err
	}
	candidates, err := controller.ControlledAndOrphans(c.pods, controllerKind.Kind, ds)
	if err != nil {
		return nil, err
	}
	m := c.claimer(ds, selector)
	m.Kind = "Pod"
	m.Patch = func(ctx context.Context, o metav1.Object, body string) error {
		_, err := c.client.CoreV1().Pods(o.GetNamespace()).Patch(ctx, o.GetName(), types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	return controller.Claim(ctx, m, candidates)
}

// podsByNode groups ds's pods by the node they are for; terminal pods
// being deleted only with withDeletedTerminal.
func (c *Controller) podsByNode(ctx context.Context, ds *appsv1.DaemonSet, withDeletedTerminal bool) (map[string][]*corev1.Pod, error) {
	pods, err := c.claimPods(ctx, ds)
	if err != nil {
		return nil, err
	}
	out := map[string][]*corev1.Pod{}
	for _, p := range pods {
		if !withDeletedTerminal && terminal(p) && p.DeletionTimestamp != nil {
			continue
		}
		node, err := targetNode(p)
		if err != nil {
			continue
		}
		out[node] = append(out[node], p)
	}
	return out, nil
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// manage creates the pods of the nodes that should run one and lack it,
// and deletes those of the nodes that should not (or their surplus).
func (c *Controller) manage(ctx context.Context, ds *appsv1.DaemonSet, nodes []*corev1.Node, hash string) error {
	byNode, err := c.podsByNode(ctx, ds, false)
	if err != nil {
		return fmt.Errorf("couldn't get node to daemon pod mapping for daemon set %q: %v", ds.Name, err)
	}
	p := placementOf(ds)
	var create, del []string
	for _, n := range nodes {
		cr, dl := c.onNode(p, n, byNode, hash)
		create, del = append(create, cr...), append(del, dl...)
	}
	del = append(del, unscheduledWithoutNode(nodes, byNode)...)
	return c.syncNodes(ctx, ds, del, create, hash)
}

// unscheduledWithoutNode are the pods not bound yet whose node is gone:
// no one else deletes them.
func unscheduledWithoutNode(nodes []*corev1.Node, byNode map[string][]*corev1.Pod) []string {
	exists := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		exists[n.Name] = true
	}
	var out []string
	for node, pods := range byNode {
		if exists[node] {
			continue
		}
		for _, p := range pods {
			if p.Spec.NodeName == "" {
				out = append(out, p.Name)
			}
		}
	}
	return out
}

// byAge orders pods bound first, then oldest, then by name (upstream's
// podByCreationTimestampAndPhase).
func byAge(pods []*corev1.Pod) {
	sort.Slice(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if (a.Spec.NodeName == "") != (b.Spec.NodeName == "") {
			return a.Spec.NodeName != ""
		}
		if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.Name < b.Name
		}
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	})
}
