package apiserver_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
	"github.com/kubeembed/apiserver/timing"
)

// owned is a ConfigMap owned by owner.
func owned(name string, owner metav1.Object, kind string, block bool) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "v1", Kind: kind, Name: owner.GetName(), UID: owner.GetUID(), BlockOwnerDeletion: &block}}}}
}

func createCM(t *testing.T, c kubernetes.Interface, ns string, cm *corev1.ConfigMap) *corev1.ConfigMap {
	t.Helper()
	out, err := c.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{})
	require.NoError(t, err)
	return out
}

func requireGone(t *testing.T, err error, what string) {
	t.Helper()
	require.Truef(t, apierrors.IsNotFound(err), "%s: want NotFound, got %v", what, err)
}

// Deleting an owner in the background deletes its dependents; a dependent
// with another owner still there keeps it and loses the reference.
func TestGarbageCollectorBackground(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	owner := createCM(t, c, "default", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}})
	other := createCM(t, c, "default", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other"}})
	for i := range 3 {
		createCM(t, c, "default", owned(fmt.Sprint("dep-", i), owner, "ConfigMap", false))
	}
	shared := owned("shared", owner, "ConfigMap", false)
	shared.OwnerReferences = append(shared.OwnerReferences, owned("", other, "ConfigMap", false).OwnerReferences...)
	createCM(t, c, "default", shared)

	require.NoError(t, c.CoreV1().ConfigMaps("default").Delete(t.Context(), "owner", metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv)
	for i := range 3 {
		_, err := c.CoreV1().ConfigMaps("default").Get(t.Context(), fmt.Sprint("dep-", i), metav1.GetOptions{})
		requireGone(t, err, "dependent")
	}
	kept, err := c.CoreV1().ConfigMaps("default").Get(t.Context(), "shared", metav1.GetOptions{})
	require.NoError(t, err, "a dependent with an owner left is kept")
	require.Len(t, kept.OwnerReferences, 1)
	assert.Equal(t, other.UID, kept.OwnerReferences[0].UID, "the reference to the deleted owner is removed")
}

// Foreground deletion keeps the owner, with the foregroundDeletion
// finalizer, until every dependent that blocks it is gone.
func TestGarbageCollectorForeground(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	cms := c.CoreV1().ConfigMaps("default")
	owner := createCM(t, c, "default", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}})
	held := owned("held", owner, "ConfigMap", true)
	held.Finalizers = []string{"example.com/hold"}
	createCM(t, c, "default", held)
	createCM(t, c, "default", owned("free", owner, "ConfigMap", true))

	require.NoError(t, cms.Delete(t.Context(), "owner", metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationForeground)}))
	apiservertest.WaitIdle(t, srv)
	_, err := cms.Get(t.Context(), "free", metav1.GetOptions{})
	requireGone(t, err, "a dependent without finalizers")
	got, err := cms.Get(t.Context(), "owner", metav1.GetOptions{})
	require.NoError(t, err, "the owner waits for its blocking dependent")
	assert.Contains(t, got.Finalizers, metav1.FinalizerDeleteDependents)
	got, err = cms.Get(t.Context(), "held", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, got.DeletionTimestamp, "the dependent is being deleted")

	got.Finalizers = nil
	_, err = cms.Update(t.Context(), got, metav1.UpdateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	_, err = cms.Get(t.Context(), "owner", metav1.GetOptions{})
	requireGone(t, err, "the owner, once its dependents are gone")
}

// Orphan deletion removes the owner references, keeps the dependents.
func TestGarbageCollectorOrphan(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	cms := c.CoreV1().ConfigMaps("default")
	owner := createCM(t, c, "default", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}})
	createCM(t, c, "default", owned("dep", owner, "ConfigMap", true))

	require.NoError(t, cms.Delete(t.Context(), "owner", metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationOrphan)}))
	apiservertest.WaitIdle(t, srv)
	_, err := cms.Get(t.Context(), "owner", metav1.GetOptions{})
	requireGone(t, err, "the owner")
	dep, err := cms.Get(t.Context(), "dep", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, dep.OwnerReferences)
}

