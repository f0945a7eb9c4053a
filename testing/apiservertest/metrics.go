package apiservertest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/internal/retry"
)

// Metrics is a metrics.k8s.io/v1beta1 API server fed by the test, served
// as metrics-server is: an aggregated API behind the Service
// kube-system/metrics-server and its APIService v1beta1.metrics.k8s.io. The
// metrics clientset (k8s.io/metrics), kubectl top and HPA logic read it
// through the API server. Its methods are safe for concurrent use.
type Metrics struct {
	// client reads the pods and nodes a label selector picks.
	client kubernetes.Interface
	mu     sync.Mutex
	pods   map[string]metricsv1beta1.PodMetrics // by namespace/name
	nodes  map[string]metricsv1beta1.NodeMetrics
}

// ServeMetrics serves a Metrics as srv's metrics.k8s.io until the test
// ends; it returns once the APIService is Available (the aggregator has
// checked it, as it checks metrics-server) and the aggregator's proxy
// serves it (it learns the availability through its informer).
func ServeMetrics(t TB, srv *apiserver.Server) *Metrics {
	t.Helper()
	admin, err := srv.Clientset()
	if err != nil {
		t.Fatalf("ServeMetrics: %v", err)
	}
	m := &Metrics{client: admin, pods: map[string]metricsv1beta1.PodMetrics{}, nodes: map[string]metricsv1beta1.NodeMetrics{}}
	ca := ServeService(t, srv, metav1.NamespaceSystem, "metrics-server", m)
	c, err := aggregatorclient.NewForConfig(srv.RESTConfig())
	if err != nil {
		t.Fatalf("ServeMetrics: %v", err)
	}
	svc := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1beta1.metrics.k8s.io"},
		Spec: apiregistrationv1.APIServiceSpec{Group: "metrics.k8s.io", Version: "v1beta1", CABundle: ca,
			Service:              &apiregistrationv1.ServiceReference{Namespace: metav1.NamespaceSystem, Name: "metrics-server"},
			GroupPriorityMinimum: 100, VersionPriority: 100}}
	if _, err := c.ApiregistrationV1().APIServices().Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("ServeMetrics: %v", err)
	}
	t.Cleanup(func() { // before the handler stops: no availability check fails
		_ = c.ApiregistrationV1().APIServices().Delete(t.Context(), svc.Name, metav1.DeleteOptions{})
	})
	if err := waitAvailable(t, c, svc.Name); err != nil {
		t.Fatalf("ServeMetrics: %v", err)
	}
	if err := waitProxied(t, admin, metricsv1beta1.SchemeGroupVersion.String()); err != nil {
		t.Fatalf("ServeMetrics: %v", err)
	}
	return m
}

// waitProxied asks the server for the discovery of groupVersion until the
// aggregator proxies it, for at most 30 s.
func waitProxied(t TB, c kubernetes.Interface, groupVersion string) error {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	return retry.Until(ctx, func(context.Context) error {
		_, err := c.Discovery().ServerResourcesForGroupVersion(groupVersion)
		return err
	})
}

// waitAvailable reads the APIService until it is Available, for at most
// 30 s.
func waitAvailable(t TB, c aggregatorclient.Interface, name string) error {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	return retry.Until(ctx, func(ctx context.Context) error {
		svc, err := c.ApiregistrationV1().APIServices().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range svc.Status.Conditions {
			if cond.Type == apiregistrationv1.Available && cond.Status == apiregistrationv1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("APIService %s is not Available: %s", name, conditionMessage(svc))
	})
}

func conditionMessage(svc *apiregistrationv1.APIService) string {
	for _, c := range svc.Status.Conditions {
		if c.Type == apiregistrationv1.Available {
			return c.Reason + ": " + c.Message
		}
	}
	return "no condition yet"
}

// SetPodMetrics sets the usage of the containers of pod namespace/name
// (container name to usage), as measured now; nil removes the pod.
func (m *Metrics) SetPodMetrics(namespace, name string, containers map[string]corev1.ResourceList) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := namespace + "/" + name
	if containers == nil {
		delete(m.pods, key)
		return
	}
	pm := metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, CreationTimestamp: metav1.Now()},
		Timestamp: metav1.Now(), Window: metav1.Duration{Duration: 15 * time.Second}}
	for _, c := range slices.Sorted(maps.Keys(containers)) {
		pm.Containers = append(pm.Containers, metricsv1beta1.ContainerMetrics{Name: c, Usage: containers[c].DeepCopy()})
	}
	m.pods[key] = pm
}

// SetNodeMetrics sets the usage of node name, as measured now; nil removes
// the node.
func (m *Metrics) SetNodeMetrics(name string, usage corev1.ResourceList) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if usage == nil {
		delete(m.nodes, name)
		return
	}
	m.nodes[name] = metricsv1beta1.NodeMetrics{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.Now()},
		Timestamp: metav1.Now(), Window: metav1.Duration{Duration: 15 * time.Second}, Usage: usage.DeepCopy()}
}

const metricsPrefix = "/apis/metrics.k8s.io/v1beta1"

