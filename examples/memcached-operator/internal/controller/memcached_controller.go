/*
Copyright 2026 The memcached-operator Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	cachev1 "example.com/memcached-operator/api/v1"
)

// ConditionAvailable is true when every replica of the Memcached is ready.
const ConditionAvailable = "Available"

// MemcachedReconciler reconciles a Memcached object
type MemcachedReconciler struct {
	client.Client
	Scheme *runtime.Scheme
}

// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete

// Reconcile keeps a Deployment, owned by the Memcached, running its
// replicas of memcached, and reports its readiness in the Memcached's
// status.
func (r *MemcachedReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)

	memcached := &cachev1.Memcached{}
	if err := r.Get(ctx, req.NamespacedName, memcached); err != nil {
		// Deleted: the garbage collector deletes the Deployment it owns.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: memcached.Name, Namespace: memcached.Namespace}}
	op, err := controllerutil.CreateOrUpdate(ctx, r.Client, dep, func() error {
		r.desiredDeployment(memcached, dep)
		return controllerutil.SetControllerReference(memcached, dep, r.Scheme)
	})
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("deployment %s: %w", dep.Name, err)
	}
	if op != controllerutil.OperationResultNone {
		log.Info("Deployment reconciled", "operation", op, "deployment", dep.Name)
	}
	return ctrl.Result{}, r.updateStatus(ctx, memcached, dep)
}

// desiredDeployment sets the fields of dep the Memcached decides.
func (r *MemcachedReconciler) desiredDeployment(m *cachev1.Memcached, dep *appsv1.Deployment) {
	labels := map[string]string{
		"app.kubernetes.io/name":       "memcached",
		"app.kubernetes.io/instance":   m.Name,
		"app.kubernetes.io/managed-by": "memcached-operator",
	}
	dep.Labels = labels
	dep.Spec.Replicas = m.Spec.Replicas
	if dep.Spec.Selector == nil { // immutable once set
		dep.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
	}
	dep.Spec.Template.Labels = labels
	dep.Spec.Template.Spec.SecurityContext = &corev1.PodSecurityContext{
		RunAsNonRoot:   new(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	dep.Spec.Template.Spec.Containers = []corev1.Container{{
		Name:    "memcached",
		Image:   m.Spec.Image,
		Command: []string{"memcached", "--memory-limit=64", "-o", "modern", "-v"},
		Ports:   []corev1.ContainerPort{{Name: "memcached", ContainerPort: m.Spec.Port, Protocol: corev1.ProtocolTCP}},
		SecurityContext: &corev1.SecurityContext{
			RunAsUser:                new(int64(1001)),
			AllowPrivilegeEscalation: new(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}}
}

// updateStatus reports the Deployment's ready replicas and whether all are.
func (r *MemcachedReconciler) updateStatus(ctx context.Context, m *cachev1.Memcached, dep *appsv1.Deployment) error {
	want := int32(1)
	if m.Spec.Replicas != nil {
		want = *m.Spec.Replicas
	}
	cond := metav1.Condition{Type: ConditionAvailable, Status: metav1.ConditionFalse, Reason: "Progressing",
		Message: fmt.Sprintf("%d of %d replicas ready", dep.Status.ReadyReplicas, want), ObservedGeneration: m.Generation}
	if dep.Status.ReadyReplicas >= want {
		cond.Status, cond.Reason = metav1.ConditionTrue, "ReplicasReady"
	}
	before := m.Status.DeepCopy()
	m.Status.ReadyReplicas = dep.Status.ReadyReplicas
	meta.SetStatusCondition(&m.Status.Conditions, cond)
	if equalStatus(before, &m.Status) {
		return nil
	}
	return r.Status().Update(ctx, m)
}

func equalStatus(a, b *cachev1.MemcachedStatus) bool {
	if a.ReadyReplicas != b.ReadyReplicas || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message || x.ObservedGeneration != y.ObservedGeneration {
			return false
		}
	}
	return true
}

// SetupWithManager sets up the controller with the Manager.
func (r *MemcachedReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&cachev1.Memcached{}).
		Owns(&appsv1.Deployment{}).
		Named("memcached").
		Complete(r)
}
