package replicaset

// The two kinds the controller runs: ReplicaSets as they are, and
// ReplicationControllers read as ReplicaSets and written back, as
// upstream's replication manager converts them.

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kubeembed/apiserver/controllers"
)

// kind is what differs between the two controllers.
type kind struct {
	name       controllers.Name
	gvk        schema.GroupVersionKind
	resource   schema.GroupResource
	clientName string
	queueName  string
	// terminating: the status counts terminating pods
	// (DeploymentReplicaSetTerminatingReplicas, ReplicaSets only).
	terminating bool
	informer    cache.SharedIndexInformer

	get  func(ns, name string) (*appsv1.ReplicaSet, error)
	list func(ns string) ([]*appsv1.ReplicaSet, error)
	// live reads the object from the server, uncached.
	live func(ctx context.Context, ns, name string) (*appsv1.ReplicaSet, error)
	// writeStatus PUTs rs's status on the object rs was read as.
	writeStatus func(ctx context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error)
	// object is what events are recorded on.
	object func(rs *appsv1.ReplicaSet) runtime.Object
	meta   func(obj any) (metav1.Object, bool)
}

func replicaSets(cfg controllers.Config) *kind {
	lister := cfg.Informers.Apps().V1().ReplicaSets().Lister()
	k := &kind{name: controllers.ReplicaSet, gvk: appsv1.SchemeGroupVersion.WithKind("ReplicaSet"),
		resource: appsv1.Resource("replicasets"), clientName: "replicaset-controller", queueName: "replicaset", terminating: true,
		informer: cfg.Informers.Apps().V1().ReplicaSets().Informer(),
		get:      func(ns, name string) (*appsv1.ReplicaSet, error) { return lister.ReplicaSets(ns).Get(name) },
		list:     func(ns string) ([]*appsv1.ReplicaSet, error) { return lister.ReplicaSets(ns).List(labels.Everything()) },
		object:   func(rs *appsv1.ReplicaSet) runtime.Object { return rs },
	}
	k.meta = func(obj any) (metav1.Object, bool) { rs, ok := obj.(*appsv1.ReplicaSet); return rs, ok }
	return k
}

func replicationControllers(cfg controllers.Config) *kind {
	lister := cfg.Informers.Core().V1().ReplicationControllers().Lister()
	k := &kind{name: controllers.ReplicationController, gvk: corev1.SchemeGroupVersion.WithKind("ReplicationController"),
		resource: corev1.Resource("replicationcontrollers"), clientName: "replication-controller", queueName: "replicationmanager",
		informer: cfg.Informers.Core().V1().ReplicationControllers().Informer(),
		get: func(ns, name string) (*appsv1.ReplicaSet, error) {
			rc, err := lister.ReplicationControllers(ns).Get(name)
			if err != nil {
				return nil, err
			}
			return fromRC(rc), nil
		},
		list: func(ns string) ([]*appsv1.ReplicaSet, error) {
			rcs, err := lister.ReplicationControllers(ns).List(labels.Everything())
			out := make([]*appsv1.ReplicaSet, 0, len(rcs))
			for _, rc := range rcs {
				out = append(out, fromRC(rc))
			}
			return out, err
		},
		object: func(rs *appsv1.ReplicaSet) runtime.Object {
			return &corev1.ReplicationController{ObjectMeta: rs.ObjectMeta}
		},
	}
	k.meta = func(obj any) (metav1.Object, bool) { rc, ok := obj.(*corev1.ReplicationController); return rc, ok }
	return k
}

// bind gives the kind its client's reads and writes.
func (k *kind) bind(client kubernetes.Interface) {
	if k.name == controllers.ReplicaSet {
		k.live = func(ctx context.Context, ns, name string) (*appsv1.ReplicaSet, error) {
			return client.AppsV1().ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
		}
		k.writeStatus = func(ctx context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
			return client.AppsV1().ReplicaSets(rs.Namespace).UpdateStatus(ctx, rs, metav1.UpdateOptions{})
		}
		return
	}
	rcs := func(ns string) rcClient { return client.CoreV1().ReplicationControllers(ns) }
	k.live = func(ctx context.Context, ns, name string) (*appsv1.ReplicaSet, error) {
		rc, err := rcs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return fromRC(rc), nil
	}
	k.writeStatus = func(ctx context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
		rc, err := rcs(rs.Namespace).UpdateStatus(ctx, toRC(rs), metav1.UpdateOptions{})
		if err != nil {
			return nil, err
		}
		return fromRC(rc), nil
	}
}

type rcClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ReplicationController, error)
	UpdateStatus(ctx context.Context, rc *corev1.ReplicationController, opts metav1.UpdateOptions) (*corev1.ReplicationController, error)
}

// fromRC reads a ReplicationController as a ReplicaSet: its selector as
// matchLabels.
func fromRC(rc *corev1.ReplicationController) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{ObjectMeta: *rc.ObjectMeta.DeepCopy(), Spec: appsv1.ReplicaSetSpec{
		Replicas: rc.Spec.Replicas, MinReadySeconds: rc.Spec.MinReadySeconds,
	}, Status: appsv1.ReplicaSetStatus{Replicas: rc.Status.Replicas, FullyLabeledReplicas: rc.Status.FullyLabeledReplicas,
		ReadyReplicas: rc.Status.ReadyReplicas, AvailableReplicas: rc.Status.AvailableReplicas, ObservedGeneration: rc.Status.ObservedGeneration}}
	if rc.Spec.Selector != nil {
		rs.Spec.Selector = &metav1.LabelSelector{MatchLabels: rc.Spec.Selector}
	}
	if rc.Spec.Template != nil {
		rs.Spec.Template = *rc.Spec.Template.DeepCopy()
	}
	for _, c := range rc.Status.Conditions {
		rs.Status.Conditions = append(rs.Status.Conditions, appsv1.ReplicaSetCondition{Type: appsv1.ReplicaSetConditionType(c.Type),
			Status: c.Status, LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message})
	}
	return rs
}

// toRC is the ReplicationController rs was read from, with rs's status.
func toRC(rs *appsv1.ReplicaSet) *corev1.ReplicationController {
	rc := &corev1.ReplicationController{ObjectMeta: *rs.ObjectMeta.DeepCopy(), Spec: corev1.ReplicationControllerSpec{
		Replicas: rs.Spec.Replicas, MinReadySeconds: rs.Spec.MinReadySeconds, Template: rs.Spec.Template.DeepCopy(),
	}, Status: corev1.ReplicationControllerStatus{Replicas: rs.Status.Replicas, FullyLabeledReplicas: rs.Status.FullyLabeledReplicas,
		ReadyReplicas: rs.Status.ReadyReplicas, AvailableReplicas: rs.Status.AvailableReplicas, ObservedGeneration: rs.Status.ObservedGeneration}}
	if rs.Spec.Selector != nil {
		rc.Spec.Selector = rs.Spec.Selector.MatchLabels
	}
	for _, c := range rs.Status.Conditions {
		rc.Status.Conditions = append(rc.Status.Conditions, corev1.ReplicationControllerCondition{Type: corev1.ReplicationControllerConditionType(c.Type),
			Status: c.Status, LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message})
	}
	return rc
}
