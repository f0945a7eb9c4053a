package scheduler

// The default profile's filters, in its order, each with kube-scheduler
// v1.37.2's reasons: a node passes or is rejected with a status whose code
// says whether preemption could help (unschedulable) or not
// (unresolvable).

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	ndf "k8s.io/component-helpers/nodedeclaredfeatures"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/kubeembed/apiserver/internal/hostports"
)

// code is a rejection's kind, as the framework's Unschedulable and
// UnschedulableAndUnresolvable.
type code int

const (
	unschedulable code = iota + 1
	unresolvable
)

// status is why a node does not fit; nil: it fits.
type status struct {
	code    code
	reasons []string
}

func reject(c code, reasons ...string) *status { return &status{code: c, reasons: reasons} }

// filter runs the filters on one node, stopping at the first that
// rejects it.
func (c *cycle) filter(ni *nodeInfo) *status {
	for _, f := range []func(*nodeInfo) *status{
		c.nodeUnschedulable, c.taintToleration, c.nodeAffinity, c.nodePorts, c.resourcesFit,
		c.volumeBinding, c.topologySpread, c.interPodAffinity, c.nodeDeclaredFeatures,
	} {
		if s := f(ni); s != nil {
			return s
		}
	}
	return nil
}

// nodeUnschedulable: a cordoned node takes only pods that tolerate
// node.kubernetes.io/unschedulable:NoSchedule.
func (c *cycle) nodeUnschedulable(ni *nodeInfo) *status {
	taint := &corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	if ni.node.Spec.Unschedulable && !corev1helpers.TolerationsTolerateTaint(klog.Background(), c.pod.Spec.Tolerations, taint, false) {
		return reject(unresolvable, "node(s) were unschedulable")
	}
	return nil
}

// nodeDeclaredFeatures: the node declares the features the pod needs (a
// container restart rule that restarts all containers).
func (c *cycle) nodeDeclaredFeatures(ni *nodeInfo) *status {
	if c.features.IsEmpty() {
		return nil
	}
	if m, err := ndf.DefaultFramework.MatchNode(c.features, ni.node); err != nil || !m.IsMatch {
		return reject(unresolvable, "node(s) didn't match Pod's required features")
	}
	return nil
}

// taintToleration: the pod tolerates the node's NoSchedule and NoExecute
// taints.
func (c *cycle) taintToleration(ni *nodeInfo) *status {
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), ni.node.Spec.Taints, c.pod.Spec.Tolerations,
		func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}, false)
	if untolerated {
		return reject(unresolvable, "node(s) had untolerated taint(s)")
	}
	return nil
}

// nodeAffinity: the node matches the pod's nodeSelector and required node
// affinity.
func (c *cycle) nodeAffinity(ni *nodeInfo) *status {
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(c.pod).Match(ni.node); !ok {
		return reject(unresolvable, "node(s) didn't match Pod's node affinity/selector")
	}
	return nil
}

// nodePorts: the pod's host ports are free on the node.
func (c *cycle) nodePorts(ni *nodeInfo) *status {
	for _, hp := range hostports.Of(&c.pod.Spec) {
		if ni.conflicts(hp) {
			return reject(unschedulable, "node(s) didn't have free ports for the requested pod ports")
		}
	}
	return nil
}

// resourcesFit: the node has room for another pod and for the pod's
// requests; a request over the node's allocatable can never fit.
func (c *cycle) resourcesFit(ni *nodeInfo) *status {
	s := &status{code: unschedulable}
	allocatable := ni.node.Status.Allocatable
	if int64(len(ni.pods)+1) > allocatable.Pods().Value() {
		s.reasons = append(s.reasons, "Too many pods")
	}
	for _, name := range requestOrder(c.requests) {
		want := milli(c.requests, name)
		if want == 0 {
			continue
		}
		if alloc := milli(allocatable, name); want > alloc-ni.requested.of(name) {
			s.reasons = append(s.reasons, fmt.Sprintf("Insufficient %s", name))
			if want > alloc {
				s.code = unresolvable
			}
		}
	}
	if len(s.reasons) == 0 {
		return nil
	}
	return s
}

// requestOrder is the order the fit check reports resources in: cpu,
// memory, ephemeral storage, then the others.
func requestOrder(requests corev1.ResourceList) []corev1.ResourceName {
	out := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}
	for name := range requests {
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory && name != corev1.ResourceEphemeralStorage && name != corev1.ResourcePods {
			out = append(out, name)
		}
	}
	return out
}

func mustQuantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}
