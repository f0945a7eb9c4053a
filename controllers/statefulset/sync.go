package statefulset

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeembed/apiserver/internal/controller"
)

// sync brings one StatefulSet's revisions, pods, claims and status in line.
func (c *Controller) sync(ctx context.Context, k string) error {
	if err := c.written.ready(k); err != nil {
		return err
	}
	ns, name, _ := strings.Cut(k, "/")
	set, err := c.sets.StatefulSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		c.written.clear(k, "")
		return nil
	}
	if err != nil {
		return err
	}
	selector, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil {
		return nil // refused by validation; upstream logs and drops it
	}
	if err := c.adoptOrphanRevisions(ctx, set, selector); err != nil {
		return err
	}
	pods, err := c.claimPods(ctx, set, selector)
	if err != nil {
		return err
	}
	now := c.clock.Now()
	status, err := c.updateStatefulSet(ctx, set, pods, now)
	if err != nil {
		return err
	}
	if m := set.Spec.MinReadySeconds; m > 0 && status != nil && status.ReadyReplicas != status.AvailableReplicas {
		c.queue.AddAfterOn(c.clock, k, controller.NextAvailable(pods, m, now, c.clock.Now()))
	}
	return nil
}

// live reads set uncached for the adoption recheck.
func (c *Controller) live(set *appsv1.StatefulSet) func(ctx context.Context) (metav1.Object, error) {
	return func(ctx context.Context) (metav1.Object, error) {
		return c.client.AppsV1().StatefulSets(set.Namespace).Get(ctx, set.Name, metav1.GetOptions{})
	}
}

// adoptOrphanRevisions adopts the orphan revisions set's selector matches,
// after the uncached recheck.
func (c *Controller) adoptOrphanRevisions(ctx context.Context, set *appsv1.StatefulSet, selector labels.Selector) error {
	revisions, err := c.history.List(set, selector)
	if err != nil {
		return err
	}
	var orphans []*appsv1.ControllerRevision
	for _, r := range revisions {
		if metav1.GetControllerOf(r) == nil {
			orphans = append(orphans, r)
		}
	}
	if len(orphans) == 0 {
		return nil
	}
	if err := c.canAdopt(ctx, set); err != nil {
		return fmt.Errorf("can't adopt ControllerRevisions: %v", err)
	}
	for _, r := range orphans {
		if _, err := c.history.Adopt(ctx, set, setKind, r); err != nil {
			return err
		}
	}
	return nil
}

// canAdopt is upstream's RecheckDeletionTimestamp for set.
func (c *Controller) canAdopt(ctx context.Context, set *appsv1.StatefulSet) error {
	fresh, err := c.client.AppsV1().StatefulSets(set.Namespace).Get(ctx, set.Name, metav1.GetOptions{})
	switch {
	case err != nil:
		return fmt.Errorf("can't recheck DeletionTimestamp: %v", err)
	case fresh.UID != set.UID:
		return fmt.Errorf("can't recheck DeletionTimestamp: original StatefulSet %v/%v is gone: got uid %v, wanted %v",
			set.Namespace, set.Name, fresh.UID, set.UID)
	case fresh.DeletionTimestamp != nil:
		return fmt.Errorf("%v/%v has just been deleted at %v", set.Namespace, set.Name, fresh.DeletionTimestamp)
	}
	return nil
}

// claimPods returns the pods set controls after adopting matching orphans
// named as its members and releasing those that no longer match or are
// not its members (upstream's ClaimPods with the isMemberOf filter).
func (c *Controller) claimPods(ctx context.Context, set *appsv1.StatefulSet, selector labels.Selector) ([]*corev1.Pod, error) {
	var members []*corev1.Pod
	var strangers []*corev1.Pod // controlled by set but not named as its members
	candidates, err := controller.ControlledAndOrphans(c.pods, setKind.Kind, set)
	if err != nil {
		return nil, err
	}
	for _, p := range candidates {
		switch parent, _ := parentAndOrdinal(p.Name); {
		case parent == set.Name:
			members = append(members, p)
		case metav1.GetControllerOfNoCopy(p) != nil && set.DeletionTimestamp == nil:
			strangers = append(strangers, p)
		}
	}
	patch := func(ctx context.Context, o metav1.Object, body string) error {
		p, err := c.client.CoreV1().Pods(o.GetNamespace()).Patch(ctx, o.GetName(), types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{})
		if err == nil {
			c.written.wrote(key(set), set.UID, "pods", p.ResourceVersion)
		}
		return err
	}
	var errs []error
	for _, p := range strangers {
		body := fmt.Sprintf(`{"metadata":{"uid":%q,"ownerReferences":[{"$patch":"delete","uid":%q}]}}`, p.UID, set.UID)
		if err := patch(ctx, p, body); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsInvalid(err) {
			errs = append(errs, err)
		}
	}
	owned, err := controller.Claim(ctx, controller.Claimer{Owner: set, OwnerKind: setKind, Selector: selector, Kind: "Pod",
		Live: c.live(set), Patch: patch}, members)
	if err != nil || len(errs) > 0 {
		return nil, joinErrs(append(errs, err))
	}
	return owned, nil
}

func joinErrs(errs []error) error {
	var msgs []string
	for _, e := range errs {
		if e != nil {
			msgs = append(msgs, e.Error())
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(msgs, "; "))
}

// consistency is upstream's ConsistencyStore
// (StaleControllerConsistencyStatefulSet): the resource versions of the
// controller's last writes per StatefulSet, and a sync waits until the
// informers' stores have caught up with them.
type consistency struct {
	stores map[string]cache.Store
	mu     sync.Mutex
	owners map[string]*written
}

type written struct {
	uid      types.UID
	versions map[string]uint64
}

func newConsistency(informers map[string]cache.SharedIndexInformer) *consistency {
	c := &consistency{stores: map[string]cache.Store{}, owners: map[string]*written{}}
	for r, inf := range informers {
		c.stores[r] = inf.GetStore()
	}
	return c
}

func (c *consistency) wrote(owner string, uid types.UID, resource, rv string) {
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.owners[owner]
	if w == nil || w.uid != uid {
		w = &written{uid: uid, versions: map[string]uint64{}}
		c.owners[owner] = w
	}
	w.versions[resource] = max(w.versions[resource], n)
}

func (c *consistency) clear(owner string, uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.owners[owner]; w != nil && (uid == "" || w.uid == uid) {
		delete(c.owners, owner)
	}
}

// ready returns an error while a store has not seen owner's last write to
// its resource; once all have, the record is dropped.
func (c *consistency) ready(owner string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.owners[owner]
	if w == nil {
		return nil
	}
	for r, wrote := range w.versions {
		read, err := strconv.ParseUint(c.stores[r].LastStoreSyncResourceVersion(), 10, 64)
		if err == nil && read < wrote {
			return fmt.Errorf("read version: %d is not as new as written version: %d for group resource %s", read, wrote, r)
		}
	}
	delete(c.owners, owner)
	return nil
}
