package apiserver_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// denyNamed is a validating admission webhook refusing objects named
// "refused".
func denyNamed(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: review.Request.Name != "refused"}
	if !resp.Allowed {
		resp.Result = &metav1.Status{Message: "no objects named refused", Code: http.StatusForbidden}
	}
	review.Request, review.Response = nil, resp
	_ = json.NewEncoder(w).Encode(&review)
}

// configMapWebhook is a ValidatingWebhookConfiguration as config/webhook
// ships it: the webhook is addressed by its Service.
func configMapWebhook(namespace, service string, caBundle []byte) *admissionregistrationv1.ValidatingWebhookConfiguration {
	none, fail := admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.Fail
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "validating-webhook-configuration"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "vconfigmap.kb.io", AdmissionReviewVersions: []string{"v1"}, SideEffects: &none, FailurePolicy: &fail,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: caBundle,
				Service: &admissionregistrationv1.ServiceReference{Namespace: namespace, Name: service, Path: new("/validate")}},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"webhook": "on"}},
		}},
	}
}

// createUntilRefused creates cm (dry run) in namespace until the webhook
// answers (the admission plugin sees a new configuration through its
// informer), and returns the error.
func createUntilRefused(t *testing.T, c kubernetes.Interface, namespace string, cm *corev1.ConfigMap) error {
	t.Helper()
	_, err := c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace,
		Labels: map[string]string{"webhook": "on"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err = c.CoreV1().ConfigMaps(namespace).Create(t.Context(), cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil
	}, 10*time.Second, 5*time.Millisecond)
	return err
}

// A webhook configuration naming a Service reaches the handler served as
// that Service, with the configuration's caBundle and path.
func TestWebhookByService(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	ca := apiservertest.ServeService(t, srv, "system", "webhook-service", http.HandlerFunc(denyNamed))
	_, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(t.Context(),
		configMapWebhook("system", "webhook-service", ca), metav1.CreateOptions{})
	require.NoError(t, err)

	err = createUntilRefused(t, c, "hooked", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "refused"}})
	assert.Equal(t, `admission webhook "vconfigmap.kb.io" denied the request: no objects named refused`, err.Error())
	_, err = c.CoreV1().ConfigMaps("hooked").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "fine"}}, metav1.CreateOptions{})
	assert.NoError(t, err)

	eps, err := c.DiscoveryV1().EndpointSlices("system").List(t.Context(), metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=webhook-service"})
	require.NoError(t, err)
	require.Len(t, eps.Items, 1)
	assert.Equal(t, []string{apiserver.LocalEndpointIP}, eps.Items[0].Endpoints[0].Addresses)
}

// A Service without endpoints, or no Service, fails the call with
// kube-apiserver's messages.
func TestWebhookByServiceUnreachable(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	_, err := c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "system"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.CoreV1().Services("system").Create(t.Context(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "empty"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443, TargetPort: intstr.FromInt32(9443)}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	hook := configMapWebhook("system", "empty", nil)
	hook.Webhooks = append(hook.Webhooks, *hook.Webhooks[0].DeepCopy())
	hook.Webhooks[1].Name, hook.Webhooks[1].ClientConfig.Service.Name = "missing.kb.io", "missing"
	hook.Webhooks[1].NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"missing": "on"}}
	_, err = c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(t.Context(), hook, metav1.CreateOptions{})
	require.NoError(t, err)

	err = createUntilRefused(t, c, "hooked", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}})
	assert.Equal(t, `Internal error occurred: failed calling webhook "vconfigmap.kb.io": failed to call webhook: `+
		`Post "https://empty.system.svc:443/validate?timeout=10s": no endpoints available for service "empty"`, err.Error())

	_, err = c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other",
		Labels: map[string]string{"missing": "on"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.CoreV1().ConfigMaps("other").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{})
	require.Error(t, err)
	assert.Equal(t, `Internal error occurred: failed calling webhook "missing.kb.io": failed to call webhook: `+
		`Post "https://missing.system.svc:443/validate?timeout=10s": service "missing" not found`, err.Error())
}

// convertGadgets converts example.com Gadgets between v1 (spec.size) and
// v2 (spec.replicas), as a CRD's conversion webhook.
func convertGadgets(w http.ResponseWriter, r *http.Request) {
	var review apiextensionsv1.ConversionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	field := map[string]string{"example.com/v1": "size", "example.com/v2": "replicas"}
	to := review.Request.DesiredAPIVersion
	resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for _, raw := range review.Request.Objects {
		var obj unstructured.Unstructured
		if err := obj.UnmarshalJSON(raw.Raw); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		from := field[obj.GetAPIVersion()]
		if v, ok, _ := unstructured.NestedInt64(obj.Object, "spec", from); ok {
			unstructured.RemoveNestedField(obj.Object, "spec", from)
			_ = unstructured.SetNestedField(obj.Object, v, "spec", field[to])
		}
		obj.SetAPIVersion(to)
		b, _ := obj.MarshalJSON()
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: b})
	}
	review.Request, review.Response = nil, resp
	_ = json.NewEncoder(w).Encode(&review)
}

// gadgets is a CRD of two versions converted by the webhook of a Service.
func gadgets(namespace, service string, caBundle []byte) *apiextensionsv1.CustomResourceDefinition {
	schema := func(field string) *apiextensionsv1.CustomResourceValidation {
		return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
			Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{field: {Type: "integer"}}}}}}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Gadget", ListKind: "GadgetList", Plural: "gadgets", Singular: "gadget"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: schema("size")},
				{Name: "v2", Served: true, Schema: schema("replicas")}},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"},
					ClientConfig: &apiextensionsv1.WebhookClientConfig{CABundle: caBundle,
						Service: &apiextensionsv1.ServiceReference{Namespace: namespace, Name: service, Path: new("/convert")}}}},
		},
	}
}

