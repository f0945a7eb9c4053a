package statefulset_test

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// start starts a server whose pods run and whose claims get volumes, with
// the StatefulSet controller.
func start(t *testing.T) (*apiserver.Server, kubernetes.Interface) {
	t.Helper()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Nodes: controllers.Nodes(2),
		Controllers: []controllers.Name{controllers.ServiceAccount, controllers.Kubelet, controllers.Scheduler, controllers.NodeLifecycle,
			controllers.GarbageCollector, controllers.PersistentVolumeBinder, controllers.VolumeProvisioner, controllers.PVCProtection,
			controllers.PVProtection, controllers.StatefulSet}}))
	client, err := srv.Clientset()
	require.NoError(t, err)
	return srv, client
}

var web = map[string]string{"app": "web"}

func statefulSet(name string, replicas int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To(replicas), ServiceName: "nginx", Selector: &metav1.LabelSelector{MatchLabels: web},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: web},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}}}}}
}

func withClaims(s *appsv1.StatefulSet, policy *appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy) *appsv1.StatefulSet {
	s.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}}
	s.Spec.PersistentVolumeClaimRetentionPolicy = policy
	return s
}

func names[T any](items []T, name func(*T) string) []string {
	var out []string
	for i := range items {
		out = append(out, name(&items[i]))
	}
	sort.Strings(out)
	return out
}

func pods(t *testing.T, c kubernetes.Interface) []corev1.Pod {
	t.Helper()
	list, err := c.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

func podNames(t *testing.T, c kubernetes.Interface) []string {
	return names(pods(t, c), func(p *corev1.Pod) string { return p.Name })
}

func claimNames(t *testing.T, c kubernetes.Interface) []string {
	t.Helper()
	list, err := c.CoreV1().PersistentVolumeClaims("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	return names(list.Items, func(p *corev1.PersistentVolumeClaim) string { return p.Name })
}

func messages(t *testing.T, c kubernetes.Interface, name string) []string {
	t.Helper()
	list, err := c.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String()})
	require.NoError(t, err)
	return names(list.Items, func(e *corev1.Event) string { return e.Reason + ": " + e.Message })
}

func get(t *testing.T, c kubernetes.Interface, name string) *appsv1.StatefulSet {
	t.Helper()
	s, err := c.AppsV1().StatefulSets("default").Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return s
}

func update(t *testing.T, c kubernetes.Interface, name string, change func(*appsv1.StatefulSet)) {
	t.Helper()
	// The controller writes the status meanwhile: retried on conflict.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s := get(t, c, name)
		change(s)
		_, err := c.AppsV1().StatefulSets("default").Update(t.Context(), s, metav1.UpdateOptions{})
		return err
	}))
}

// Pods are named by ordinal, labelled, given a hostname and owned as
// upstream makes them; the status counts them; the events say so.
func TestStatefulSetCreatesPods(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	set, err := c.AppsV1().StatefulSets("default").Create(t.Context(), statefulSet("web", 3), metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)

	set = get(t, c, "web")
	rev := set.Status.UpdateRevision
	// The name kube-controller-manager v1.37.2 gives this template's
	// revision (parity: cluster-statefulsets.yaml, parallel-pod-management).
	require.Equal(t, "web-545854b8b4", rev)
	ps := pods(t, c)
	require.Len(t, ps, 3)
	for i, p := range ps {
		ord := string(rune('0' + i))
		assert.Equal(t, "web-"+ord, p.Name)
		assert.Equal(t, "web-", p.GenerateName)
		assert.Equal(t, map[string]string{"app": "web", "controller-revision-hash": rev, "statefulset.kubernetes.io/pod-name": p.Name,
			"apps.kubernetes.io/pod-index": ord}, p.Labels)
		assert.Equal(t, p.Name, p.Spec.Hostname)
		assert.Equal(t, "nginx", p.Spec.Subdomain)
		assert.Equal(t, []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: set.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}, p.OwnerReferences)
		assert.Equal(t, "kube-controller-manager", p.ManagedFields[0].Manager)
	}
	assert.Equal(t, appsv1.StatefulSetStatus{ObservedGeneration: 1, Replicas: 3, ReadyReplicas: 3, CurrentReplicas: 3, UpdatedReplicas: 3,
		AvailableReplicas: 3, CurrentRevision: rev, UpdateRevision: rev, CollisionCount: ptr.To(int32(0))}, set.Status)
	assert.Equal(t, []string{"SuccessfulCreate: create Pod web-0 in StatefulSet web successful",
		"SuccessfulCreate: create Pod web-1 in StatefulSet web successful",
		"SuccessfulCreate: create Pod web-2 in StatefulSet web successful"}, lower(messages(t, c, "web")))

	revs, err := c.AppsV1().ControllerRevisions("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, revs.Items, 1)
	r := revs.Items[0]
	assert.Equal(t, rev, r.Name)
	assert.Equal(t, int64(1), r.Revision)
	assert.Equal(t, "web-"+r.Labels["controller.kubernetes.io/hash"], r.Name)
	assert.Equal(t, set.UID, metav1.GetControllerOf(&r).UID)
}

