package controlplane

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	discoveryaggregated "k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/tools/cache"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationhelper "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	aggregatorapiserver "k8s.io/kube-aggregator/pkg/apiserver"
	apiregistrationclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	"k8s.io/kube-aggregator/pkg/controllers/autoregister"
)

// groupPriorities are kube-apiserver's discovery priorities of the built-in
// group versions: clients such as kubectl prefer higher groups when a
// resource name is ambiguous.
var groupPriorities = map[schema.GroupVersion]struct{ group, version int32 }{
	{Group: "", Version: "v1"}:                                  {18000, 1},
	{Group: "apps", Version: "v1"}:                              {17800, 15},
	{Group: "events.k8s.io", Version: "v1"}:                     {17750, 15},
	{Group: "authentication.k8s.io", Version: "v1"}:             {17700, 15},
	{Group: "authorization.k8s.io", Version: "v1"}:              {17600, 15},
	{Group: "autoscaling", Version: "v1"}:                       {17500, 15},
	{Group: "autoscaling", Version: "v2"}:                       {17500, 30},
	{Group: "batch", Version: "v1"}:                             {17400, 15},
	{Group: "certificates.k8s.io", Version: "v1"}:               {17300, 15},
	{Group: "networking.k8s.io", Version: "v1"}:                 {17200, 15},
	{Group: "policy", Version: "v1"}:                            {17100, 15},
	{Group: "rbac.authorization.k8s.io", Version: "v1"}:         {17000, 15},
	{Group: "storage.k8s.io", Version: "v1"}:                    {16800, 15},
	{Group: "apiextensions.k8s.io", Version: "v1"}:              {16700, 15},
	{Group: "admissionregistration.k8s.io", Version: "v1"}:      {16700, 15},
	{Group: "scheduling.k8s.io", Version: "v1"}:                 {16600, 15},
	{Group: "coordination.k8s.io", Version: "v1"}:               {16500, 15},
	{Group: "node.k8s.io", Version: "v1"}:                       {16300, 15},
	{Group: "discovery.k8s.io", Version: "v1"}:                  {16200, 15},
	{Group: "flowcontrol.apiserver.k8s.io", Version: "v1"}:      {16100, 21},
	{Group: "resource.k8s.io", Version: "v1"}:                   {16200, 21},
	{Group: "internal.apiserver.k8s.io", Version: "v1alpha1"}:   {16000, 9},
	{Group: "storagemigration.k8s.io", Version: "v1"}:           {15800, 15},
	{Group: "storagemigration.k8s.io", Version: "v1beta1"}:      {15800, 9},
	{Group: "admissionregistration.k8s.io", Version: "v1beta1"}: {16700, 12},
}

// newDiscoveryManager returns the aggregated discovery (/apis) the tiers
// share, listing groups in kube-apiserver's priority order.
func newDiscoveryManager() discoveryaggregated.ResourceManager {
	m := discoveryaggregated.NewResourceManager("apis")
	for gv, p := range groupPriorities {
		m.SetGroupVersionPriority(metav1.GroupVersion{Group: gv.Group, Version: gv.Version}, int(p.group), int(p.version))
	}
	return m
}

// Priorities of group versions not in the table (user providers) and of
// custom resources, as kube-apiserver gives CRDs.
const (
	defaultGroupPriority   = 1000
	defaultVersionPriority = 100
)

// apiServiceName is "<version>.<group>"; the core group's is "v1.".
func apiServiceName(gv schema.GroupVersion) string {
	return gv.Version + "." + gv.Group
}

func localAPIService(gv schema.GroupVersion) *apiregistrationv1.APIService {
	p, ok := groupPriorities[gv]
	if !ok {
		p.group, p.version = defaultGroupPriority, defaultVersionPriority
	}
	return &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: apiServiceName(gv)},
		Spec: apiregistrationv1.APIServiceSpec{
			Group: gv.Group, Version: gv.Version,
			GroupPriorityMinimum: p.group, VersionPriority: p.version,
		},
	}
}

