package controllerruntime

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kubeembed/apiserver/testing/apiservertest"
)

var widgetGVK = schema.GroupVersionKind{Group: "example.kubeembed.dev", Version: "v1", Kind: "Widget"}

// widgetReconciler gives every Widget a ConfigMap it owns, then marks the
// Widget ready through the status subresource.
type widgetReconciler struct{ client.Client }

func (r *widgetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(widgetGVK)
	if err := r.Get(ctx, req.NamespacedName, w); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: req.Name + "-config", Namespace: req.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, cm, func() error {
		size, _, _ := unstructured.NestedInt64(w.Object, "spec", "size")
		cm.Data = map[string]string{"size": itoa(size)}
		return controllerutil.SetControllerReference(w, cm, r.Scheme())
	}); err != nil {
		return ctrl.Result{}, err
	}
	ready, _, _ := unstructured.NestedBool(w.Object, "status", "ready")
	if !ready {
		patch := client.MergeFrom(w.DeepCopy())
		if err := unstructured.SetNestedField(w.Object, true, "status", "ready"); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Status().Patch(ctx, w, patch); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

func TestManagerReconcilesCustomResources(t *testing.T) {
	srv := apiservertest.Start(t, apiservertest.WithCRDPaths("../../testdata/crds"))
	mgr, err := ctrl.NewManager(srv.RESTConfig(), ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	require.NoError(t, err)
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(widgetGVK)
	require.NoError(t, ctrl.NewControllerManagedBy(mgr).For(w).Owns(&corev1.ConfigMap{}).
		Complete(&widgetReconciler{Client: mgr.GetClient()}))

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})

	c, err := client.New(srv.RESTConfig(), client.Options{})
	require.NoError(t, err)
	dyn, err := srv.DynamicClient()
	require.NoError(t, err)
	widgets := dyn.Resource(schema.GroupVersionResource{Group: widgetGVK.Group, Version: "v1", Resource: "widgets"}).Namespace("default")
	watcher, err := widgets.Watch(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	defer watcher.Stop()

	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.kubeembed.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "gear", "namespace": "default"},
		"spec":     map[string]any{"size": int64(4)},
	}}
	require.NoError(t, c.Create(t.Context(), obj))

	// Wait, by watching, for the reconciler to mark the widget ready.
	deadline := time.After(30 * time.Second)
	for ready := false; !ready; {
		select {
		case ev := <-watcher.ResultChan():
			require.NotEqual(t, watch.Error, ev.Type)
			ready, _, _ = unstructured.NestedBool(ev.Object.(*unstructured.Unstructured).Object, "status", "ready")
		case <-deadline:
			t.Fatal("the widget was never marked ready")
		}
	}

	cm := &corev1.ConfigMap{}
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "gear-config"}, cm))
	assert.Equal(t, "4", cm.Data["size"])
	require.Len(t, cm.OwnerReferences, 1)
	assert.Equal(t, "gear", cm.OwnerReferences[0].Name)
	assert.True(t, *cm.OwnerReferences[0].Controller)

	// The cached client of the manager serves reads through informers.
	list := &corev1.ConfigMapList{}
	require.NoError(t, mgr.GetCache().List(t.Context(), list, client.InNamespace("default")))
	assert.NotEmpty(t, list.Items)

	// Validation reaches controller-runtime users as API errors.
	bad := obj.DeepCopy()
	bad.SetName("too-big")
	bad.SetResourceVersion("")
	require.NoError(t, unstructured.SetNestedField(bad.Object, int64(50), "spec", "size"))
	err = c.Create(t.Context(), bad)
	var status apierrors.APIStatus
	require.True(t, errors.As(err, &status), "%v", err)
	assert.True(t, apierrors.IsInvalid(err), "%v", err)
}
