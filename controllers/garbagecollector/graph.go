package garbagecollector

import (
	"fmt"
	"reflect"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// identity is where an object is: its owner reference coordinates and
// namespace.
type identity struct {
	APIVersion, Kind, Namespace, Name string
	UID                               types.UID
}

// String is kube-controller-manager's objectReference format, which its
// events quote.
func (i identity) String() string {
	return fmt.Sprintf("[%s/%s, namespace: %s, name: %s, uid: %s]", i.APIVersion, i.Kind, i.Namespace, i.Name, i.UID)
}

func identityOf(gvk schema.GroupVersionKind, m metav1.Object) identity {
	return identity{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Namespace: m.GetNamespace(), Name: m.GetName(), UID: m.GetUID()}
}

// ownerIdentity is where a reference in an object in namespace points.
func ownerIdentity(ref metav1.OwnerReference, namespace string) identity {
	return identity{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: namespace, Name: ref.Name, UID: ref.UID}
}

// node is an object of the graph, or an owner known only from references
// (virtual) until an informer shows it.
type node struct {
	identity           identity
	owners             []metav1.OwnerReference
	dependents         map[*node]struct{}
	virtual            bool
	beingDeleted       bool
	deletingDependents bool
}

func (n *node) blocks(owner types.UID) bool {
	return slices.ContainsFunc(n.owners, func(r metav1.OwnerReference) bool {
		return r.UID == owner && r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion
	})
}

// graph is the owner graph over every monitored object, by UID.
type graph struct {
	mu    sync.Mutex
	nodes map[types.UID]*node
}

// insert adds n and links it to its owners (virtual nodes for those not
// seen yet), returning the nodes to check: new virtual owners, and n if a
// reference may be invalid.
func (g *graph) insert(n *node) (check []*node, invalid []types.UID) {
	g.nodes[n.identity.UID] = n
	return g.link(n, n.owners)
}

func (g *graph) link(n *node, owners []metav1.OwnerReference) (check []*node, invalid []types.UID) {
	suspect := false
	for _, ref := range owners {
		owner, ok := g.nodes[ref.UID]
		if !ok {
			owner = &node{identity: ownerIdentity(ref, n.identity.Namespace), dependents: map[*node]struct{}{}, virtual: true}
			g.nodes[ref.UID] = owner
			check = append(check, owner)
		}
		owner.dependents[n] = struct{}{}
		if !ok || suspect {
			continue
		}
		ownerNamespaced := owner.identity.Namespace != ""
		switch {
		case ownerNamespaced && owner.identity.Namespace != n.identity.Namespace:
			if !owner.virtual {
				invalid = append(invalid, ref.UID)
			}
			suspect = true
		case !sameCoordinates(ref, owner.identity):
			suspect = true
		case !ownerNamespaced && owner.identity.Namespace != n.identity.Namespace && owner.virtual:
			suspect = true
		}
	}
	if suspect {
		check = append(check, n)
	}
	return check, invalid
}

func sameCoordinates(ref metav1.OwnerReference, id identity) bool {
	return ref.UID == id.UID && ref.Name == id.Name && ref.Kind == id.Kind && ref.APIVersion == id.APIVersion
}

func (g *graph) unlink(n *node, owners []metav1.OwnerReference) {
	for _, ref := range owners {
		if owner, ok := g.nodes[ref.UID]; ok {
			delete(owner.dependents, n)
		}
	}
}

func (g *graph) remove(n *node) {
	delete(g.nodes, n.identity.UID)
	g.unlink(n, n.owners)
}

// diff tells the owner references added, removed and changed.
func diff(old, cur []metav1.OwnerReference) (added, removed []metav1.OwnerReference, changed [][2]metav1.OwnerReference) {
	before := map[types.UID]metav1.OwnerReference{}
	for _, r := range old {
		before[r.UID] = r
	}
	for _, r := range cur {
		o, ok := before[r.UID]
		switch {
		case !ok:
			added = append(added, r)
		case !reflect.DeepEqual(o, r):
			changed = append(changed, [2]metav1.OwnerReference{o, r})
		}
		delete(before, r.UID)
	}
	for _, r := range before {
		removed = append(removed, r)
	}
	return added, removed, changed
}

// matching splits dependents into those whose reference to owner agrees
// with its identity and those whose does not.
func matching(dependents map[*node]struct{}, owner identity) (match, mismatch []*node) {
	for dep := range dependents {
		ok := owner.Namespace == "" || owner.Namespace == dep.identity.Namespace
		if ok {
			ok = slices.ContainsFunc(dep.owners, func(r metav1.OwnerReference) bool {
				return r.UID == owner.UID && sameCoordinates(r, owner)
			})
		}
		if ok {
			match = append(match, dep)
		} else {
			mismatch = append(mismatch, dep)
		}
	}
	return match, mismatch
}

func isBlocking(r metav1.OwnerReference) bool {
	return r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion
}
