package controlplane

// What Server.Reset needs beside a storage restore: controllers that
// forget, and waits for the parts of the chain that follow storage through
// informers of their own (the custom resource handlers and discovery, the
// admission plugins).

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeembed/apiserver/internal/retry"
)

// ResetControllers makes each running controller that keeps state beside
// its informers' caches (the kubelet's nodes and rules, event correlation)
// forget it.
func (cp *ControlPlane) ResetControllers() {
	for _, r := range cp.controllers.running {
		if c, ok := r.Controller.(interface{ Reset() }); ok {
			c.Reset()
		}
	}
}

// CRDs are the CustomResourceDefinitions stored now, by name, read through
// admin.
func CRDs(ctx context.Context, admin *rest.Config) (map[string]*apiextensionsv1.CustomResourceDefinition, error) {
	client, err := apiextensionsclient.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	list, err := client.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make(map[string]*apiextensionsv1.CustomResourceDefinition, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

// WaitCRDsServed waits until discovery, as admin reads it, serves the
// resources of the CRDs now stored (after) in the versions they serve, and
// none that only before served: after a restore that changed CRDs, the
// custom resource handlers and discovery follow the CRD informers of
// apiextensions-apiserver and the aggregator, which WaitIdle does not see.
func WaitCRDsServed(ctx context.Context, admin *rest.Config, before, after map[string]*apiextensionsv1.CustomResourceDefinition) error {
	if sameCRDs(before, after) {
		return nil
	}
	disco, err := discovery.NewDiscoveryClientForConfig(admin)
	if err != nil {
		return err
	}
	want, unwanted := servedResources(after), map[string]bool{}
	for r := range servedResources(before) {
		if !want[r] {
			unwanted[r] = true
		}
	}
	return retry.Until(ctx, func(ctx context.Context) error {
		_, lists, err := disco.ServerGroupsAndResources()
		if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
			return err
		}
		served := map[string]bool{}
		for _, l := range lists {
			for _, r := range l.APIResources {
				served[l.GroupVersion+"/"+r.Name] = true
			}
		}
		for r := range want {
			if !served[r] {
				return fmt.Errorf("%s not served yet", r)
			}
		}
		for r := range unwanted {
			if served[r] {
				return fmt.Errorf("%s still served", r)
			}
		}
		return nil
	})
}

func sameCRDs(a, b map[string]*apiextensionsv1.CustomResourceDefinition) bool {
	return maps.EqualFunc(a, b, func(x, y *apiextensionsv1.CustomResourceDefinition) bool {
		return x.ResourceVersion == y.ResourceVersion
	})
}

// servedResources are group/version/plural of each version crds serve.
func servedResources(crds map[string]*apiextensionsv1.CustomResourceDefinition) map[string]bool {
	out := map[string]bool{}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if v.Served {
				gv := schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}
				out[gv.String()+"/"+crd.Spec.Names.Plural] = true
			}
		}
	}
	return out
}

// WaitAdmissionCaughtUp waits until the informers that admission reads
// (webhook configurations and admission policies, namespaces for namespace
// lifecycle, quotas) have seen every write to their resources so far: a
// webhook or namespace of an earlier test must not admit or refuse a
// request after Server.Reset. Informers not started (no policy yet) are
// skipped.
func (cp *ControlPlane) WaitAdmissionCaughtUp(ctx context.Context) error {
	v1 := cp.informers.kube.Admissionregistration().V1()
	core := cp.informers.kube.Core().V1()
	informers := map[schema.GroupResource]cache.SharedIndexInformer{
		{Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations"}:   v1.MutatingWebhookConfigurations().Informer(),
		{Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"}: v1.ValidatingWebhookConfigurations().Informer(),
		{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies"}:     v1.ValidatingAdmissionPolicies().Informer(),
		{Group: "admissionregistration.k8s.io", Resource: "mutatingadmissionpolicies"}:       v1.MutatingAdmissionPolicies().Informer(),
		{Resource: "namespaces"}:     core.Namespaces().Informer(),
		{Resource: "resourcequotas"}: core.ResourceQuotas().Informer(),
	}
	written := cp.writes.Snapshot()
	return retry.Until(ctx, func(context.Context) error {
		for gr, inf := range informers {
			if !inf.HasSynced() {
				continue
			}
			seen, _ := strconv.ParseUint(inf.LastSyncResourceVersion(), 10, 64)
			if seen < written[gr] {
				return fmt.Errorf("admission's %v informer at resourceVersion %d of %d", gr, seen, written[gr])
			}
		}
		return nil
	})
}
