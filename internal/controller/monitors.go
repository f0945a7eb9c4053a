package controller

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/kubeembed/apiserver/controllers"
)

// monitorResync is how often Monitors rediscovers the served resources
// without being told (aggregated APIs come and go without a CRD),
// kube-controller-manager's garbage collector's discovery period.
const monitorResync = 30 * time.Second

// ignored are the resources no controller monitors, as
// kube-controller-manager's garbage collector ignores them.
var ignored = map[schema.GroupResource]bool{
	{Resource: "events"}:                         true,
	{Group: "events.k8s.io", Resource: "events"}: true,
}

// Monitors keep the set of resources that can be listed, watched and
// deleted (preferred versions, from discovery) and a metadata-only informer
// for each, telling subscribers what came and went. Discovery is redone when
// a CRD changes (the informer given) and every 30 s.
//
// Monitors own their informers (a shared informer factory cannot stop one,
// and a removed custom resource must stop being listed): a new resource's
// informer is handed to the subscribers before it starts, so their handlers
// see its whole initial list (WaitIdle relies on it).
type Monitors struct {
	client    metadata.Interface
	discovery discovery.DiscoveryInterface
	crds      cache.SharedIndexInformer
	observer  *Observer
	trigger   chan struct{}

	mu          sync.Mutex
	resources   map[schema.GroupVersionResource]controllers.Resource
	stop        map[schema.GroupVersionResource]context.CancelFunc
	subscribers []func(added, removed []controllers.Resource)
	informers   sync.WaitGroup
	// pending is set from a trigger until a discovery begun after it has
	// served every established CRD; pokes counts the triggers, so that a
	// discovery begun before one does not clear it.
	pending bool
	synced  bool
	pokes   uint64
	missing []schema.GroupResource // established CRDs' not discovered

	// missingSince is when each established CRD's resource was first seen
	// missing from discovery (Run's goroutine only); it is waited for for
	// missingGrace, then no longer.
	missingSince map[schema.GroupResource]*missingCRD
	missingGrace time.Duration
}

type missingCRD struct {
	since  time.Time
	warned bool
}

// NewMonitors returns monitors listing with client, discovering with d and
// rediscovering when crds (a CRD informer) changes.
func NewMonitors(client metadata.Interface, d discovery.DiscoveryInterface, crds cache.SharedIndexInformer, revisions interface{ Latest() uint64 }) (*Monitors, error) {
	m := &Monitors{client: client, discovery: d, crds: crds, observer: NewObserver(revisions),
		trigger: make(chan struct{}, 1), resources: map[schema.GroupVersionResource]controllers.Resource{},
		stop: map[schema.GroupVersionResource]context.CancelFunc{}, missingSince: map[schema.GroupResource]*missingCRD{},
		missingGrace: monitorResync}
	changed := func(any) { m.poke() }
	err := m.observer.Watch(schema.GroupResource{Group: apiextensionsv1.GroupName, Resource: "customresourcedefinitions"}, crds,
		cache.ResourceEventHandlerFuncs{AddFunc: changed, DeleteFunc: changed, UpdateFunc: func(_, o any) { changed(o) }})
	return m, err
}

func (m *Monitors) poke() {
	m.mu.Lock()
	m.pending = true
	m.pokes++
	m.mu.Unlock()
	select {
	case m.trigger <- struct{}{}:
	default:
	}
}

// Subscribe implements controllers.Monitors. f is called with the
// monitors' lock held.
func (m *Monitors) Subscribe(f func(added, removed []controllers.Resource)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.subscribers = append(m.subscribers, f)
	var all []controllers.Resource
	for _, r := range m.resources {
		all = append(all, r)
	}
	if len(all) > 0 {
		f(all, nil)
	}
}

// monitorRetry is how often Monitors rediscover while an established CRD
// is not served yet, after sync's quick tries.
const monitorRetry = time.Second