// registerAPIServices wires what kube-apiserver's autoregistration does: an
// APIService for every group version the delegates serve, and one for every
// served version of every CRD, kept in sync as CRDs come and go. The
// aggregator serves discovery from these APIServices.
func registerAPIServices(agg *aggregatorapiserver.APIAggregator, delegate *genericapiserver.GenericAPIServer,
	crdInformer cache.SharedIndexInformer) error {
	client, err := apiregistrationclient.NewForConfig(agg.GenericAPIServer.LoopbackClientConfig)
	if err != nil {
		return err
	}
	apiServices := agg.APIRegistrationInformers.Apiregistration().V1().APIServices()
	auto := autoregister.NewAutoRegisterController(apiServices, client.ApiregistrationV1())

	var builtin []string
	for _, p := range delegate.ListedPaths() {
		gv, ok := groupVersionOfPath(p)
		if !ok {
			continue
		}
		svc := localAPIService(gv)
		auto.AddAPIServiceToSyncOnStart(svc)
		builtin = append(builtin, svc.Name)
	}
	sort.Strings(builtin)

	crds := newCRDRegistration(crdInformer, auto)
	if err := addPostStartHook(agg.GenericAPIServer, "kube-apiserver-autoregistration", func(ctx genericapiserver.PostStartHookContext) error {
		go func() {
			// CRD APIServices must be known before the first sync, or the
			// autoregister controller would delete the ones that exist.
			if crds.waitForInitialSync(ctx) {
				auto.Run(2, ctx.Done())
			}
		}()
		return nil
	}); err != nil {
		return err
	}
	// Of all three listings, as kube-apiserver adds it (a boot sequence
	// check: /livez passes it until its grace period, which is 0 here).
	return agg.GenericAPIServer.AddBootSequenceHealthChecks(healthz.NamedCheck("autoregister-completion", func(*http.Request) error {
		var missing []string
		for _, name := range builtin {
			svc, err := apiServices.Lister().Get(name)
			if err != nil || !apiregistrationhelper.IsAPIServiceConditionTrue(svc, apiregistrationv1.Available) {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("missing APIService: %v", missing)
		}
		return nil
	}))
}

// groupVersionOfPath parses /api/v1 and /apis/<group>/<version>.
func groupVersionOfPath(p string) (schema.GroupVersion, bool) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	switch {
	case len(parts) == 2 && parts[0] == "api":
		return schema.GroupVersion{Version: parts[1]}, true
	case len(parts) == 3 && parts[0] == "apis":
		return schema.GroupVersion{Group: parts[1], Version: parts[2]}, true
	}
	return schema.GroupVersion{}, false
}

// crdRegistration keeps an APIService for every group version some CRD
// serves: kube-apiserver's CRD registration controller's job.
type crdRegistration struct {
	informer cache.SharedIndexInformer
	auto     autoregister.AutoAPIServiceRegistration

	mu         sync.Mutex
	registered map[string]bool
}

func newCRDRegistration(informer cache.SharedIndexInformer, auto autoregister.AutoAPIServiceRegistration) *crdRegistration {
	c := &crdRegistration{informer: informer, auto: auto, registered: map[string]bool{}}
	sync := func(any) { c.sync() }
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    sync,
		UpdateFunc: func(_, _ any) { c.sync() },
		DeleteFunc: sync,
	})
	return c
}

// waitForInitialSync waits for the CRD informer and registers what it holds.
func (c *crdRegistration) waitForInitialSync(ctx context.Context) bool {
	if waitSynced(ctx, c.informer.HasSynced) != nil {
		return false
	}
	c.sync()
	return true
}

// sync registers the group versions CRDs serve now and unregisters the rest.
// It is cheap: a server has few CRDs.
func (c *crdRegistration) sync() {
	want := map[string]schema.GroupVersion{}
	for _, obj := range c.informer.GetStore().List() {
		crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
		if !ok {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Served {
				gv := schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}
				want[apiServiceName(gv)] = gv
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, gv := range want {
		if _, builtin := groupPriorities[gv]; builtin {
			continue
		}
		c.auto.AddAPIServiceToSync(localAPIService(gv))
		c.registered[name] = true
	}
	for name := range c.registered {
		if _, ok := want[name]; !ok {
			c.auto.RemoveAPIServiceToSync(name)
			delete(c.registered, name)
		}
	}
}
