package kubelet_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeembed/apiserver/controllers"
)

// A pod given its nodeName past the scheduler that the node cannot run is
// rejected by the kubelet's admission as v1.37's rejects it: phase Failed,
// the handler's reason, "Pod was rejected: " and its message, a start
// time and the QoS class and nothing else, a Warning event; it never runs
// and takes nothing of the node; deleted, the kubelet deletes it.
func TestKubeletRejectsPodsTheNodeCannotRun(t *testing.T) {
	t.Parallel()
	e := start(t, controllers.Node{Name: "node-0", Labels: map[string]string{"disk": "ssd"},
		Taints:   []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoExecute}},
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("3")}})
	tolerate := []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
	withPort := func(name string) *corev1.Pod {
		p := simplePod(name)
		p.Spec.Tolerations = tolerate
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
		return p
	}
	e.waitPod(t, e.createPod(t, withPort("holds-port")), ready)

	cases := []struct {
		name, reason, message string
		pod                   func(*corev1.Pod)
	}{
		{"too-big", "OutOfcpu", "Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}
		}},
		{"wrong-node", "NodeAffinity", "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector", func(p *corev1.Pod) {
			p.Spec.NodeSelector = map[string]string{"disk": "hdd"}
		}},
		{"same-port", "NodePorts", "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports", func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = withPort("").Spec.Containers[0].Ports
		}},
		{"untolerated", "TaintToleration", "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate", func(p *corev1.Pod) {
			p.Spec.Tolerations = nil
		}},
		{"unsafe-sysctl", "SysctlForbidden", `forbidden sysctl: "net.core.somaxconn" not allowlisted`, func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "net.ipv4.tcp_syncookies", Value: "1"}, {Name: "net/core/somaxconn", Value: "1024"}}}
		}},
		{"windows", "PodOSNotSupported", "Failed to admit pod as the OS field doesn't match node OS", func(p *corev1.Pod) {
			p.Spec.OS = &corev1.PodOS{Name: corev1.Windows}
		}},
	}
	for _, tc := range cases {
		pod := simplePod(tc.name)
		pod.Spec.Tolerations = tolerate
		tc.pod(pod)
		p := e.waitPod(t, e.createPod(t, pod), func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
		require.NotNil(t, p.Status.StartTime, tc.name)
		assert.Equal(t, corev1.PodStatus{ObservedGeneration: 1, Phase: corev1.PodFailed, Reason: tc.reason, Message: "Pod was rejected: " + tc.message,
			QOSClass: p.Status.QOSClass, StartTime: p.Status.StartTime}, p.Status, tc.name)
		ev := e.events(t, "default", tc.name, tc.reason)
		assert.Equal(t, corev1.EventTypeWarning, ev[0].Type, tc.name)
		assert.Equal(t, tc.message, ev[0].Message, tc.name)
	}

	// The rejected pods hold nothing: two more fit the node of 3 pods, a
	// fourth does not.
	e.waitPod(t, e.createPod(t, withPort("second")), func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	second := simplePod("second-ok")
	second.Spec.Tolerations = tolerate
	e.waitPod(t, e.createPod(t, second), ready)
	third := simplePod("third-ok")
	third.Spec.Tolerations = tolerate
	e.waitPod(t, e.createPod(t, third), ready)
	fourth := simplePod("fourth")
	fourth.Spec.Tolerations = tolerate
	p := e.waitPod(t, e.createPod(t, fourth), func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	assert.Equal(t, "OutOfpods", p.Status.Reason)
	assert.Equal(t, "Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3", p.Status.Message)

	require.NoError(t, e.client.CoreV1().Pods("default").Delete(t.Context(), "fourth", metav1.DeleteOptions{}))
	e.waitGone(t, p)
}

// A label just added to the node admits a pod that selects it though the
// kubelet's informer may not have it yet: admission reads the node from
// the server before it rejects a pod for its node affinity alone.
func TestAdmissionReadsTheNodeAgain(t *testing.T) {
	t.Parallel()
	e := start(t)
	for i := range 20 {
		label := fmt.Sprintf("example.com/l%d", i)
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"yes"}}}`, label)
		_, err := e.client.CoreV1().Nodes().Patch(t.Context(), "node-0", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		require.NoError(t, err)
		pod := simplePod(fmt.Sprintf("selects-%d", i))
		pod.Spec.NodeSelector = map[string]string{label: "yes"}
		e.waitPod(t, e.createPod(t, pod), func(p *corev1.Pod) bool { return ready(p) || p.Status.Phase == corev1.PodFailed })
	}
	pods, err := e.client.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	for _, p := range pods.Items {
		assert.Equal(t, corev1.PodRunning, p.Status.Phase, "%s: %s", p.Name, p.Status.Message)
	}
}