// Run discovers the resources at once, then again when poked or every 30 s,
// until ctx ends; then it stops the informers and waits for them. While an
// established CRD is missing from discovery it tries again every second,
// and stays pending (not Idle): its custom resources are not monitored.
// It waits so for 30 s at most (missingGrace, the garbage collector's
// rediscovery period): a CRD can stay established and undiscovered, its
// group version taken by an APIService or a built-in group.
func (m *Monitors) Run(ctx context.Context) {
	defer m.informers.Wait()
	m.poke()
	tick := time.NewTicker(monitorResync)
	defer tick.Stop()
	retry := time.NewTimer(monitorRetry)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-m.trigger:
		case <-retry.C:
		}
		missing, err := m.sync(ctx)
		if err != nil {
			klog.FromContext(ctx).V(2).Info("Resource discovery", "err", err, "establishedNotServed", missing)
		}
		if len(missing) > 0 {
			retry.Reset(monitorRetry)
		} else {
			retry.Stop()
		}
	}
}

// sync rediscovers until every established CRD is served, or a few tries;
// it returns the CRDs' resources still missing.
func (m *Monitors) sync(ctx context.Context) ([]schema.GroupResource, error) {
	delay := time.Millisecond
	for try := 0; ; try++ {
		m.mu.Lock()
		pokes := m.pokes
		m.mu.Unlock()
		found, err := m.discover(ctx)
		missing := m.awaited(ctx, m.missingCRDs(found))
		if err == nil && len(missing) == 0 || try == 12 || ctx.Err() != nil {
			m.apply(ctx, found, err == nil, missing, pokes)
			return missing, err
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

func (m *Monitors) discover(ctx context.Context) (map[schema.GroupVersionResource]controllers.Resource, error) {
	lists, err := discovery.ServerPreferredResourcesWithContext(ctx, discovery.ToDiscoveryInterfaceWithContext(m.discovery))
	found := map[schema.GroupVersionResource]controllers.Resource{}
	for _, l := range discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"delete", "list", "watch"}}, lists) {
		gv, perr := schema.ParseGroupVersion(l.GroupVersion)
		if perr != nil {
			continue
		}
		for _, r := range l.APIResources {
			gvr := gv.WithResource(r.Name)
			if !ignored[gvr.GroupResource()] {
				found[gvr] = controllers.Resource{GroupVersionResource: gvr, Kind: r.Kind, Namespaced: r.Namespaced}
			}
		}
	}
	return found, err
}

// missingCRDs are the resources of established CRDs found lacks.
func (m *Monitors) missingCRDs(found map[schema.GroupVersionResource]controllers.Resource) []schema.GroupResource {
	served := map[schema.GroupResource]bool{}
	for gvr := range found {
		served[gvr.GroupResource()] = true
	}
	var missing []schema.GroupResource
	for _, o := range m.crds.GetStore().List() {
		crd, ok := o.(*apiextensionsv1.CustomResourceDefinition)
		if !ok || !established(crd) || crd.DeletionTimestamp != nil {
			continue
		}
		if !slices.ContainsFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Served }) {
			continue // established, and never discovered
		}
		if gr := (schema.GroupResource{Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural}); !served[gr] && !ignored[gr] {
			missing = append(missing, gr)
		}
	}
	return missing
}

// awaited are the missing resources still waited for: those missing for
// less than missingGrace. One missing longer is logged once.
func (m *Monitors) awaited(ctx context.Context, missing []schema.GroupResource) []schema.GroupResource {
	now := time.Now()
	for gr := range m.missingSince {
		if !slices.Contains(missing, gr) {
			delete(m.missingSince, gr)
		}
	}
	var waiting []schema.GroupResource
	for _, gr := range missing {
		c := m.missingSince[gr]
		if c == nil {
			c = &missingCRD{since: now}
			m.missingSince[gr] = c
		}
		switch {
		case now.Sub(c.since) < m.missingGrace:
			waiting = append(waiting, gr)
		case !c.warned:
			c.warned = true
			klog.FromContext(ctx).Info("Established CRD's resource not in discovery; its objects are not monitored until it is",
				"resource", gr, "missingFor", now.Sub(c.since).Round(time.Second))
		}
	}
	return waiting
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return slices.ContainsFunc(crd.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
		return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
	})
}

