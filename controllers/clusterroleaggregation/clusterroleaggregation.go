// Package clusterroleaggregation is the ClusterRole aggregation controller,
// as kube-controller-manager runs it: a ClusterRole with an aggregationRule
// gets the rules of every other ClusterRole its selectors match (in name
// order, each rule once), written by server-side apply with the field
// manager clusterrole-aggregation-controller, and kept so as those roles
// come, change and go. That is how admin, edit and view get their rules,
// and a CRD's roles labelled rbac.authorization.k8s.io/aggregate-to-view
// join them.
package clusterroleaggregation

import (
	"context"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/kubernetes"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controller"
)

// FieldManager is the aggregated rules' manager, as upstream names it.
const FieldManager = "clusterrole-aggregation-controller"

// Controller is the ClusterRole aggregation controller.
type Controller struct {
	controller.Parts
	client kubernetes.Interface
	roles  rbaclisters.ClusterRoleLister
	queue  *controller.Queue
	ready  <-chan struct{}
}

// New returns the controller of cfg's server.
func New(cfg controllers.Config) (*Controller, error) {
	informer := cfg.Informers.Rbac().V1().ClusterRoles()
	c := &Controller{client: cfg.Client, roles: informer.Lister(), ready: cfg.Ready,
		queue: controller.NewQueue("ClusterRoleAggregator", cfg.QueueMetrics)}
	c.Name, c.Observer, c.Queues = string(controllers.ClusterRoleAggregation), controller.NewObserver(cfg.Revisions), []*controller.Queue{c.queue}
	// Any change may change what an aggregated role selects.
	err := c.Observer.Watch(rbacv1.Resource("clusterroles"), informer.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.enqueueAggregated() },
		UpdateFunc: func(any, any) { c.enqueueAggregated() },
		DeleteFunc: func(any) { c.enqueueAggregated() },
	})
	return c, err
}

// Run aggregates until ctx ends, from when the server is ready: before, the
// bootstrap policy's roles arrive one by one, and each would redo (and
// re-apply) admin, edit and view.
func (c *Controller) Run(ctx context.Context) {
	defer c.ShutDown() // also when ctx ends before the server is ready
	select {
	case <-ctx.Done():
		return
	case <-c.ready:
	}
	c.queue.Run(ctx, 5, c.sync)
}

// Idle implements controllers.Controller. Before the server is ready the
// controller has not started (Run): nothing is pending, and the
// authorizer, which asks whether roles written are aggregated yet, need
// not wait.
func (c *Controller) Idle(written map[schema.GroupResource]uint64) error {
	select {
	case <-c.ready:
		return c.Parts.Idle(written)
	default:
		return nil
	}
}

func (c *Controller) enqueueAggregated() {
	all, _ := c.roles.List(labels.Everything())
	for _, r := range all {
		if r.AggregationRule != nil {
			c.queue.Add(r.Name)
		}
	}
}

func (c *Controller) sync(ctx context.Context, name string) error {
	role, err := c.roles.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || role.AggregationRule == nil {
		return err
	}
	rules := []rbacv1.PolicyRule{}
	for _, s := range role.AggregationRule.ClusterRoleSelectors {
		selector, err := metav1.LabelSelectorAsSelector(&s)
		if err != nil {
			return err
		}
		matched, err := c.roles.List(selector)
		if err != nil {
			return err
		}
		slices.SortFunc(matched, func(a, b *rbacv1.ClusterRole) int { return strings.Compare(a.Name, b.Name) })
		for _, m := range matched {
			if m.Name == role.Name {
				continue
			}
			for _, r := range m.Rules {
				if !slices.ContainsFunc(rules, func(have rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(have, r) }) {
					rules = append(rules, r)
				}
			}
		}
	}
	if equality.Semantic.DeepEqual(rules, role.Rules) {
		return nil
	}
	return c.apply(ctx, role.Name, rules)
}

func (c *Controller) apply(ctx context.Context, name string, rules []rbacv1.PolicyRule) error {
	ac := rbacv1ac.ClusterRole(name)
	for _, r := range rules {
		ac.WithRules(rbacv1ac.PolicyRule().WithVerbs(r.Verbs...).WithAPIGroups(r.APIGroups...).WithResources(r.Resources...).
			WithResourceNames(r.ResourceNames...).WithNonResourceURLs(r.NonResourceURLs...))
	}
	if len(rules) == 0 {
		ac.Rules = []rbacv1ac.PolicyRuleApplyConfiguration{}
	}
	_, err := c.client.RbacV1().ClusterRoles().Apply(ctx, ac, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	return err
}
