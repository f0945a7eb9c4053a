package disruption

// The pods a budget expects: the scale of the covered pods' controllers.

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// found is a controller's identity and scale.
type found struct {
	uid   types.UID
	scale int32
}

// finder looks a pod's controller up; nil when it is not of its kind or
// not there.
type finder func(ctx context.Context, ref *metav1.OwnerReference, ns string) (*found, error)

// expectedScale sums the scale of the controllers of pods (each once); it
// also returns the pods with none.
func (c *Controller) expectedScale(ctx context.Context, pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod) (int32, []string, error) {
	scales := map[types.UID]int32{}
	var unmanaged []string
	finders := []finder{c.replicationController, c.deployment, c.replicaSet, c.statefulSet, c.scalable}
	for _, p := range pods {
		ref := metav1.GetControllerOf(p)
		if ref == nil {
			unmanaged = append(unmanaged, p.Name)
			continue
		}
		if _, ok := scales[ref.UID]; ok {
			continue
		}
		var f *found
		for _, find := range finders {
			var err error
			if f, err = find(ctx, ref, p.Namespace); err != nil {
				return 0, nil, err
			}
			if f != nil {
				break
			}
		}
		if f == nil {
			return 0, nil, fmt.Errorf("found no controllers for pod %q", p.Name)
		}
		scales[f.uid] = f.scale
	}
	var sum int32
	for _, s := range scales {
		sum += s
	}
	return sum, unmanaged, nil
}

// is reports whether ref is of kind in one of groups; an apiVersion that
// does not parse is an error.
func is(ref *metav1.OwnerReference, kind string, groups ...string) (bool, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false, err
	}
	if ref.Kind != kind {
		return false, nil
	}
	for _, g := range groups {
		if gv.Group == g {
			return true, nil
		}
	}
	return false, nil
}

func (c *Controller) replicationController(_ context.Context, ref *metav1.OwnerReference, ns string) (*found, error) {
	if ok, err := is(ref, "ReplicationController", ""); !ok || err != nil {
		return nil, err
	}
	rc, err := c.rcs.ReplicationControllers(ns).Get(ref.Name)
	if err != nil || rc.UID != ref.UID {
		return nil, nil
	}
	return &found{rc.UID, *rc.Spec.Replicas}, nil
}

func (c *Controller) deployment(_ context.Context, ref *metav1.OwnerReference, ns string) (*found, error) {
	if ok, err := is(ref, "ReplicaSet", "apps", "extensions"); !ok || err != nil {
		return nil, err
	}
	rs, err := c.replicaSets.ReplicaSets(ns).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return nil, nil
	}
	owner := metav1.GetControllerOf(rs)
	if owner == nil {
		return nil, nil
	}
	if ok, err := is(owner, "Deployment", "apps", "extensions"); !ok || err != nil {
		return nil, err
	}
	d, err := c.deployments.Deployments(rs.Namespace).Get(owner.Name)
	if err != nil || d.UID != owner.UID {
		return nil, nil
	}
	return &found{d.UID, *d.Spec.Replicas}, nil
}

func (c *Controller) replicaSet(_ context.Context, ref *metav1.OwnerReference, ns string) (*found, error) {
	if ok, err := is(ref, "ReplicaSet", "apps", "extensions"); !ok || err != nil {
		return nil, err
	}
	rs, err := c.replicaSets.ReplicaSets(ns).Get(ref.Name)
	if err != nil || rs.UID != ref.UID {
		return nil, nil
	}
	if owner := metav1.GetControllerOf(rs); owner != nil && owner.Kind == "Deployment" {
		return nil, nil
	}
	return &found{rs.UID, *rs.Spec.Replicas}, nil
}

func (c *Controller) statefulSet(_ context.Context, ref *metav1.OwnerReference, ns string) (*found, error) {
	if ok, err := is(ref, "StatefulSet", "apps"); !ok || err != nil {
		return nil, err
	}
	ss, err := c.statefulSets.StatefulSets(ns).Get(ref.Name)
	if err != nil || ss.UID != ref.UID {
		return nil, nil
	}
	return &found{ss.UID, *ss.Spec.Replicas}, nil
}

// scalable reads any other controller's /scale, live; a 404 is an error
// unless its resource has a scale subresource at all.
func (c *Controller) scalable(ctx context.Context, ref *metav1.OwnerReference, ns string) (*found, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, err
	}
	if c.scales == nil {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err // closing: a discovery refresh now fails and logs an error
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
	// Not cancelled with ctx: a discovery refresh cut off mid-way (Close
	// during it) is logged by client-go's memory cache as an error.
	lookup := context.WithoutCancel(ctx)
	mapping, err := c.mapper.RESTMappingWithContext(lookup, gk, gv.Version)
	if meta.IsNoMatchError(err) {
		// A kind served since discovery was cached (a new CRD); upstream
		// resets its mapper every 30 s.
		c.mapper.Reset()
		mapping, err = c.mapper.RESTMappingWithContext(lookup, gk, gv.Version)
	}
	if err != nil {
		return nil, err
	}
	gr := mapping.Resource.GroupResource()
	s, err := c.scales.Scales(ns).Get(ctx, gr, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if err := c.implementsScale(mapping.Resource); err != nil {
			return nil, err
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if s.UID != ref.UID {
		return nil, nil
	}
	return &found{s.UID, s.Spec.Replicas}, nil
}

var scaleVersions = map[schema.GroupVersion]bool{{Group: "autoscaling", Version: "v1"}: true, {Group: "extensions", Version: "v1beta1"}: true,
	{Group: "apps", Version: "v1beta1"}: true, {Group: "apps", Version: "v1beta2"}: true}

// implementsScale reports, as an error, a resource with no /scale.
func (c *Controller) implementsScale(gvr schema.GroupVersionResource) error {
	list, err := c.discovery.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if err != nil {
		return err
	}
	for _, r := range list.APIResources {
		if r.Name == gvr.Resource+"/scale" && r.Kind == "Scale" && scaleVersions[schema.GroupVersion{Group: r.Group, Version: r.Version}] {
			return nil
		}
	}
	return fmt.Errorf("%s does not implement the scale subresource", gvr.GroupResource().String())
}
