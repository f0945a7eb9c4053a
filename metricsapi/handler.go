package metricsapi

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// Source gives the metrics served, as measured when a request asks. Its
// methods are called concurrently, once per request.
type Source interface {
	// PodMetrics returns the metrics of every pod measured, in any order.
	PodMetrics(ctx context.Context) ([]metricsv1beta1.PodMetrics, error)
	// NodeMetrics returns the metrics of every node measured, in any order.
	NodeMetrics(ctx context.Context) ([]metricsv1beta1.NodeMetrics, error)
}

// Handler serves metrics.k8s.io/v1beta1 from src: discovery, and get and
// list of nodes and pods (all namespaces or one), sorted by namespace and
// name. A list's label selector picks the pods or nodes of the server (read
// with c) that have the labels, as metrics-server does; metrics of a pod
// that does not exist are listed only without one. Serve puts it behind the
// API server; a program that serves it its own way can use it alone.
func Handler(c kubernetes.Interface, src Source) http.Handler {
	return &handler{client: c, src: src}
}

type handler struct {
	client kubernetes.Interface
	src    Source
}

const prefix = "/apis/metrics.k8s.io/v1beta1"

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeStatus(w, apierrors.NewMethodNotSupported(metricsv1beta1.Resource("pods"), r.Method))
		return
	}
	path := strings.TrimSuffix(r.URL.Path, "/")
	if path == prefix {
		writeJSON(w, http.StatusOK, discovery())
		return
	}
	rest, ok := strings.CutPrefix(path, prefix+"/")
	if !ok {
		writeStatus(w, apierrors.NewNotFound(metricsv1beta1.Resource(""), path))
		return
	}
	parts := strings.Split(rest, "/")
	picked, err := h.picked(r, parts)
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	switch {
	case parts[0] == "nodes" && len(parts) <= 2:
		h.serveNodes(r.Context(), w, parts[1:], picked)
	case len(parts) == 1 && parts[0] == "pods":
		h.servePods(r.Context(), w, "", nil, picked)
	case len(parts) >= 3 && len(parts) <= 4 && parts[0] == "namespaces" && parts[2] == "pods":
		h.servePods(r.Context(), w, parts[1], parts[3:], picked)
	default:
		writeStatus(w, apierrors.NewNotFound(metricsv1beta1.Resource(""), rest))
	}
}

// picked is nil (everything) without a label selector, else the
// namespace/name of the pods (or names of the nodes) it selects.
func (h *handler) picked(r *http.Request, parts []string) (map[string]bool, error) {
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
		nodes, err := h.client.CoreV1().Nodes().List(r.Context(), opts)
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
	pods, err := h.client.CoreV1().Pods(namespace).List(r.Context(), opts)
	if err != nil {
		return nil, err
	}
	for _, p := range pods.Items {
		out[p.Namespace+"/"+p.Name] = true
	}
	return out, nil
}

// serveNodes answers nodes (name empty) and nodes/<name>.
func (h *handler) serveNodes(ctx context.Context, w http.ResponseWriter, name []string, picked map[string]bool) {
	all, err := h.src.NodeMetrics(ctx)
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	list := &metricsv1beta1.NodeMetricsList{TypeMeta: metav1.TypeMeta{Kind: "NodeMetricsList", APIVersion: version}}
	for _, nm := range sortNodes(all) {
		if len(name) == 1 && nm.Name == name[0] {
			nm.TypeMeta = metav1.TypeMeta{Kind: "NodeMetrics", APIVersion: version}
			writeJSON(w, http.StatusOK, &nm)
			return
		}
		if len(name) == 0 && (picked == nil || picked[nm.Name]) {
			nm.TypeMeta = metav1.TypeMeta{Kind: "NodeMetrics", APIVersion: version}
			list.Items = append(list.Items, nm)
		}
	}
	if len(name) == 1 {
		writeStatus(w, apierrors.NewNotFound(metricsv1beta1.Resource("nodes"), name[0]))
		return
	}
	writeJSON(w, http.StatusOK, list)
}

// servePods answers pods of namespace (all if empty) and, with a name, one.
func (h *handler) servePods(ctx context.Context, w http.ResponseWriter, namespace string, name []string, picked map[string]bool) {
	all, err := h.src.PodMetrics(ctx)
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	list := &metricsv1beta1.PodMetricsList{TypeMeta: metav1.TypeMeta{Kind: "PodMetricsList", APIVersion: version}}
	for _, pm := range sortPods(all) {
		if namespace != "" && pm.Namespace != namespace {
			continue
		}
		pm.TypeMeta = metav1.TypeMeta{Kind: "PodMetrics", APIVersion: version}
		if len(name) == 1 && pm.Name == name[0] {
			writeJSON(w, http.StatusOK, &pm)
			return
		}
		if len(name) == 0 && (picked == nil || picked[pm.Namespace+"/"+pm.Name]) {
			list.Items = append(list.Items, pm)
		}
	}
	if len(name) == 1 {
		writeStatus(w, apierrors.NewNotFound(metricsv1beta1.Resource("pods"), name[0]))
		return
	}
	writeJSON(w, http.StatusOK, list)
}

// version is metricsv1beta1.SchemeGroupVersion, as a constant.
const version = "metrics.k8s.io/v1beta1"

// sortNodes sorts by name; the handler answers in a stable order, as
// metrics-server's storage does, so that kubectl top's output is too.
func sortNodes(nodes []metricsv1beta1.NodeMetrics) []metricsv1beta1.NodeMetrics {
	slices.SortFunc(nodes, func(a, b metricsv1beta1.NodeMetrics) int { return strings.Compare(a.Name, b.Name) })
	return nodes
}

// sortPods sorts by namespace, then name.
func sortPods(pods []metricsv1beta1.PodMetrics) []metricsv1beta1.PodMetrics {
	slices.SortFunc(pods, func(a, b metricsv1beta1.PodMetrics) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return pods
}

func discovery() *metav1.APIResourceList {
	verbs := metav1.Verbs{"get", "list"}
	return &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: version,
		APIResources: []metav1.APIResource{
			{Name: "nodes", Kind: "NodeMetrics", Verbs: verbs},
			{Name: "pods", Namespaced: true, Kind: "PodMetrics", Verbs: verbs},
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