// upstream title-cases the verb ("Create Pod ..."); the tests compare the
// rest of the message.
func lower(msgs []string) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		reason, msg, _ := strings.Cut(m, ": ")
		out[i] = reason + ": " + strings.ToLower(msg[:1]) + msg[1:]
	}
	return out
}

// OrderedReady: web-1 is not created while web-0 is not Ready; scaling
// down deletes from the highest ordinal, one at a time.
func TestStatefulSetOrderedStartAndReverseScaleDown(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	_, err := c.AppsV1().StatefulSets("default").Create(t.Context(), statefulSet("web", 1), metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	require.NoError(t, srv.Kubelet().SetReady(t.Context(), "default", "web-0", "app", false))
	waitPod(t, c, "web-0", func(p *corev1.Pod) bool { return !ready(p) })
	apiservertest.WaitIdle(t, srv) // the controller's pod informer has it not Ready too

	update(t, c, "web", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To(int32(3)) })
	apiservertest.WaitIdle(t, srv)
	assert.Equal(t, []string{"web-0"}, podNames(t, c), "web-1 waits for web-0 to be Ready")
	assert.Equal(t, int32(0), get(t, c, "web").Status.ReadyReplicas)

	require.NoError(t, srv.Kubelet().SetReady(t.Context(), "default", "web-0", "app", true))
	apiservertest.WaitIdle(t, srv)
	assert.Equal(t, []string{"web-0", "web-1", "web-2"}, podNames(t, c))

	w, err := c.CoreV1().Pods("default").Watch(t.Context(), metav1.ListOptions{ResourceVersion: pods0RV(t, c)})
	require.NoError(t, err)
	defer w.Stop()
	update(t, c, "web", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To(int32(0)) })
	apiservertest.WaitIdle(t, srv)
	assert.Empty(t, podNames(t, c))
	var deleted []string
	for len(deleted) < 3 {
		select {
		case e := <-w.ResultChan():
			if e.Type == "DELETED" {
				deleted = append(deleted, e.Object.(*corev1.Pod).Name)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("deleted %v", deleted)
		}
	}
	assert.Equal(t, []string{"web-2", "web-1", "web-0"}, deleted)
}

func pods0RV(t *testing.T, c kubernetes.Interface) string {
	list, err := c.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	return list.ResourceVersion
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func waitPod(t *testing.T, c kubernetes.Interface, name string, cond func(*corev1.Pod) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		p, err := c.CoreV1().Pods("default").Get(t.Context(), name, metav1.GetOptions{})
		if err == nil && cond(p) {
			return
		}
		require.True(t, time.Now().Before(deadline), "pod %s: %v", name, err)
		time.Sleep(20 * time.Millisecond)
	}
}

// Parallel with spec.ordinals.start: every pod at once, numbered from 5.
func TestStatefulSetParallelOrdinalsStart(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	s := statefulSet("web", 3)
	s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
	s.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 5}
	_, err := c.AppsV1().StatefulSets("default").Create(t.Context(), s, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	ps := pods(t, c)
	assert.Equal(t, []string{"web-5", "web-6", "web-7"}, podNames(t, c))
	assert.Equal(t, "5", ps[0].Labels["apps.kubernetes.io/pod-index"])
	assert.Equal(t, int32(3), get(t, c, "web").Status.ReadyReplicas)
}

