package admission

import (
	"context"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/admission"
	resourcequotaapi "k8s.io/apiserver/pkg/admission/plugin/resourcequota/apis/resourcequota"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// WhereQuotas runs the ResourceQuota plugin for the requests of namespaces
// that have a ResourceQuota. The plugin hands each create and update of a
// namespaced object to one of its workers and waits for it, even where no
// quota is defined; the worker then finds none and admits (its answer when
// its configuration limits no resource by default, as kubeembed's). Where
// the lister holds every write and lists no quota in the request's
// namespace, that answer is known without the hand-off: two goroutine
// switches and a wake-up, ~9% of the CPU of a ConfigMap's create in
// process (BenchmarkClientCreate's profile). Otherwise the plugin decides,
// reading quotas as it always does.
//
// config is the plugin's configuration: with resources whose use it limits
// by default (LimitedResources), a namespace without quota is refused them,
// and the plugin is returned as it is.
func WhereQuotas(plugin admission.ValidationInterface, config *resourcequotaapi.Configuration, quotas Fresh[corev1listers.ResourceQuotaLister]) admission.ValidationInterface {
	if config != nil && len(config.LimitedResources) > 0 {
		return plugin
	}
	return &whereQuotas{plugin: plugin, quotas: quotas}
}

type whereQuotas struct {
	plugin admission.ValidationInterface
	quotas Fresh[corev1listers.ResourceQuotaLister]
}

// Handles implements admission.Interface.
func (w *whereQuotas) Handles(op admission.Operation) bool { return w.plugin.Handles(op) }

// Validate implements admission.ValidationInterface.
func (w *whereQuotas) Validate(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	if ns := a.GetNamespace(); ns != "" {
		if lister, ok := w.quotas.get(); ok {
			if qs, err := lister.ResourceQuotas(ns).List(labels.Everything()); err == nil && len(qs) == 0 {
				return nil
			}
		}
	}
	return w.plugin.Validate(ctx, a, o)
}