// Orphaning keeps a dependent written just before its owner's deletion even
// when the collector's informer of the dependent's resource is behind the
// owner's (shaken timing delays each watch's events at random): the
// collector waits for its graph to see it instead of orphaning nothing and
// collecting it once the owner is gone (parity's
// gc-orphan-finalizer-set-by-hand met this).
func TestGarbageCollectorOrphansWhatItHasNotSeenYet(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Timing: timing.Shake(0)}))
	c := clientset(t, srv)
	const n = 10
	for i := range n {
		owner := createCM(t, c, "default", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprint("owner-", i), Finalizers: []string{metav1.FinalizerOrphanDependents}}})
		dep := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("dep-", i), OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}}}
		_, err := c.CoreV1().Secrets("default").Create(t.Context(), dep, metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, c.CoreV1().ConfigMaps("default").Delete(t.Context(), owner.Name, metav1.DeleteOptions{}))
	}
	apiservertest.WaitIdle(t, srv)
	for i := range n {
		dep, err := c.CoreV1().Secrets("default").Get(t.Context(), fmt.Sprint("dep-", i), metav1.GetOptions{})
		require.NoError(t, err, "the dependent is orphaned, not collected")
		assert.Empty(t, dep.OwnerReferences)
		_, err = c.CoreV1().ConfigMaps("default").Get(t.Context(), fmt.Sprint("owner-", i), metav1.GetOptions{})
		requireGone(t, err, "the owner")
	}
}

// A dependent whose owner never existed, or has another UID, is deleted; a
// namespaced dependent of a cluster-scoped owner is kept while it lives.
func TestGarbageCollectorDanglingOwners(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	cms := c.CoreV1().ConfigMaps("default")
	createCM(t, c, "default", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}})
	missing := &metav1.ObjectMeta{Name: "nobody", UID: types.UID("00000000-0000-0000-0000-000000000001")}
	createCM(t, c, "default", owned("orphan", missing, "ConfigMap", false))
	wrongUID := &metav1.ObjectMeta{Name: "owner", UID: types.UID("00000000-0000-0000-0000-000000000002")}
	createCM(t, c, "default", owned("impostor", wrongUID, "ConfigMap", false))
	ns, err := c.CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{})
	require.NoError(t, err)
	createCM(t, c, "default", owned("of-namespace", ns, "Namespace", false))

	apiservertest.WaitIdle(t, srv)
	for _, name := range []string{"orphan", "impostor"} {
		_, err := cms.Get(t.Context(), name, metav1.GetOptions{})
		requireGone(t, err, name)
	}
	_, err = cms.Get(t.Context(), "of-namespace", metav1.GetOptions{})
	require.NoError(t, err, "a cluster-scoped owner that exists")
}

// An owner reference to an object of another namespace is absent (owners
// are looked up in the dependent's namespace): the dependent is deleted and
// gets kube-controller-manager's event.
func TestGarbageCollectorCrossNamespaceOwner(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	_, err := c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	owner := createCM(t, c, "other", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}})
	apiservertest.WaitIdle(t, srv)
	dep := createCM(t, c, "default", owned("dep", owner, "ConfigMap", false))

	apiservertest.WaitIdle(t, srv)
	_, err = c.CoreV1().ConfigMaps("default").Get(t.Context(), "dep", metav1.GetOptions{})
	requireGone(t, err, "the dependent of an owner in another namespace")
	_, err = c.CoreV1().ConfigMaps("other").Get(t.Context(), "owner", metav1.GetOptions{})
	require.NoError(t, err, "the owner is not touched")
	events, err := c.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{FieldSelector: "reason=OwnerRefInvalidNamespace"})
	require.NoError(t, err)
	require.Len(t, events.Items, 1)
	assert.Equal(t, fmt.Sprintf(`ownerRef [v1/ConfigMap, namespace: default, name: owner, uid: %s] does not exist in namespace "default"`, owner.UID),
		events.Items[0].Message)
	assert.Equal(t, dep.UID, events.Items[0].InvolvedObject.UID)
	assert.Equal(t, "garbage-collector-controller", events.Items[0].Source.Component)
}

// Custom resources are owners and dependents too, including those of CRDs
// created after the server started.
func TestGarbageCollectorCustomResources(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	installWidgets(t, srv)
	dyn, err := dynamic.NewForConfig(srv.RESTConfig())
	require.NoError(t, err)
	widgets := dyn.Resource(widgetsGVR).Namespace("default")
	owner, err := widgets.Create(t.Context(), widget("owner", nil), metav1.CreateOptions{})
	require.NoError(t, err)
	ref := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Widget", Name: "owner", UID: owner.GetUID()}
	_, err = widgets.Create(t.Context(), widget("child", []metav1.OwnerReference{ref}), metav1.CreateOptions{})
	require.NoError(t, err)
	c := clientset(t, srv)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "of-widget", OwnerReferences: []metav1.OwnerReference{ref}}}
	createCM(t, c, "default", cm)

	require.NoError(t, widgets.Delete(t.Context(), "owner", metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv)
	_, err = widgets.Get(t.Context(), "child", metav1.GetOptions{})
	requireGone(t, err, "a custom resource dependent")
	_, err = c.CoreV1().ConfigMaps("default").Get(t.Context(), "of-widget", metav1.GetOptions{})
	requireGone(t, err, "a built-in dependent of a custom resource")
}

