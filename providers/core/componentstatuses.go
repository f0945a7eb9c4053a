package core

import (
	"context"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/providers/registry"
)

// componentStatuses is componentstatuses (deprecated since v1.19, still
// served): the health of the cluster's components, checked on each read
// and never stored, as kube-apiserver's componentstatus.REST.
var componentStatuses = registry.Computed{Resource: "componentstatuses", Build: func(cfg providers.Config) rest.Storage {
	return &componentStatusREST{components: cfg.Components, TableConvertor: componentStatusTable}
}}

// componentStatusREST reads the checks of providers.Config.Components.
type componentStatusREST struct {
	components map[string]func(context.Context) error
	rest.TableConvertor
}

var (
	_ rest.Getter               = (*componentStatusREST)(nil)
	_ rest.Lister               = (*componentStatusREST)(nil)
	_ rest.Scoper               = (*componentStatusREST)(nil)
	_ rest.ShortNamesProvider   = (*componentStatusREST)(nil)
	_ rest.SingularNameProvider = (*componentStatusREST)(nil)
)

func (*componentStatusREST) New() runtime.Object     { return &corev1.ComponentStatus{} }
func (*componentStatusREST) NewList() runtime.Object { return &corev1.ComponentStatusList{} }
func (*componentStatusREST) Destroy()                {}
func (*componentStatusREST) NamespaceScoped() bool   { return false }
func (*componentStatusREST) GetSingularName() string { return "componentstatus" }
func (*componentStatusREST) ShortNames() []string    { return []string{"cs"} }

// Get implements rest.Getter; the NotFound names the resource in the
// singular, as kube-apiserver's does.
func (r *componentStatusREST) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	check, ok := r.components[name]
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("componentstatus"), name)
	}
	return componentStatus(ctx, name, check), nil
}

// List implements rest.Lister: every component, by name (kube-apiserver
// lists them in the order its probes finish). The selectors can match
// only metadata.name and metadata.namespace (""), no label.
func (r *componentStatusREST) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	label, field := labels.Everything(), fields.Everything()
	if opts != nil && opts.LabelSelector != nil {
		label = opts.LabelSelector
	}
	if opts != nil && opts.FieldSelector != nil {
		field = opts.FieldSelector
	}
	list := &corev1.ComponentStatusList{Items: []corev1.ComponentStatus{}}
	for _, name := range slices.Sorted(maps.Keys(r.components)) {
		if label.Matches(labels.Set(nil)) && field.Matches(fields.Set{"metadata.name": name, "metadata.namespace": ""}) {
			list.Items = append(list.Items, *componentStatus(ctx, name, r.components[name]))
		}
	}
	return list, nil
}

// componentStatus is the status of a component by its check: one Healthy
// condition, with the message "ok" (what kube-scheduler's,
// kube-controller-manager's /healthz and the etcd probe answer) or the
// error.
func componentStatus(ctx context.Context, name string, check func(context.Context) error) *corev1.ComponentStatus {
	c := corev1.ComponentCondition{Type: corev1.ComponentHealthy, Status: corev1.ConditionTrue, Message: "ok"}
	if err := check(ctx); err != nil {
		c = corev1.ComponentCondition{Type: corev1.ComponentHealthy, Status: corev1.ConditionFalse, Error: err.Error()}
	}
	return &corev1.ComponentStatus{ObjectMeta: metav1.ObjectMeta{Name: name}, Conditions: []corev1.ComponentCondition{c}}
}

// componentStatusTable is kube-apiserver's: no age (nothing is created).
var componentStatusTable = registry.Table(registry.NameColumn(),
	registry.ColumnOf("Status", "string", "Status of the component conditions", 0, func(cs *corev1.ComponentStatus) any {
		status, _, _ := healthyCondition(cs)
		return status
	}),
	registry.ColumnOf("Message", "string", "Message of the component conditions", 0, func(cs *corev1.ComponentStatus) any {
		_, message, _ := healthyCondition(cs)
		return message
	}),
	registry.ColumnOf("Error", "string", "Error of the component conditions", 0, func(cs *corev1.ComponentStatus) any {
		_, _, err := healthyCondition(cs)
		return err
	}),
)

// healthyCondition is the Healthy condition's status as a word, message
// and error; Unknown with neither when there is none.
func healthyCondition(cs *corev1.ComponentStatus) (status, message, err string) {
	for _, c := range cs.Conditions {
		if c.Type != corev1.ComponentHealthy {
			continue
		}
		status = "Unhealthy"
		if c.Status == corev1.ConditionTrue {
			status = "Healthy"
		}
		return status, c.Message, c.Error
	}
	return "Unknown", "", ""
}
