package tainteviction_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// Pods on a node tainted NoExecute: one that does not tolerate the taint is
// evicted at once (DisruptionTarget, then deleted), one that tolerates it
// for 300 s (DefaultTolerationSeconds' not-ready toleration) 300 s later
// on the server's clock, one that tolerates it for ever stays.
func TestNoExecuteTaintEvicts(t *testing.T) {
	t.Parallel()
	e := start(t)
	srv, client, clock, mk := e.srv, e.client, e.clock, e.pod
	dedicated := corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoExecute}
	plain := mk(t, "plain")
	tolerant := mk(t, "tolerant", corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)})
	forever := mk(t, "forever", corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists})

	node, err := client.CoreV1().Nodes().Get(t.Context(), "node-0", metav1.GetOptions{})
	require.NoError(t, err)
	node.Spec.Taints = append(node.Spec.Taints, dedicated)
	_, err = client.CoreV1().Nodes().Update(t.Context(), node, metav1.UpdateOptions{})
	require.NoError(t, err)

	marked := waitPod(t, client, plain, func(p *corev1.Pod) bool { return p.DeletionTimestamp != nil })
	var target corev1.PodCondition
	for _, c := range marked.Status.Conditions {
		if c.Type == corev1.DisruptionTarget {
			target = c
		}
	}
	assert.Equal(t, "DeletionByTaintManager", target.Reason)
	assert.Equal(t, "Taint manager: deleting due to NoExecute taint", target.Message)
	apiservertest.WaitIdle(t, srv)
	for _, p := range []*corev1.Pod{tolerant, forever} {
		got, err := client.CoreV1().Pods("default").Get(t.Context(), p.Name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Nil(t, got.DeletionTimestamp, p.Name)
	}
	apiservertest.StepClock(t, srv, clock, 300*time.Second)
	waitPod(t, client, tolerant, func(p *corev1.Pod) bool { return p.DeletionTimestamp != nil })
	got, err := client.CoreV1().Pods("default").Get(t.Context(), "forever", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Nil(t, got.DeletionTimestamp)
}

// An eviction is carried out once (one event, count 1: the pod's own
// updates as it is evicted do not evict it again); a pod deleted while its
// eviction is still to come gets "Cancelling deletion"; a taint it does
// not tolerate, added while it waits out another it tolerates for a
// while, evicts it at once; one more taint tolerated for a while keeps
// the eviction scheduled, unrecorded. As v1.37.2's controller.
func TestTaintEvictionEvents(t *testing.T) {
	t.Parallel()
	e := start(t)
	srv, client, mk := e.srv, e.client, e.pod
	for300 := func(key string) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)}
	}
	plain := mk(t, "plain")
	deleted := mk(t, "deleted", for300("dedicated"))
	waiting := mk(t, "waiting", for300("dedicated"), for300("zone"))
	mk(t, "kept", for300("dedicated"), for300("zone"), corev1.Toleration{Key: "maintenance", Operator: corev1.TolerationOpExists})
	taint(t, client, corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoExecute})
	waitPod(t, client, plain, func(p *corev1.Pod) bool { return false })
	require.NoError(t, client.CoreV1().Pods("default").Delete(t.Context(), deleted.Name, metav1.DeleteOptions{}))
	waitPod(t, client, deleted, func(p *corev1.Pod) bool { return false })
	// As upstream's, a taint's change looks again at every pod of the
	// node its informer has, a terminating one too (and evicts it again):
	// the controllers have seen the deletions first.
	apiservertest.WaitIdle(t, srv)
	// A second taint tolerated for a while keeps the evictions scheduled
	// (at the same instant of the test's clock too: upstream's real clock
	// has moved on).
	taint(t, client, corev1.Taint{Key: "zone", Effect: corev1.TaintEffectNoExecute})
	apiservertest.WaitIdle(t, srv)
	taint(t, client, corev1.Taint{Key: "maintenance", Effect: corev1.TaintEffectNoExecute})
	waitPod(t, client, waiting, func(p *corev1.Pod) bool { return p.DeletionTimestamp != nil })
	apiservertest.WaitIdle(t, srv)

	events, err := client.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{FieldSelector: "reason=TaintManagerEviction"})
	require.NoError(t, err)
	got := map[string][]string{}
	for _, e := range events.Items {
		got[e.InvolvedObject.Name] = append(got[e.InvolvedObject.Name], fmt.Sprintf("%s x%d", e.Message, e.Count))
	}
	assert.Equal(t, map[string][]string{
		"plain":   {"Marking for deletion Pod default/plain x1"},
		"deleted": {"Cancelling deletion of Pod default/deleted x1"},
		"waiting": {"Cancelling deletion of Pod default/waiting x1", "Marking for deletion Pod default/waiting x1"},
	}, got)
}

// taint adds t to node-0's taints.
func taint(t *testing.T, client kubernetes.Interface, taint corev1.Taint) {
	t.Helper()
	node, err := client.CoreV1().Nodes().Get(t.Context(), "node-0", metav1.GetOptions{})
	require.NoError(t, err)
	node.Spec.Taints = append(node.Spec.Taints, taint)
	_, err = client.CoreV1().Nodes().Update(t.Context(), node, metav1.UpdateOptions{})
	require.NoError(t, err)
}

type env struct {
	srv    *apiserver.Server
	client kubernetes.Interface
	clock  *clocktesting.FakeClock
}

// start starts a server with one node, its kubelet and the taint eviction
// controller, on a fake clock.
func start(t *testing.T) env {
	t.Helper()
	clock := clocktesting.NewFakeClock(time.Now())
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Nodes: controllers.Nodes(1), Clock: clock,
		Controllers: []controllers.Name{controllers.ServiceAccount, controllers.Kubelet, controllers.TaintEviction}}))
	client, err := srv.Clientset()
	require.NoError(t, err)
	return env{srv: srv, client: client, clock: clock}
}

// pod creates a pod on node-0 with tolerations.
func (e env) pod(t *testing.T, name string, tolerations ...corev1.Toleration) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "node-0", Tolerations: tolerations, Containers: []corev1.Container{{Name: "c", Image: "nginx:1"}}}}
	created, err := e.client.CoreV1().Pods("default").Create(t.Context(), p, metav1.CreateOptions{})
	require.NoError(t, err)
	return created
}

// waitPod watches the pod from from until cond holds (a deleted pod
// counts as one marked for deletion).
func waitPod(t *testing.T, client kubernetes.Interface, from *corev1.Pod, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	w, err := client.CoreV1().Pods(from.Namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: from.ResourceVersion,
		FieldSelector: fields.OneTermEqualSelector("metadata.name", from.Name).String()})
	require.NoError(t, err)
	defer w.Stop()
	for {
		select {
		case ev := <-w.ResultChan():
			if p, ok := ev.Object.(*corev1.Pod); ok && (cond(p) || ev.Type == watch.Deleted) {
				return p
			}
		case <-ctx.Done():
			t.Fatalf("pod %s: condition not met", from.Name)
		}
	}
}