// A custom resource created and deleted while the controllers' watch of
// its kind is down (on etcd behind the watch cache, the watch of a CRD's
// resources ends as its storage is rebuilt with the accepted names, and
// cannot resume: the informers relist) is never shown to them; WaitIdle
// counts the relist as having seen it, instead of waiting for an event
// that never comes (it did: "garbagecollector: widgets...: seen
// resourceVersion 0 of N" until its deadline). Several servers at once,
// as the race needs load to show.
func TestWaitIdleAfterCustomResourceCreatedAndDeleted(t *testing.T) {
	t.Parallel()
	for i := range 4 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			srv := apiservertest.Start(t, apiservertest.WithCRDPaths("testdata/crds"))
			dyn, err := srv.DynamicClient()
			require.NoError(t, err)
			gvr := schema.GroupVersionResource{Group: "example.kubeembed.dev", Version: "v1", Resource: "widgets"}
			w := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.kubeembed.dev/v1", "kind": "Widget",
				"metadata": map[string]any{"name": "small"}, "spec": map[string]any{"size": int64(3)}}}
			_, err = dyn.Resource(gvr).Namespace("default").Create(t.Context(), w, metav1.CreateOptions{})
			require.NoError(t, err)
			require.NoError(t, dyn.Resource(gvr).Namespace("default").Delete(t.Context(), "small", metav1.DeleteOptions{}))
			apiservertest.WaitIdle(t, srv)
		})
	}
}

var widgetsGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

func widget(name string, owners []metav1.OwnerReference) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name}}}
	u.SetOwnerReferences(owners)
	return u
}

// Deleting a namespace deletes everything in it, custom resources included,
// then the namespace; its conditions say so as kube-controller-manager's.
func TestNamespaceDeletion(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	installWidgets(t, srv)
	c := clientset(t, srv)
	_, err := c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	createCM(t, c, "doomed", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}})
	_, err = c.CoreV1().Secrets("doomed").Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(srv.RESTConfig())
	require.NoError(t, err)
	_, err = dyn.Resource(widgetsGVR).Namespace("doomed").Create(t.Context(), widget("w", nil), metav1.CreateOptions{})
	require.NoError(t, err)

	require.NoError(t, c.CoreV1().Namespaces().Delete(t.Context(), "doomed", metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv)
	_, err = c.CoreV1().Namespaces().Get(t.Context(), "doomed", metav1.GetOptions{})
	requireGone(t, err, "the namespace")
	_, err = dyn.Resource(widgetsGVR).Namespace("doomed").Get(t.Context(), "w", metav1.GetOptions{})
	requireGone(t, err, "its custom resource")
}

