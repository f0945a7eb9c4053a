package controller

import (
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kubeembed/apiserver/testing/apiservertest"

	cachev1 "example.com/memcached-operator/api/v1"
)

// On a kubeembed server in the cluster profile the operator's Deployment
// really rolls out (the Deployment and ReplicaSet controllers, the
// scheduler and a simulated kubelet run): the reconciler reports the
// Memcached Available with no status written by the test, unlike the
// envtest suite, which has to play the Deployment controller.
func TestMemcachedBecomesAvailableOnACluster(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t, apiservertest.WithCRDPaths(filepath.Join("..", "..", "config", "crd", "bases")))
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := cachev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(srv.RESTConfig(), client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Name: "cache", Namespace: "default"}
	m := &cachev1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace},
		Spec: cachev1.MemcachedSpec{Replicas: new(int32(2)), Image: "memcached:1.6.38", Port: 11211}}
	if err := c.Create(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	r := &MemcachedReconciler{Client: c, Scheme: s}
	if _, err := r.Reconcile(t.Context(), reconcile.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	apiservertest.WaitIdle(t, srv) // the Deployment's ReplicaSet, its pods scheduled, started, Ready
	dep := &appsv1.Deployment{}
	if err := c.Get(t.Context(), key, dep); err != nil {
		t.Fatal(err)
	}
	if dep.Status.AvailableReplicas != 2 {
		t.Fatalf("Deployment not available: %+v", dep.Status)
	}
	if _, err := r.Reconcile(t.Context(), reconcile.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(t.Context(), key, m); err != nil {
		t.Fatal(err)
	}
	if m.Status.ReadyReplicas != 2 || !meta.IsStatusConditionTrue(m.Status.Conditions, ConditionAvailable) {
		t.Fatalf("Memcached not Available: %+v", m.Status)
	}
}
