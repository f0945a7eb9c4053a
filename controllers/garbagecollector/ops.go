package garbagecollector

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/util/retry"
)

// client is the metadata client of id's resource, in its namespace.
func (gc *GarbageCollector) client(ctx context.Context, id identity) (metadata.ResourceInterface, error) {
	m, err := gc.mapping(ctx, id)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		return gc.metadata.Resource(m.Resource), nil
	}
	if id.Namespace == "" {
		return nil, errClusterScopedWithNamespacedOwner
	}
	return gc.metadata.Resource(m.Resource).Namespace(id.Namespace), nil
}

func (gc *GarbageCollector) namespaced(ctx context.Context, id identity) (bool, error) {
	m, err := gc.mapping(ctx, id)
	if err != nil {
		return false, err
	}
	return m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// mapping is the resource of id's kind. Discovery, when the mapper asks
// for it, is asked with ctx: without it, a discovery request made as the
// server closed was retried by client-go for 10 s and held Close (seen on
// etcd once the simulated nodes owned Leases).
func (gc *GarbageCollector) mapping(ctx context.Context, id identity) (*meta.RESTMapping, error) {
	gv, err := schema.ParseGroupVersion(id.APIVersion)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err // closing: a discovery refresh now fails and logs an error
	}
	// Not cancelled with ctx: a discovery refresh cut off mid-way (Close
	// during it) is logged by client-go's memory cache as an error; the
	// server finishes its own requests at Close.
	return gc.mapper.RESTMappingWithContext(context.WithoutCancel(ctx), gv.WithKind(id.Kind).GroupKind(), gv.Version)
}

func (gc *GarbageCollector) get(ctx context.Context, id identity) (*metav1.PartialObjectMetadata, error) {
	c, err := gc.client(ctx, id)
	if err != nil {
		return nil, err
	}
	return c.Get(ctx, id.Name, metav1.GetOptions{})
}

// deleteObject deletes id with policy, on the condition that it is still
// the object latest was (its UID, and its resourceVersion unless only
// other fields than its owner references changed since).
func (gc *GarbageCollector) deleteObject(ctx context.Context, id identity, latest *metav1.PartialObjectMetadata, policy metav1.DeletionPropagation) error {
	c, err := gc.client(ctx, id)
	if err != nil {
		return err
	}
	uid, rv := id.UID, latest.ResourceVersion
	err = c.Delete(ctx, id.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}, PropagationPolicy: &policy})
	if apierrors.IsConflict(err) {
		live, lerr := c.Get(ctx, id.Name, metav1.GetOptions{})
		if lerr == nil && live.UID == uid && reflect.DeepEqual(live.OwnerReferences, latest.OwnerReferences) {
			err = c.Delete(ctx, id.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &policy})
		}
	}
	if apierrors.IsNotFound(err) {
		gc.apply(gc.removed(id, true))
		return nil
	}
	return err
}

// metaPatch is a JSON merge patch of metadata, conditional on the object's
// UID and resourceVersion.
type metaPatch struct {
	Metadata struct {
		UID             types.UID                `json:"uid"`
		ResourceVersion string                   `json:"resourceVersion"`
		OwnerReferences *[]metav1.OwnerReference `json:"ownerReferences,omitempty"`
		Finalizers      *[]string                `json:"finalizers,omitempty"`
	} `json:"metadata"`
}

// patch changes id's metadata with edit, retrying on conflicts; edit
// returns false when there is nothing to change.
func (gc *GarbageCollector) patch(ctx context.Context, id identity, edit func(*metav1.PartialObjectMetadata, *metaPatch) bool) error {
	c, err := gc.client(ctx, id)
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		live, err := c.Get(ctx, id.Name, metav1.GetOptions{})
		if err != nil || live.UID != id.UID {
			return err
		}
		var p metaPatch
		p.Metadata.UID, p.Metadata.ResourceVersion = live.UID, live.ResourceVersion
		if !edit(live, &p) {
			return nil
		}
		data, err := json.Marshal(p)
		if err != nil {
			return err
		}
		_, err = c.Patch(ctx, id.Name, types.MergePatchType, data, metav1.PatchOptions{})
		return err
	})
}

// removeOwnerRefs removes id's references to the owners given.
func (gc *GarbageCollector) removeOwnerRefs(ctx context.Context, id identity, owners []types.UID) error {
	return gc.patch(ctx, id, func(live *metav1.PartialObjectMetadata, p *metaPatch) bool {
		refs := slices.DeleteFunc(slices.Clone(live.OwnerReferences), func(r metav1.OwnerReference) bool { return slices.Contains(owners, r.UID) })
		if len(refs) == len(live.OwnerReferences) {
			return false
		}
		if refs == nil {
			refs = []metav1.OwnerReference{}
		}
		p.Metadata.OwnerReferences = &refs
		return true
	})
}

// unblockOwners stops id's references from blocking their owners' deletion.
func (gc *GarbageCollector) unblockOwners(ctx context.Context, id identity) error {
	return gc.patch(ctx, id, func(live *metav1.PartialObjectMetadata, p *metaPatch) bool {
		refs, changed := slices.Clone(live.OwnerReferences), false
		for i := range refs {
			if isBlocking(refs[i]) {
				refs[i].BlockOwnerDeletion, changed = new(false), true
			}
		}
		p.Metadata.OwnerReferences = &refs
		return changed
	})
}

// removeFinalizer removes finalizer f from id.
func (gc *GarbageCollector) removeFinalizer(ctx context.Context, id identity, f string) error {
	err := gc.patch(ctx, id, func(live *metav1.PartialObjectMetadata, p *metaPatch) bool {
		if !slices.Contains(live.Finalizers, f) {
			return false
		}
		rest := slices.DeleteFunc(slices.Clone(live.Finalizers), func(x string) bool { return x == f })
		if rest == nil {
			rest = []string{}
		}
		p.Metadata.Finalizers = &rest
		return true
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