// apply tells subscribers what changed. After a failed discovery (some
// groups failing) only additions are applied, as the garbage collector
// keeps the monitors of groups it could not reach. The monitors are no
// longer pending if every established CRD was served (none missing) and no
// trigger came since the discovery began (pokes).
func (m *Monitors) apply(ctx context.Context, found map[schema.GroupVersionResource]controllers.Resource, complete bool,
	missing []schema.GroupResource, pokes uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var added, removed []controllers.Resource
	for gvr, r := range found {
		if _, ok := m.resources[gvr]; !ok {
			r.Informer = newListedInformer(m.client, gvr)
			added = append(added, r)
			m.resources[gvr] = r
		}
	}
	for gvr, r := range m.resources {
		if _, ok := found[gvr]; !ok && complete {
			removed = append(removed, r)
			delete(m.resources, gvr)
		}
	}
	if len(added)+len(removed) > 0 {
		for _, f := range m.subscribers {
			f(added, removed)
		}
	}
	for _, r := range removed {
		m.stop[r.GroupVersionResource]()
		delete(m.stop, r.GroupVersionResource)
	}
	for _, r := range added {
		ictx, cancel := context.WithCancel(ctx)
		m.stop[r.GroupVersionResource] = cancel
		m.informers.Go(func() { r.Informer.RunWithContext(ictx) })
	}
	m.synced, m.missing = true, missing
	if len(missing) == 0 && pokes == m.pokes {
		m.pending = false
	}
}

// Idle returns nil once the monitors have seen every write to CRDs and
// applied the discovery that followed.
func (m *Monitors) Idle(written map[schema.GroupResource]uint64) error {
	if err := m.observer.CaughtUp(written); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.missing) > 0 {
		return fmt.Errorf("resource monitors: established CRDs' resources not discovered yet: %v", m.missing)
	}
	if m.pending || !m.synced {
		return fmt.Errorf("resource monitors: discovering")
	}
	return nil
}

// Finished is 0: the monitors' work is seen through their subscribers.
func (m *Monitors) Finished() uint64 { return 0 }

// listedInformer is a metadata-only informer that tells the resourceVersion
// of its lists: the first (its handlers' initial list covers every write
// before it, deletions included, which no event will show them) and the
// last, with a digest of what it listed (a relist, after a watch that could
// not resume, covers the writes since the watch ended: an object created
// and deleted in between is never shown to a handler, which has caught up
// once its view is the list's).
type listedInformer struct {
	*directInformer
	first atomic.Uint64

	mu         sync.Mutex
	last, view uint64
}

func newListedInformer(client metadata.Interface, gvr schema.GroupVersionResource) *listedInformer {
	i := &listedInformer{}
	resource := client.Resource(gvr)
	i.directInformer = newDirectInformer(listOnly{&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list, err := resource.List(ctx, opts)
			if err == nil {
				i.listed(list)
			}
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return resource.Watch(ctx, opts)
		},
	}}, &metav1.PartialObjectMetadata{}, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = i.SetWatchErrorHandlerWithContext(quietOnStop)
	return i
}

// quietOnStop is client-go's watch error handler, except for a watch that
// ended because its informer stopped: client-go logs its "context
// canceled" as an error, one per resource at every server's Close.
func quietOnStop(ctx context.Context, r *cache.Reflector, err error) {
	if ctx.Err() != nil {
		return
	}
	cache.DefaultWatchErrorHandler(ctx, r, err)
}

// listOnly makes the reflector list (not stream the initial list through a
// watch, client-go's WatchListClient), so that the list's resourceVersion
// is known.
type listOnly struct{ *cache.ListWatch }

func (listOnly) IsWatchListSemanticsUnSupported() bool { return true }

func (i *listedInformer) listed(list *metav1.PartialObjectMetadataList) {
	rv, _ := strconv.ParseUint(list.ResourceVersion, 10, 64)
	var view uint64
	for j := range list.Items {
		view ^= digest(&list.Items[j])
	}
	i.first.CompareAndSwap(0, rv)
	i.mu.Lock()
	i.last, i.view = rv, view
	i.mu.Unlock()
}

// Listed implements listed, for Observer.
func (i *listedInformer) Listed() (first, last uint64) {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.first.Load(), i.last
}

// LastList implements listed, for Observer.
func (i *listedInformer) LastList() (rv, view uint64) {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.last, i.view
}