// gadgetsConvertedBy starts a server with the gadgets CRD, whose conversion
// webhook is converter behind Service system/webhook-service, and returns
// a dynamic client of it.
func gadgetsConvertedBy(t *testing.T, converter http.Handler) dynamic.Interface {
	srv := apiservertest.Start(t)
	ca := apiservertest.ServeService(t, srv, "system", "webhook-service", converter)
	ext, err := srv.APIExtensionsClientset()
	require.NoError(t, err)
	_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Create(t.Context(), gadgets("system", "webhook-service", ca), metav1.CreateOptions{})
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(srv.RESTConfig())
	require.NoError(t, err)
	return dyn
}

// A CRD's conversion webhook named by Service converts on write, read and
// list.
func TestConversionWebhookByService(t *testing.T) {
	t.Parallel()
	dyn := gadgetsConvertedBy(t, http.HandlerFunc(convertGadgets))
	var err error
	v1 := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}
	v2 := schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "gadgets"}
	g := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v2", "kind": "Gadget",
		"metadata": map[string]any{"name": "g"}, "spec": map[string]any{"replicas": int64(3)}}}
	require.Eventually(t, func() bool { // served once Established
		_, err = dyn.Resource(v2).Namespace("default").Create(t.Context(), g, metav1.CreateOptions{})
		return err == nil
	}, 10*time.Second, 5*time.Millisecond, "create through conversion: %v", err)
	stored, err := dyn.Resource(v1).Namespace("default").Get(t.Context(), "g", metav1.GetOptions{})
	require.NoError(t, err)
	size, _, _ := unstructured.NestedInt64(stored.Object, "spec", "size")
	assert.Equal(t, int64(3), size)
	list, err := dyn.Resource(v2).Namespace("default").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	replicas, _, _ := unstructured.NestedInt64(list.Items[0].Object, "spec", "replicas")
	assert.Equal(t, int64(3), replicas)

	// A watch in v2 sees a v1 write converted.
	w, err := dyn.Resource(v2).Namespace("default").Watch(t.Context(), metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	require.NoError(t, err)
	defer w.Stop()
	_, err = dyn.Resource(v1).Namespace("default").Create(t.Context(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": map[string]any{"name": "h"},
		"spec": map[string]any{"size": int64(5)}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	select {
	case ev := <-w.ResultChan():
		obj := ev.Object.(*unstructured.Unstructured)
		replicas, _, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas")
		assert.Equal(t, []any{"h", "example.com/v2", int64(5)}, []any{obj.GetName(), obj.GetAPIVersion(), replicas})
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event")
	}
}

// A conversion webhook that refuses: reads in another version fail with
// kube-apiserver's corrupt-object errors (a get: InternalError naming the
// key; a list: StorageReadError listing every key), and such an object can
// be deleted only with ignoreStoreReadErrorWithClusterBreakingPotential.
func TestConversionWebhookFailure(t *testing.T) {
	t.Parallel()
	dyn := gadgetsConvertedBy(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review apiextensionsv1.ConversionReview
		_ = json.NewDecoder(r.Body).Decode(&review)
		review.Response = &apiextensionsv1.ConversionResponse{UID: review.Request.UID,
			Result: metav1.Status{Status: metav1.StatusFailure, Message: "cannot convert"}}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(&review)
	}))
	var err error
	v1 := dyn.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}).Namespace("default")
	v2 := dyn.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "gadgets"}).Namespace("default")
	g := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Gadget",
		"metadata": map[string]any{"name": "g"}, "spec": map[string]any{"size": int64(3)}}}
	require.Eventually(t, func() bool { // served once Established; no conversion to the storage version
		_, err = v1.Create(t.Context(), g, metav1.CreateOptions{})
		return err == nil
	}, 10*time.Second, 5*time.Millisecond, "create: %v", err)

	_, err = v2.Get(t.Context(), "g", metav1.GetOptions{})
	require.True(t, apierrors.IsInternalError(err), "%v", err)
	assert.Regexp(t, `^Internal error occurred: StorageError: corrupt object, Code: 7, Key: /example.com/gadgets/default/g, `+
		`ResourceVersion: 0, AdditionalErrorMsg: object not decodable revision=\d+: `+
		`conversion webhook for example.com/v1, Kind=Gadget failed: cannot convert$`, err.Error())
	_, err = v2.List(t.Context(), metav1.ListOptions{})
	var status apierrors.APIStatus
	require.ErrorAs(t, err, &status)
	assert.Equal(t, metav1.StatusReasonStoreReadError, status.Status().Reason)
	assert.Regexp(t, `^failed to read one or more gadgets.example.com from the storage: StorageError: corrupt object, Code: 7, `+
		`Key: /\S*/example.com/gadgets/default/g, .*: cannot convert$`, status.Status().Message)

	require.Error(t, v2.Delete(t.Context(), "g", metav1.DeleteOptions{}))
	require.NoError(t, v2.Delete(t.Context(), "g", metav1.DeleteOptions{IgnoreStoreReadErrorWithClusterBreakingPotential: new(true)}))
	_, err = v1.Get(t.Context(), "g", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "deleted: %v", err)
}
