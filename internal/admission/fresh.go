package admission

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// Fresh is a lister with read-your-writes: Fresh reports whether the lister
// holds every write to its resource so far. The plugins written here read
// the lister then, and ask the server itself otherwise, so an object a
// client has just created, changed or deleted is what admission sees
// (kube-apiserver's plugins read informers that lag by milliseconds, and
// a test that creates a ServiceAccount or LimitRange and then a pod must
// not depend on them). Reading the lister saves a request through the
// whole handler chain for each lookup: a pod's create made four.
type Fresh[L any] struct {
	Lister L
	Fresh  func() bool
}

// get returns the lister when it is fresh.
func (f Fresh[L]) get() (L, bool) {
	if f.Fresh == nil || !f.Fresh() {
		var zero L
		return zero, false
	}
	return f.Lister, true
}

// Nodes reads nodes for the plugins that check a pod against its node
// (PodResizeValidator, NodeDeclaredFeatureValidator): the lister while it
// is fresh, else the server, so a node a test has just created or changed
// is what they see.
type Nodes struct {
	Lister Fresh[corev1listers.NodeLister]
	Client kubernetes.Interface
}

func (n Nodes) get(ctx context.Context, name string) (*corev1.Node, error) {
	if lister, ok := n.Lister.get(); ok {
		return lister.Get(name)
	}
	return n.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

// forPod returns the node of a's pod, or the 403 the node plugins give
// when it cannot be read.
func (n Nodes) forPod(ctx context.Context, a admission.Attributes, name string) (*corev1.Node, error) {
	node, err := n.get(ctx, name)
	if apierrors.IsNotFound(err) {
		return nil, admission.NewForbidden(a, fmt.Errorf("node %q not found", name))
	}
	if err != nil {
		return nil, admission.NewForbidden(a, fmt.Errorf("failed to get node %q: %w", name, err))
	}
	return node, nil
}
