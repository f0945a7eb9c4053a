package resourcequota

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeembed/apiserver/controllers"
	kubequota "github.com/kubeembed/apiserver/internal/quota"
)

// resourcesChanged counts the namespaced resources served, with an object
// count evaluator for those without an evaluator of their own
// (count/<resource>.<group>), and stops counting those gone.
func (c *Controller) resourcesChanged(added, removed []controllers.Resource) {
	defer c.subscribed.Store(true)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range removed {
		gr := r.GroupResource()
		if e, ok := c.counted[gr]; ok {
			c.Observer.Unwatch(gr)
			c.registry.Remove(e)
			delete(c.counted, gr)
			delete(c.listers, gr)
		}
	}
	for _, r := range added {
		gr := r.GroupResource()
		if _, ignored := c.ignored[gr]; ignored || !r.Namespaced || c.Observer.Watching(gr) {
			continue
		}
		c.listers[gr] = cache.NewGenericLister(r.Informer.GetIndexer(), gr)
		if c.registry.Get(gr) == nil {
			e := generic.NewObjectCountEvaluator(gr, generic.ListResourceUsingListerFunc(c.lister, r.GroupVersionResource), "")
			c.registry.Add(e)
			c.counted[gr] = e
		}
		_ = c.Observer.Watch(gr, r.Informer, c.replenisher(gr))
	}
}

// lister is the evaluators' lister of a resource (any version: the
// informers hold one).
func (c *Controller) lister(gvr schema.GroupVersionResource) (cache.GenericLister, error) {
	l, ok := c.listers[gvr.GroupResource()]
	if !ok {
		return nil, fmt.Errorf("%v is not counted", gvr)
	}
	return l, nil
}

// replenisher queues the quotas of an object's namespace that count its
// resource when it is deleted, or changed in a way that changes what it
// uses.
func (c *Controller) replenisher(gr schema.GroupResource) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur any) {
			if kubequota.UsageChanged(gr, old, cur) {
				c.replenish(gr, cur)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			c.replenish(gr, obj)
		},
	}
}

func (c *Controller) replenish(gr schema.GroupResource, obj any) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	e := c.registry.Get(gr)
	if e == nil {
		return
	}
	quotas, _ := c.quotas.ResourceQuotas(m.GetNamespace()).List(labels.Everything())
	for _, q := range quotas {
		if len(e.MatchingResources(quota.ResourceNames(q.Status.Hard))) > 0 {
			c.primary.Add(key(q))
		}
	}
}
