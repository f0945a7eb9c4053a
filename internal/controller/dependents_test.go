package controller

import (
	"fmt"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// podsOf routes pods to the ReplicaSets "a" (selecting app=a) and "b"
// (selecting app=b), noting the hooks' calls in calls.
func podsOf(calls *[]string) *Dependents[*corev1.Pod, *appsv1.ReplicaSet] {
	owners := map[string]*appsv1.ReplicaSet{}
	for _, name := range []string{"a", "b"} {
		owners[name] = &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
			Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}}
	}
	note := func(hook string, owner *appsv1.ReplicaSet, pod *corev1.Pod) {
		*calls = append(*calls, fmt.Sprintf("%s %s %s", hook, owner.Name, pod.ResourceVersion))
	}
	return &Dependents[*corev1.Pod, *appsv1.ReplicaSet]{
		Queue: NewQueue("test", nil), Kind: "ReplicaSet",
		Get: func(_, name string) (*appsv1.ReplicaSet, error) {
			if rs, ok := owners[name]; ok {
				return rs, nil
			}
			return nil, apierrors.NewNotFound(appsv1.Resource("replicasets"), name)
		},
		List: func(string) ([]*appsv1.ReplicaSet, error) {
			return []*appsv1.ReplicaSet{owners["a"], owners["b"]}, nil
		},
		Selector: func(rs *appsv1.ReplicaSet) *metav1.LabelSelector { return rs.Spec.Selector },
		Created:  func(rs *appsv1.ReplicaSet, pod *corev1.Pod) { note("created", rs, pod) },
		Updated:  func(rs *appsv1.ReplicaSet, _, pod *corev1.Pod) { note("updated", rs, pod) },
		Previous: func(rs *appsv1.ReplicaSet, _, pod *corev1.Pod) { note("previous", rs, pod) },
		Deleted:  func(rs *appsv1.ReplicaSet, pod *corev1.Pod) { note("deleted", rs, pod) },
		Orphan:   func(pod *corev1.Pod) { *calls = append(*calls, "orphan "+pod.ResourceVersion) },
	}
}

// pod is a pod at revision rv with label app=app (none if ""), controlled
// by the ReplicaSet owner (none if ""; "x" has a stale uid).
func pod(rv, app, owner string, deleting bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", ResourceVersion: rv}}
	if app != "" {
		p.Labels = map[string]string{"app": app}
	}
	if owner != "" {
		uid := types.UID("uid-" + owner)
		if owner == "x" {
			owner, uid = "a", "stale"
		}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: owner, UID: uid, Controller: new(true)}}
	}
	if deleting {
		p.DeletionTimestamp = &metav1.Time{}
	}
	return p
}