// A template change with a partition updates only the pods at or above
// it, highest first; lowering the partition finishes the rollout, which
// completes the update (currentRevision becomes the update revision).
func TestStatefulSetPartitionRollout(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	_, err := c.AppsV1().StatefulSets("default").Create(t.Context(), statefulSet("web", 3), metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	first := get(t, c, "web").Status.CurrentRevision

	update(t, c, "web", func(s *appsv1.StatefulSet) {
		s.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
		s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(int32(2))
	})
	apiservertest.WaitIdle(t, srv)
	set := get(t, c, "web")
	second := set.Status.UpdateRevision
	require.NotEqual(t, first, second)
	assert.Equal(t, first, set.Status.CurrentRevision)
	assert.Equal(t, int32(2), set.Status.CurrentReplicas)
	assert.Equal(t, int32(1), set.Status.UpdatedReplicas)
	ps := pods(t, c)
	assert.Equal(t, []string{first, first, second}, []string{ps[0].Labels["controller-revision-hash"],
		ps[1].Labels["controller-revision-hash"], ps[2].Labels["controller-revision-hash"]})
	assert.Equal(t, "nginx:1.28", ps[2].Spec.Containers[0].Image)

	update(t, c, "web", func(s *appsv1.StatefulSet) { s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(int32(0)) })
	apiservertest.WaitIdle(t, srv)
	set = get(t, c, "web")
	assert.Equal(t, second, set.Status.CurrentRevision)
	assert.Equal(t, int32(3), set.Status.CurrentReplicas)
	for _, p := range pods(t, c) {
		assert.Equal(t, "nginx:1.28", p.Spec.Containers[0].Image, p.Name)
	}
	assert.Contains(t, lower(messages(t, c, "web")), "SuccessfulDelete: delete Pod web-0 in StatefulSet web successful")

	revs, err := c.AppsV1().ControllerRevisions("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{first, second}, names(revs.Items, func(r *appsv1.ControllerRevision) string { return r.Name }))

	// Back to the first template: its revision is renumbered, not copied.
	update(t, c, "web", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "nginx:1.27" })
	apiservertest.WaitIdle(t, srv)
	set = get(t, c, "web")
	assert.Equal(t, first, set.Status.UpdateRevision)
	r, err := c.AppsV1().ControllerRevisions("default").Get(t.Context(), first, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int64(3), r.Revision)
}

// OnDelete: a template change leaves the pods alone until one is deleted,
// which comes back at the update revision.
func TestStatefulSetOnDelete(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	s := statefulSet("web", 2)
	s.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	_, err := c.AppsV1().StatefulSets("default").Create(t.Context(), s, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	update(t, c, "web", func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.Containers[0].Image = "nginx:1.28" })
	apiservertest.WaitIdle(t, srv)
	for _, p := range pods(t, c) {
		assert.Equal(t, "nginx:1.27", p.Spec.Containers[0].Image)
	}
	set := get(t, c, "web")
	assert.Equal(t, int32(0), set.Status.UpdatedReplicas)

	require.NoError(t, c.CoreV1().Pods("default").Delete(t.Context(), "web-1", metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv)
	ps := pods(t, c)
	require.Len(t, ps, 2)
	assert.Equal(t, "nginx:1.27", ps[0].Spec.Containers[0].Image)
	assert.Equal(t, "nginx:1.28", ps[1].Spec.Containers[0].Image)
	set = get(t, c, "web")
	assert.Equal(t, int32(1), set.Status.UpdatedReplicas)
	assert.Equal(t, set.Status.UpdateRevision, ps[1].Labels["controller-revision-hash"])
}

// Claims are made per template and ordinal and bound by the provisioner;
// Retain keeps them after a scale down and the set's deletion.
func TestStatefulSetClaimsRetained(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	_, err := c.AppsV1().StatefulSets("default").Create(t.Context(), withClaims(statefulSet("web", 2), nil), metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	assert.Equal(t, []string{"data-web-0", "data-web-1"}, claimNames(t, c))
	ps := pods(t, c)
	require.Len(t, ps, 2)
	assert.Equal(t, corev1.PodRunning, ps[1].Status.Phase)
	assert.Equal(t, "data-web-1", ps[1].Spec.Volumes[0].PersistentVolumeClaim.ClaimName)
	pvc, err := c.CoreV1().PersistentVolumeClaims("default").Get(t.Context(), "data-web-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.ClaimBound, pvc.Status.Phase)
	assert.Equal(t, web, pvc.Labels)
	assert.Empty(t, pvc.OwnerReferences)
	assert.Contains(t, lower(messages(t, c, "web")), "SuccessfulCreate: create Claim data-web-0 Pod web-0 in StatefulSet web success")

	update(t, c, "web", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To(int32(1)) })
	apiservertest.WaitIdle(t, srv)
	require.NoError(t, c.AppsV1().StatefulSets("default").Delete(t.Context(), "web", metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv)
	assert.Equal(t, []string{"data-web-0", "data-web-1"}, claimNames(t, c))
}

// WhenScaled: Delete gives the condemned pod's claim to the pod, and the
// garbage collector deletes it with the pod; WhenDeleted: Delete gives the
// others to the set, deleted with it.
func TestStatefulSetClaimsDeletedByPolicy(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	policy := &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
		WhenScaled: appsv1.DeletePersistentVolumeClaimRetentionPolicyType}
	set, err := c.AppsV1().StatefulSets("default").Create(t.Context(), withClaims(statefulSet("web", 2), policy), metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	pvc, err := c.CoreV1().PersistentVolumeClaims("default").Get(t.Context(), "data-web-1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: set.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}, pvc.OwnerReferences)

	update(t, c, "web", func(s *appsv1.StatefulSet) { s.Spec.Replicas = ptr.To(int32(1)) })
	apiservertest.WaitIdle(t, srv)
	waitFor(t, func() bool { return equal(claimNames(t, c), []string{"data-web-0"}) })

	require.NoError(t, c.AppsV1().StatefulSets("default").Delete(t.Context(), "web", metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv)
	waitFor(t, func() bool { return len(claimNames(t, c)) == 0 })
}

func equal(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "condition not met")
		time.Sleep(20 * time.Millisecond)
	}
}

// A failed pod is deleted and created again under its name.
func TestStatefulSetReplacesFailedPod(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	s := statefulSet("web", 1)
	s.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
	_, err := c.AppsV1().StatefulSets("default").Create(t.Context(), s, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	old := pods(t, c)[0]
	// A pod failed outright (as an eviction leaves it): phase Failed.
	old.Status.Phase = corev1.PodFailed
	_, err = c.CoreV1().Pods("default").UpdateStatus(t.Context(), &old, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitFor(t, func() bool {
		ps := pods(t, c)
		return len(ps) == 1 && ps[0].UID != old.UID && ready(&ps[0])
	})
	apiservertest.WaitIdle(t, srv)
	assert.Contains(t, lower(messages(t, c, "web")), "SuccessfulDelete: delete Pod web-0 in StatefulSet web successful")
}

// An orphan pod named as a member is adopted; an orphan revision its
// selector matches too; a pod relabelled out of the selector is released
// and replaced.
func TestStatefulSetAdoptsAndReleases(t *testing.T) {
	t.Parallel()
	srv, c := start(t)
	_, err := c.CoreV1().Pods("default").Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Labels: web},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.AppsV1().ControllerRevisions("default").Create(t.Context(), &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: "old", Labels: web}, Revision: 1, Data: runtime.RawExtension{Raw: []byte(`{"spec":{}}`)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	set, err := c.AppsV1().StatefulSets("default").Create(t.Context(), statefulSet("web", 1), metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	p, err := c.CoreV1().Pods("default").Get(t.Context(), "web-0", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, metav1.GetControllerOf(p))
	assert.Equal(t, set.UID, metav1.GetControllerOf(p).UID)
	assert.Equal(t, "web-0", p.Labels["statefulset.kubernetes.io/pod-name"], "identity restored by an update")
	r, err := c.AppsV1().ControllerRevisions("default").Get(t.Context(), "old", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, metav1.GetControllerOf(r))
	assert.Equal(t, set.UID, metav1.GetControllerOf(r).UID)

	p.Labels = map[string]string{"app": "other"}
	_, err = c.CoreV1().Pods("default").Update(t.Context(), p, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitPod(t, c, "web-0", func(p *corev1.Pod) bool { return metav1.GetControllerOf(p) == nil })
	// The released pod keeps the name: the set creates web-0 once it is gone.
	require.NoError(t, c.CoreV1().Pods("default").Delete(t.Context(), "web-0", metav1.DeleteOptions{}))
	waitFor(t, func() bool {
		p, err := c.CoreV1().Pods("default").Get(t.Context(), "web-0", metav1.GetOptions{})
		return err == nil && metav1.GetControllerOf(p) != nil && p.Labels["app"] == "web"
	})
	apiservertest.WaitIdle(t, srv)
}