// ServeHTTP serves metrics.k8s.io/v1beta1: discovery, and get and list of
// nodes and pods (all namespaces or one). A list's label selector picks
// the pods or nodes of the server that have the labels, as metrics-server
// does: metrics of a pod that does not exist are listed only without one.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeStatus(w, apierrors.NewMethodNotSupported(metricsv1beta1.Resource("pods"), r.Method))
		return
	}
	path := strings.TrimSuffix(r.URL.Path, "/")
	if path == metricsPrefix {
		writeJSON(w, http.StatusOK, metricsDiscovery())
		return
	}
	rest, ok := strings.CutPrefix(path, metricsPrefix+"/")
	if !ok {
		writeStatus(w, apierrors.NewNotFound(metricsv1beta1.Resource(""), path))
		return
	}
	parts := strings.Split(rest, "/")
	picked, err := m.picked(r, parts)
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	m.serve(w, parts, picked)
}

// picked is nil (everything) without a label selector, else the
// namespace/name of the pods (or names of the nodes) it selects.
func (m *Metrics) picked(r *http.Request, parts []string) (map[string]bool, error) {
	sel := r.URL.Query().Get("labelSelector")
	if sel == "" {
		return nil, nil
	}
	if _, err := labels.Parse(sel); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	opts := metav1.ListOptions{LabelSelector: sel}
	if parts[0] == "nodes" {
		nodes, err := m.client.CoreV1().Nodes().List(r.Context(), opts)
		if err != nil {
			return nil, err
		}
		for _, n := range nodes.Items {
			out[n.Name] = true
		}
		return out, nil
	}
	namespace := ""
	if len(parts) > 1 && parts[0] == "namespaces" {
		namespace = parts[1]
	}
	pods, err := m.client.CoreV1().Pods(namespace).List(r.Context(), opts)
	if err != nil {
		return nil, err
	}
	for _, p := range pods.Items {
		out[p.Namespace+"/"+p.Name] = true
	}
	return out, nil
}

// serve answers nodes, nodes/<n>, pods, namespaces/<ns>/pods[/<p>].
func (m *Metrics) serve(w http.ResponseWriter, parts []string, picked map[string]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case len(parts) == 1 && parts[0] == "nodes":
		list := &metricsv1beta1.NodeMetricsList{TypeMeta: metav1.TypeMeta{Kind: "NodeMetricsList", APIVersion: metricsv1beta1.SchemeGroupVersion.String()}}
		for _, name := range slices.Sorted(maps.Keys(m.nodes)) {
			if picked == nil || picked[name] {
				list.Items = append(list.Items, withKind(m.nodes[name]))
			}
		}
		writeJSON(w, http.StatusOK, list)
	case len(parts) == 2 && parts[0] == "nodes":
		nm, ok := m.nodes[parts[1]]
		if !ok {
			writeStatus(w, apierrors.NewNotFound(metricsv1beta1.Resource("nodes"), parts[1]))
			return
		}
		writeJSON(w, http.StatusOK, withKind(nm))
	case len(parts) == 1 && parts[0] == "pods":
		m.listPods(w, "", picked)
	case len(parts) == 3 && parts[0] == "namespaces" && parts[2] == "pods":
		m.listPods(w, parts[1], picked)
	case len(parts) == 4 && parts[0] == "namespaces" && parts[2] == "pods":
		pm, ok := m.pods[parts[1]+"/"+parts[3]]
		if !ok {
			writeStatus(w, apierrors.NewNotFound(metricsv1beta1.Resource("pods"), parts[3]))
			return
		}
		writeJSON(w, http.StatusOK, withPodKind(pm))
	default:
		writeStatus(w, apierrors.NewNotFound(metricsv1beta1.Resource(""), strings.Join(parts, "/")))
	}
}

func (m *Metrics) listPods(w http.ResponseWriter, namespace string, picked map[string]bool) {
	list := &metricsv1beta1.PodMetricsList{TypeMeta: metav1.TypeMeta{Kind: "PodMetricsList", APIVersion: metricsv1beta1.SchemeGroupVersion.String()}}
	for _, key := range slices.Sorted(maps.Keys(m.pods)) {
		if pm := m.pods[key]; (picked == nil || picked[key]) && (namespace == "" || pm.Namespace == namespace) {
			list.Items = append(list.Items, withPodKind(pm))
		}
	}
	writeJSON(w, http.StatusOK, list)
}

func withKind(nm metricsv1beta1.NodeMetrics) metricsv1beta1.NodeMetrics {
	nm.TypeMeta = metav1.TypeMeta{Kind: "NodeMetrics", APIVersion: metricsv1beta1.SchemeGroupVersion.String()}
	return nm
}

func withPodKind(pm metricsv1beta1.PodMetrics) metricsv1beta1.PodMetrics {
	pm.TypeMeta = metav1.TypeMeta{Kind: "PodMetrics", APIVersion: metricsv1beta1.SchemeGroupVersion.String()}
	return pm
}

func metricsDiscovery() *metav1.APIResourceList {
	verbs := metav1.Verbs{"get", "list"}
	return &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: metricsv1beta1.SchemeGroupVersion.String(),
		APIResources: []metav1.APIResource{
			{Name: "nodes", SingularName: "", Kind: "NodeMetrics", Verbs: verbs},
			{Name: "pods", SingularName: "", Namespaced: true, Kind: "PodMetrics", Verbs: verbs},
		}}
}

func writeStatus(w http.ResponseWriter, err apierrors.APIStatus) {
	st := err.Status()
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	writeJSON(w, int(st.Code), &st)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