func drain(q *Queue) []string {
	var keys []string
	for q.Len() > 0 {
		k, _ := q.Get()
		q.Done(k)
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func TestDependentsRouteToOwners(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		terminating Terminating
		event       func(d cache.ResourceEventHandler)
		calls, keys []string
	}{
		{name: "owned add", event: func(d cache.ResourceEventHandler) { d.OnAdd(pod("1", "a", "a", false), false) },
			calls: []string{"created a 1"}, keys: []string{"ns/a"}},
		{name: "add of a stale reference", event: func(d cache.ResourceEventHandler) { d.OnAdd(pod("1", "a", "x", false), false) }},
		{name: "orphan add", event: func(d cache.ResourceEventHandler) { d.OnAdd(pod("1", "b", "", false), false) },
			calls: []string{"orphan 1"}, keys: []string{"ns/b"}},
		{name: "unlabelled orphan add", event: func(d cache.ResourceEventHandler) { d.OnAdd(pod("1", "", "", false), false) },
			calls: []string{"orphan 1"}},
		{name: "add while deleting", event: func(d cache.ResourceEventHandler) { d.OnAdd(pod("1", "a", "a", true), false) },
			calls: []string{"deleted a 1"}, keys: []string{"ns/a"}},
		{name: "resync", event: func(d cache.ResourceEventHandler) { d.OnUpdate(pod("1", "a", "a", false), pod("1", "a", "a", false)) }},
		{name: "owner changed", event: func(d cache.ResourceEventHandler) { d.OnUpdate(pod("1", "a", "a", false), pod("2", "a", "b", false)) },
			calls: []string{"previous a 2", "updated b 2"}, keys: []string{"ns/a", "ns/b"}},
		{name: "released", event: func(d cache.ResourceEventHandler) { d.OnUpdate(pod("1", "a", "a", false), pod("2", "b", "", false)) },
			calls: []string{"previous a 2", "orphan 2"}, keys: []string{"ns/a", "ns/b"}},
		{name: "orphan relabelled", event: func(d cache.ResourceEventHandler) { d.OnUpdate(pod("1", "a", "", false), pod("2", "b", "", false)) },
			calls: []string{"orphan 2"}, keys: []string{"ns/b"}},
		{name: "orphan unchanged", event: func(d cache.ResourceEventHandler) { d.OnUpdate(pod("1", "a", "", false), pod("2", "a", "", false)) },
			calls: []string{"orphan 2"}},
		{name: "terminating as an update", event: func(d cache.ResourceEventHandler) { d.OnUpdate(pod("1", "a", "a", false), pod("2", "b", "a", true)) },
			calls: []string{"updated a 2"}, keys: []string{"ns/a"}},
		{name: "terminating as a delete", terminating: TerminatingDeletes,
			event: func(d cache.ResourceEventHandler) { d.OnUpdate(pod("1", "a", "a", false), pod("2", "b", "b", true)) },
			calls: []string{"deleted b 2"}, keys: []string{"ns/b"}},
		{name: "terminating relabelled", terminating: TerminatingDeletesRelabelled,
			event: func(d cache.ResourceEventHandler) { d.OnUpdate(pod("1", "a", "a", false), pod("2", "b", "b", true)) },
			calls: []string{"deleted b 2", "deleted a 1"}, keys: []string{"ns/a", "ns/b"}},
		{name: "tombstone", event: func(d cache.ResourceEventHandler) {
			d.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: pod("1", "a", "a", false)})
		}, calls: []string{"deleted a 1"}, keys: []string{"ns/a"}},
		{name: "orphan deleted", event: func(d cache.ResourceEventHandler) { d.OnDelete(pod("1", "a", "", false)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var calls []string
			d := podsOf(&calls)
			d.Terminating = c.terminating
			c.event(d)
			assert.Equal(t, c.calls, calls, "hooks")
			assert.Equal(t, c.keys, drain(d.Queue), "queued")
		})
	}
}

// A hook runs before its owner is queued, so that a worker never takes
// the key before the hook has recorded what the sync must see.
func TestDependentsHooksRunBeforeQueueing(t *testing.T) {
	t.Parallel()
	var calls []string
	d := podsOf(&calls)
	d.Created = func(*appsv1.ReplicaSet, *corev1.Pod) { assert.Zero(t, d.Queue.Len()) }
	d.OnAdd(pod("1", "a", "a", false), false)
	assert.Equal(t, []string{"ns/a"}, drain(d.Queue))
}

func TestDependentsOptions(t *testing.T) {
	t.Parallel()
	var calls []string
	d := podsOf(&calls)
	d.IgnoreOwnedAdds = true
	d.OnAdd(pod("1", "a", "a", false), false)
	assert.Empty(t, drain(d.Queue), "owned add ignored")

	var gone []string
	d.Terminating = TerminatingDeletes
	d.Gone = func(p *corev1.Pod, final bool) { gone = append(gone, fmt.Sprintf("%s %t", p.ResourceVersion, final)) }
	d.OnUpdate(pod("1", "a", "a", false), pod("2", "a", "a", true))
	d.OnDelete(pod("3", "a", "a", true))
	assert.Equal(t, []string{"2 false", "3 true"}, gone)
	assert.Empty(t, calls, "Gone replaces Deleted")
	assert.Empty(t, drain(d.Queue), "and the queueing")
}