// Content held by a finalizer keeps the namespace Terminating with
// NamespaceFinalizersRemaining; removing the finalizer lets it go.
func TestNamespaceDeletionWaitsForFinalizers(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	_, err := c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "held"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	createCM(t, c, "held", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Finalizers: []string{"example.com/hold"}}})

	require.NoError(t, c.CoreV1().Namespaces().Delete(t.Context(), "held", metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv)
	ns, err := c.CoreV1().Namespaces().Get(t.Context(), "held", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.NamespaceTerminating, ns.Status.Phase)
	conditions := map[corev1.NamespaceConditionType]corev1.NamespaceCondition{}
	for _, c := range ns.Status.Conditions {
		conditions[c.Type] = c
	}
	require.Len(t, conditions, 5)
	assert.Equal(t, "SomeFinalizersRemain", conditions[corev1.NamespaceFinalizersRemaining].Reason)
	assert.Equal(t, "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances",
		conditions[corev1.NamespaceFinalizersRemaining].Message)
	assert.Equal(t, "Some resources are remaining: configmaps. has 1 resource instances", conditions[corev1.NamespaceContentRemaining].Message)
	assert.Equal(t, corev1.ConditionFalse, conditions[corev1.NamespaceDeletionDiscoveryFailure].Status)
	assert.Equal(t, "All resources successfully discovered", conditions[corev1.NamespaceDeletionDiscoveryFailure].Message)

	_, err = c.CoreV1().ConfigMaps("held").Patch(t.Context(), "cm", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	_, err = c.CoreV1().Namespaces().Get(t.Context(), "held", metav1.GetOptions{})
	requireGone(t, err, "the namespace, once its content is gone")
}

// kube-root-ca.crt is published in every namespace and put back.
func TestRootCACertPublisher(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	_, err := c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease", "fresh"} {
		cm, err := c.CoreV1().ConfigMaps(ns).Get(t.Context(), "kube-root-ca.crt", metav1.GetOptions{})
		require.NoError(t, err, ns)
		assert.Equal(t, string(srv.RESTConfig().CAData), cm.Data["ca.crt"])
		assert.Equal(t, "kube-controller-manager", cm.ManagedFields[0].Manager)
	}
	require.NoError(t, c.CoreV1().ConfigMaps("fresh").Delete(t.Context(), "kube-root-ca.crt", metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv)
	_, err = c.CoreV1().ConfigMaps("fresh").Get(t.Context(), "kube-root-ca.crt", metav1.GetOptions{})
	require.NoError(t, err, "put back")
}

// Options.Controllers switches controllers off: without the namespace
// controller a deleted namespace stays Terminating, as on envtest.
func TestControllersOff(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{
		Controllers: []controllers.Name{"*", "-" + controllers.Namespace}}))
	c := clientset(t, srv)
	_, err := c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, c.CoreV1().Namespaces().Delete(t.Context(), "kept", metav1.DeleteOptions{}))
	apiservertest.WaitIdle(t, srv)
	ns, err := c.CoreV1().Namespaces().Get(t.Context(), "kept", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.NamespaceTerminating, ns.Status.Phase)
	assert.Empty(t, ns.Status.Conditions)

	_, err = apiserver.New(apiserver.Options{Controllers: []controllers.Name{"*", "-nosuch"}})
	require.ErrorContains(t, err, `unknown controller "-nosuch"`)
}

// installWidgets creates a CRD after the server started (so the controllers
// must discover it) and waits until it is Established.
func installWidgets(t *testing.T, srv *apiserver.Server) {
	t.Helper()
	c, err := apiextensionsclient.NewForConfig(srv.RESTConfig())
	require.NoError(t, err)
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr(true)}}}},
		},
	}
	crds := c.ApiextensionsV1().CustomResourceDefinitions()
	w, err := crds.Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=" + crd.Name})
	require.NoError(t, err)
	defer w.Stop()
	_, err = crds.Create(t.Context(), crd, metav1.CreateOptions{})
	require.NoError(t, err)
	waitFor(t, w, func(e watch.Event) bool {
		got, ok := e.Object.(*apiextensionsv1.CustomResourceDefinition)
		return ok && slices.ContainsFunc(got.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
			return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
		})
	})
}

// An owner cycle under foreground deletion does not wait on itself: both
// go (upstream unblocks the cycle's references).
func TestGarbageCollectorForegroundCycle(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	cms := c.CoreV1().ConfigMaps("default")
	a := createCM(t, c, "default", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}})
	b := createCM(t, c, "default", owned("b", a, "ConfigMap", true))
	a.OwnerReferences = owned("", b, "ConfigMap", true).OwnerReferences
	_, err := cms.Update(t.Context(), a, metav1.UpdateOptions{})
	require.NoError(t, err)

	require.NoError(t, cms.Delete(t.Context(), "a", metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationForeground)}))
	apiservertest.WaitIdle(t, srv)
	for _, name := range []string{"a", "b"} {
		_, err := cms.Get(t.Context(), name, metav1.GetOptions{})
		requireGone(t, err, name)
	}
}

// A custom resource owner deleted in the foreground right after its CRD is
// installed waits for its blocking dependent.
func TestGarbageCollectorForegroundNewCRD(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	installWidgets(t, srv)
	dyn, err := dynamic.NewForConfig(srv.RESTConfig())
	require.NoError(t, err)
	widgets := dyn.Resource(widgetsGVR).Namespace("default")
	owner, err := widgets.Create(t.Context(), widget("owner", nil), metav1.CreateOptions{})
	require.NoError(t, err)
	block := true
	ref := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Widget", Name: "owner", UID: owner.GetUID(), BlockOwnerDeletion: &block}
	c := clientset(t, srv)
	createCM(t, c, "default", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dep", Finalizers: []string{"example.com/hold"}, OwnerReferences: []metav1.OwnerReference{ref}}})
	fg := metav1.DeletePropagationForeground
	require.NoError(t, widgets.Delete(t.Context(), "owner", metav1.DeleteOptions{PropagationPolicy: &fg}))
	apiservertest.WaitIdle(t, srv)
	_, err = widgets.Get(t.Context(), "owner", metav1.GetOptions{})
	require.NoError(t, err, "the owner waits for its blocking dependent")
}
