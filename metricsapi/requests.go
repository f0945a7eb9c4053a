package metricsapi

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// window is the span a usage is measured over: metrics-server's default
// --metric-resolution, which HPA controllers read as the sample's age.
const window = 15 * time.Second

// RequestsAsUsage is a simulation, since no container runs to be measured:
// each container of a Running pod (sidecars, init containers that keep
// running, included) uses what it requests, cpu and memory, 0 of what it
// does not request; each node uses the sum of its Running pods' usage
// (what the node's own processes use is not counted). It reads the pods and
// nodes with c when asked, so a usage follows a pod's requests and phase
// at once. An HPA on resource utilization therefore sees 100% of requests,
// and one on an absolute value sees the requests.
func RequestsAsUsage(c kubernetes.Interface) Source { return requestsAsUsage{client: c} }

type requestsAsUsage struct{ client kubernetes.Interface }

func (r requestsAsUsage) running(ctx context.Context) ([]corev1.Pod, error) {
	pods, err := r.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Running"})
	if err != nil {
		return nil, err
	}
	return pods.Items, nil
}

func (r requestsAsUsage) PodMetrics(ctx context.Context) ([]metricsv1beta1.PodMetrics, error) {
	pods, err := r.running(ctx)
	if err != nil {
		return nil, err
	}
	now := metav1.Now()
	out := make([]metricsv1beta1.PodMetrics, 0, len(pods))
	for i := range pods {
		p := &pods[i]
		pm := metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels,
			CreationTimestamp: now}, Timestamp: now, Window: metav1.Duration{Duration: window}}
		for _, c := range runningContainers(p) {
			pm.Containers = append(pm.Containers, metricsv1beta1.ContainerMetrics{Name: c.Name, Usage: usage(c.Resources.Requests)})
		}
		out = append(out, pm)
	}
	return out, nil
}

func (r requestsAsUsage) NodeMetrics(ctx context.Context) ([]metricsv1beta1.NodeMetrics, error) {
	nodes, err := r.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	pods, err := r.running(ctx)
	if err != nil {
		return nil, err
	}
	used := map[string]corev1.ResourceList{}
	for i := range pods {
		sum := used[pods[i].Spec.NodeName]
		if sum == nil {
			sum = usage(nil)
		}
		for _, c := range runningContainers(&pods[i]) {
			for name, q := range usage(c.Resources.Requests) {
				total := sum[name]
				total.Add(q)
				sum[name] = total
			}
		}
		used[pods[i].Spec.NodeName] = sum
	}
	now := metav1.Now()
	out := make([]metricsv1beta1.NodeMetrics, 0, len(nodes.Items))
	for _, n := range nodes.Items {
		u := used[n.Name]
		if u == nil {
			u = usage(nil)
		}
		out = append(out, metricsv1beta1.NodeMetrics{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels, CreationTimestamp: now},
			Timestamp: now, Window: metav1.Duration{Duration: window}, Usage: u})
	}
	return out, nil
}

// runningContainers are the containers that run alongside the pod's main
// ones: restartable init containers (sidecars) first, as they start first.
func runningContainers(p *corev1.Pod) []corev1.Container {
	var out []corev1.Container
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			out = append(out, c)
		}
	}
	return append(out, p.Spec.Containers...)
}

// usage is the cpu and memory of requests, 0 for either not requested:
// metrics-server always reports both.
func usage(requests corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(0, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(0, resource.BinarySI)}
	for name := range out {
		if q, ok := requests[name]; ok {
			out[name] = q.DeepCopy()
		}
	}
	return out
}
