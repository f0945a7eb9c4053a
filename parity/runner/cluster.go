package runner

// Scenarios of a cluster: the nodes a scenario declares, and the steps a
// simulated kubelet takes on both servers (a node goes NotReady, a
// container exits).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeembed/apiserver/controllers"
)

// NodeSpec is a scenario's simulated node: controllers.Node as YAML.
// Name, Labels and Zone may use {id}.
type NodeSpec struct {
	Name          string              `json:"name"`
	Labels        map[string]string   `json:"labels,omitempty"`
	Zone          string              `json:"zone,omitempty"`
	Taints        []corev1.Taint      `json:"taints,omitempty"`
	Capacity      corev1.ResourceList `json:"capacity,omitempty"`
	Unschedulable bool                `json:"unschedulable,omitempty"`
}

func (n NodeSpec) node(sub func(string) string) controllers.Node {
	labels := map[string]string{}
	for k, v := range n.Labels {
		labels[sub(k)] = sub(v)
	}
	return controllers.Node{Name: sub(n.Name), Labels: labels, Zone: sub(n.Zone), Taints: n.Taints,
		Capacity: n.Capacity, Unschedulable: n.Unschedulable}
}

// Kubelet is what the runner asks of a server's simulated kubelet
// (*kubelet.Kubelet).
type Kubelet interface {
	AddNode(ctx context.Context, spec controllers.Node) (*corev1.Node, error)
	RemoveNode(ctx context.Context, name string) error
	SetNodeReady(ctx context.Context, name string, ready bool, message string) error
	StopNode(name string) error
	StartNode(ctx context.Context, name string) error
	Exit(ctx context.Context, namespace, pod, container string, code int32) error
	SetReady(ctx context.Context, namespace, pod, container string, ready bool) error
}

// KubeletActions are the actions of KUBELET steps: on a node (path
// /nodes/NAME) and on a pod (path /namespaces/NS/pods/NAME).
var KubeletActions = map[string][]string{
	"node": {"ready", "not-ready", "stop", "start", "remove"},
	"pod":  {"exit", "ready", "not-ready"},
}

// kubeletTarget parses a KUBELET step's path: "node" and its name, or
// "pod" and its namespace and name.
func kubeletTarget(path string) (kind, ns, name string, ok bool) {
	p := strings.Split(strings.TrimPrefix(path, "/"), "/")
	switch {
	case len(p) == 2 && p[0] == "nodes":
		return "node", "", p[1], true
	case len(p) == 4 && p[0] == "namespaces" && p[2] == "pods":
		return "pod", p[1], p[3], true
	}
	return "", "", "", false
}

func (st Step) validateKubelet(cluster bool) error {
	if st.Verb != "KUBELET" {
		if st.Action != "" || st.Container != "" || st.Code != 0 {
			return errors.New("action, container and code are for KUBELET steps")
		}
		return nil
	}
	if !cluster {
		return errors.New("KUBELET steps are for the scenarios of a cluster file")
	}
	kind, _, _, ok := kubeletTarget(st.Path)
	if !ok {
		return fmt.Errorf("KUBELET path %q is neither /nodes/NAME nor /namespaces/NS/pods/NAME", st.Path)
	}
	if !slices.Contains(KubeletActions[kind], st.Action) {
		return fmt.Errorf("KUBELET action %q on a %s is not one of %v", st.Action, kind, KubeletActions[kind])
	}
	return nil
}

// doKubelet runs a KUBELET step on t's simulated kubelet: 200 when it did
// it, else the error.
func (t *Target) doKubelet(ctx context.Context, st Step, sub func(string) string) Response {
	if t.Kubelet == nil {
		return Response{Err: t.Name + " has no simulated kubelet"}
	}
	_, ns, name, _ := kubeletTarget(sub(st.Path))
	k := t.Kubelet
	var err error
	switch st.Action {
	case "ready", "not-ready":
		if ns == "" {
			err = k.SetNodeReady(ctx, name, st.Action == "ready", "")
		} else {
			err = k.SetReady(ctx, ns, name, st.Container, st.Action == "ready")
		}
	case "stop":
		err = k.StopNode(name)
	case "start":
		err = k.StartNode(ctx, name)
	case "remove":
		err = k.RemoveNode(ctx, name)
	case "exit":
		err = k.Exit(ctx, ns, name, st.Container, st.Code)
	}
	if err != nil {
		return Response{Err: err.Error()}
	}
	return Response{Code: 200}
}

// addNodes adds a scenario's nodes to t and waits until each is Ready and
// schedulable as its node lifecycle controller sees it (the not-ready
// taint it puts on a new node is gone), as a test on a cluster waits for
// its nodes.
func (t *Target) addNodes(ctx context.Context, s Scenario, id string) error {
	sub := t.substituter(id, id, nil)
	for _, n := range s.Nodes {
		if t.Kubelet == nil {
			return errors.New(t.Name + " has no simulated kubelet")
		}
		if _, err := t.Kubelet.AddNode(ctx, n.node(sub)); err != nil {
			return err
		}
	}
	client, err := t.clientset()
	if err != nil {
		return err
	}
	for _, n := range s.Nodes {
		if err := waitSchedulable(ctx, client, sub(n.Name)); err != nil {
			return err
		}
	}
	if t.Settle != nil {
		return t.Settle(ctx)
	}
	return nil
}

// cleanUp ends a cluster scenario: its pods are deleted at once (a pod
// left pending would take the next scenario's nodes), its namespace is
// deleted, then its nodes (nodes a step removed are gone).
func (t *Target) cleanUp(ctx context.Context, s Scenario, id string) {
	if !s.Cluster {
		return
	}
	if client, err := t.clientset(); err == nil {
		_ = client.CoreV1().Pods(id).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
		_ = client.CoreV1().Namespaces().Delete(ctx, id, metav1.DeleteOptions{})
	}
	sub := t.substituter(id, id, nil)
	for _, n := range s.Nodes {
		_ = t.Kubelet.RemoveNode(ctx, sub(n.Name))
	}
}

func waitSchedulable(ctx context.Context, client kubernetes.Interface, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil && !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady }) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s: still tainted %s: %w", name, corev1.TaintNodeNotReady, ctx.Err())
		case <-time.After(50 * time.Millisecond): // polling the node lifecycle controller
		}
	}
}
