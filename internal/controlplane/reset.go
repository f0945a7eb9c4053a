package controlplane

// What Server.Reset needs beside a storage restore: controllers that
// forget, and waits for the parts of the chain that follow storage through
// informers of their own (the custom resource handlers and discovery, the
// admission plugins).

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"

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

// WaitCRDsServed waits until discovery and /openapi/v3, as admin reads
// them, serve the custom resources of the CRDs now stored (after) in the
// versions they serve, and none that a CRD served since the last reset
// (before, read when the reset began, and what the CRD informer saw, such
// as a CRD a test deleted as it ended) unless after serves it too: after a
// restore, or a test's own deletions, the custom resource handlers,
// discovery and the OpenAPI v3 service follow the CRD informers of
// apiextensions-apiserver and the aggregator, which WaitIdle does not see.
func (cp *ControlPlane) WaitCRDsServed(ctx context.Context, admin *rest.Config, before, after map[string]*apiextensionsv1.CustomResourceDefinition) error {
	want, unwanted := servedResources(after), cp.crdsSeen.reset(servedResources(before))
	maps.DeleteFunc(unwanted, func(r string, _ bool) bool { return want[r] })
	if sameCRDs(before, after) && len(unwanted) == 0 {
		return nil
	}
	disco, err := discovery.NewDiscoveryClientForConfig(admin)
	if err != nil {
		return err
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
		if err := compareServed("discovery", served, want, unwanted); err != nil {
			return err
		}
		return openAPIV3Drops(ctx, disco.RESTClient(), groupVersions(unwanted), groupVersions(want))
	})
}

// compareServed says what of want is not served or of unwanted is.
func compareServed(what string, served, want, unwanted map[string]bool) error {
	for r := range want {
		if !served[r] {
			return fmt.Errorf("%s: %s not served yet", what, r)
		}
	}
	for r := range unwanted {
		if served[r] {
			return fmt.Errorf("%s: %s still served", what, r)
		}
	}
	return nil
}

// openAPIV3Drops waits for the group versions (group/version) of unwanted
// that others do not serve to be gone from /openapi/v3's paths. It does
// not wait for a wanted one to appear: a CRD whose schema the OpenAPI
// builder refuses has none, and a new server's Start does not wait for
// them either.
func openAPIV3Drops(ctx context.Context, c rest.Interface, unwanted, others map[string]bool) error {
	maps.DeleteFunc(unwanted, func(gv string, _ bool) bool { return others[gv] })
	raw, err := c.Get().AbsPath("/openapi/v3").Do(ctx).Raw()
	if err != nil {
		return err
	}
	var root struct {
		Paths map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &root); err != nil {
		return err
	}
	served := map[string]bool{}
	for p := range root.Paths {
		served[strings.TrimPrefix(p, "apis/")] = true
	}
	return compareServed("/openapi/v3", served, nil, unwanted)
}

// groupVersions are the group/version of resources (group/version/plural).
func groupVersions(resources map[string]bool) map[string]bool {
	out := map[string]bool{}
	for r := range resources {
		out[r[:strings.LastIndex(r, "/")]] = true
	}
	return out
}

// seenResources are the resources (group/version/plural) CRDs served, as a
// CRD informer saw them.
type seenResources struct {
	mu   sync.Mutex
	seen map[string]bool
}

func watchServedResources(crds cache.SharedIndexInformer) (*seenResources, error) {
	s := &seenResources{seen: map[string]bool{}}
	add := func(obj any) {
		if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
			s.mu.Lock()
			maps.Copy(s.seen, servedResources(map[string]*apiextensionsv1.CustomResourceDefinition{"": crd}))
			s.mu.Unlock()
		}
	}
	_, err := crds.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, obj any) { add(obj) }})
	return s, err
}

// reset returns what was seen and also, and starts again from nothing.
func (s *seenResources) reset(also map[string]bool) map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.seen
	s.seen = map[string]bool{}
	maps.Copy(out, also)
	return out
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
