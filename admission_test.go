package apiserver_test

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// Webhooks are called, as envtest users test theirs: a mutating webhook
// labels new ConfigMaps, a validating one refuses those marked deny.
func TestAdmissionWebhooks(t *testing.T) {
	t.Parallel()
	hook := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		var cm corev1.ConfigMap
		_ = json.Unmarshal(review.Request.Object.Raw, &cm)
		switch r.URL.Path {
		case "/mutate":
			patch := `[{"op":"add","path":"/metadata/labels","value":{"mutated":"yes"}}]`
			if cm.Labels != nil {
				patch = `[{"op":"add","path":"/metadata/labels/mutated","value":"yes"}]`
			}
			pt := admissionv1.PatchTypeJSONPatch
			resp.Patch, resp.PatchType = []byte(patch), &pt
		case "/validate":
			if cm.Labels["deny"] == "true" {
				resp.Allowed = false
				resp.Result = &metav1.Status{Message: "configmaps marked deny are refused", Code: http.StatusForbidden}
			}
		}
		review.Response = resp
		_ = json.NewEncoder(w).Encode(review)
	}))
	t.Cleanup(hook.Close)
	caBundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hook.Certificate().Raw})

	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	ctx := t.Context()
	none := admissionregistrationv1.SideEffectClassNone
	rules := []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}
	ns := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "default"}}
	url := func(p string) *string { u := hook.URL + p; return &u }
	_, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "label"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "label.example.com", SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: url("/mutate"), CABundle: caBundle}, Rules: rules, NamespaceSelector: ns}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "deny"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "deny.example.com", SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: url("/validate"), CABundle: caBundle}, Rules: rules, NamespaceSelector: ns}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	// The plugins see configurations through informers: eventually.
	i := 0
	require.Eventually(t, func() bool {
		i++
		cm, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: "probe-" + strings.Repeat("x", i%5) + time.Now().Format("150405.000000")[7:]}}, metav1.CreateOptions{})
		return err == nil && cm.Labels["mutated"] == "yes"
	}, 10*time.Second, 50*time.Millisecond, "the mutating webhook labels new configmaps")
	require.Eventually(t, func() bool {
		_, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			GenerateName: "denied-", Labels: map[string]string{"deny": "true"}}}, metav1.CreateOptions{})
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "configmaps marked deny are refused")
	}, 10*time.Second, 50*time.Millisecond, "the validating webhook refuses")
	// Other namespaces are not selected.
	_, err = c.CoreV1().ConfigMaps("kube-public").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "free", Labels: map[string]string{"deny": "true"}}}, metav1.CreateOptions{})
	assert.NoError(t, err)
}

// ValidatingAdmissionPolicies are evaluated (CEL), with their bindings.
func TestValidatingAdmissionPolicy(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	ctx := t.Context()
	_, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "small"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "!has(object.data) || size(object.data) <= 1", Message: "at most one key"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "small"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "small",
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "big-"},
			Data: map[string]string{"a": "1", "b": "2"}}, metav1.CreateOptions{})
		return apierrors.IsInvalid(err) && strings.Contains(err.Error(), "at most one key")
	}, 10*time.Second, 50*time.Millisecond, "the policy refuses two keys")
	_, err = c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ok"},
		Data: map[string]string{"a": "1"}}, metav1.CreateOptions{})
	assert.NoError(t, err)
}

// A policy's and a webhook's CEL is compiled when written: an expression
// that does not compile, or returns the wrong type, is a 422 naming its
// field, as on kube-apiserver (parity: validation/vap-*, webhook-match-*).
func TestAdmissionExpressionsCompiledOnWrite(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv).AdmissionregistrationV1()
	ctx := t.Context()
	rules := &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
		RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}}}
	policy := func(v admissionregistrationv1.Validation) *admissionregistrationv1.ValidatingAdmissionPolicy {
		return &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{GenerateName: "p-"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{MatchConstraints: rules, Validations: []admissionregistrationv1.Validation{v}}}
	}
	_, err := c.ValidatingAdmissionPolicies().Create(ctx, policy(admissionregistrationv1.Validation{Expression: "size(object.data) <="}), metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	assert.ErrorContains(t, err, "spec.validations[0].expression: Invalid value: \"size(object.data) <=\": compilation failed: ERROR: <input>:1:21: Syntax error")
	_, err = c.ValidatingAdmissionPolicies().Create(ctx, policy(admissionregistrationv1.Validation{Expression: "true", MessageExpression: "1"}), metav1.CreateOptions{})
	assert.ErrorContains(t, err, "spec.validations[0].messageExpression: Invalid value: \"1\": must evaluate to string but got int")
	_, err = c.ValidatingAdmissionPolicies().Create(ctx, policy(admissionregistrationv1.Validation{Expression: "size(object.data) <= 1", MessageExpression: "'too many'"}), metav1.CreateOptions{})
	assert.NoError(t, err, "a policy that compiles")

	_, err = c.ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "hooks"}, Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "check.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: new("https://example.com/check")},
			SideEffects: new(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "only-params", Expression: "params != null"}},
		}}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	assert.ErrorContains(t, err, "webhooks[0].matchConditions[0].expression: Invalid value: \"params != null\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'params'")
}

// The validatingadmissionpolicy-status controller type-checks a policy's
// expressions against the kinds it matches and applies what it found to the
// status, as kube-controller-manager's: one warning per expression that does
// not compile, the generation observed, and again when the spec changes.
func TestValidatingAdmissionPolicyStatus(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	policies := clientset(t, srv).AdmissionregistrationV1().ValidatingAdmissionPolicies()
	policy, err := policies.Create(t.Context(), typedPolicy("deployments", "apps", "deployments",
		"object.spec.replicas >= 0", "object.spec.replicas > 'a'", "object.spec.nosuchfield == 1"), metav1.CreateOptions{})
	require.NoError(t, err)

	got := observed(t, srv, policy.Name)
	require.NotNil(t, got.Status.TypeChecking)
	require.Len(t, got.Status.TypeChecking.ExpressionWarnings, 2, "%+v", got.Status.TypeChecking)
	w := got.Status.TypeChecking.ExpressionWarnings
	assert.Equal(t, "spec.validations[1].expression", w[0].FieldRef)
	assert.Contains(t, w[0].Warning, "apps/v1, Kind=Deployment: ERROR: <input>:1:22: found no matching overload for '_>_' applied to '(int, string)'")
	assert.Equal(t, "spec.validations[2].expression", w[1].FieldRef)
	assert.Contains(t, w[1].Warning, "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'nosuchfield'")
	assert.True(t, slices.ContainsFunc(got.ManagedFields, func(m metav1.ManagedFieldsEntry) bool {
		return m.Manager == "validatingadmissionpolicy-status" && m.Operation == metav1.ManagedFieldsOperationApply && m.Subresource == "status"
	}), "the status is applied by validatingadmissionpolicy-status: %+v", got.ManagedFields)

	// A new generation is checked again: fixed, no warning is left.
	got.Spec.Validations = got.Spec.Validations[:1]
	_, err = policies.Update(t.Context(), got, metav1.UpdateOptions{})
	require.NoError(t, err)
	got = observed(t, srv, policy.Name)
	assert.Equal(t, int64(2), got.Status.ObservedGeneration)
	// Applied empty, typeChecking is dropped, as on kube-apiserver.
	assert.Nil(t, got.Status.TypeChecking)
}

// A policy on a custom resource is checked against its CRD's schema, which
// the controller reads from the server's OpenAPI.
func TestValidatingAdmissionPolicyStatusOfCustomResource(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	installGizmos(t, srv)
	policies := clientset(t, srv).AdmissionregistrationV1().ValidatingAdmissionPolicies()
	policy, err := policies.Create(t.Context(), typedPolicy("gizmos", "example.com", "gizmos",
		"object.spec.size > 1", "object.spec.size > 'a'"), metav1.CreateOptions{})
	require.NoError(t, err)

	got := observed(t, srv, policy.Name)
	require.NotNil(t, got.Status.TypeChecking)
	require.Len(t, got.Status.TypeChecking.ExpressionWarnings, 1, "%+v", got.Status.TypeChecking)
	w := got.Status.TypeChecking.ExpressionWarnings[0]
	assert.Equal(t, "spec.validations[1].expression", w.FieldRef)
	assert.Contains(t, w.Warning, "example.com/v1, Kind=Gizmo: ERROR: <input>:1:18: found no matching overload for '_>_' applied to '(int, string)'")
}

// typedPolicy is a policy on the v1 resource of group with one validation
// per expression.
func typedPolicy(name, group, resource string, expressions ...string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: []string{resource}}}}}},
		},
	}
	for _, e := range expressions {
		p.Spec.Validations = append(p.Spec.Validations, admissionregistrationv1.Validation{Expression: e})
	}
	return p
}

// observed returns the policy once the controllers are idle, failing unless
// its status has observed its generation.
func observed(t *testing.T, srv *apiserver.Server, name string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	apiservertest.WaitIdle(t, srv)
	p, err := clientset(t, srv).AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, p.Generation, p.Status.ObservedGeneration, "the status observes the policy's generation")
	return p
}

// installGizmos creates the CRD of example.com/v1 gizmos (spec.size, an
// integer) and waits until its schema is in the server's OpenAPI v3.
func installGizmos(t *testing.T, srv *apiserver.Server) {
	t.Helper()
	c, err := apiextensionsclient.NewForConfig(srv.RESTConfig())
	require.NoError(t, err)
	_, err = c.ApiextensionsV1().CustomResourceDefinitions().Create(t.Context(), &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gizmos.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gizmos", Singular: "gizmo", Kind: "Gizmo", ListKind: "GizmoList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}},
					}}}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	d := clientset(t, srv).Discovery()
	require.Eventually(t, func() bool {
		paths, err := d.OpenAPIV3().Paths()
		if _, ok := paths["apis/example.com/v1"]; !ok || err != nil {
			return false
		}
		_, err = d.ServerResourcesForGroupVersion("example.com/v1")
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "the CRD is served, with its schema in /openapi/v3")
}

// The pod plugins see the ServiceAccount and PriorityClass a client has
// just created or deleted, without waiting: they read their informers only
// once those hold every write (they failed in the first rounds when they
// read the informers alone).
func TestPodAdmissionReadsItsWrites(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	podOf := func(name, account, class string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{ServiceAccountName: account,
			PriorityClassName: class, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	}
	for i := range 20 {
		account, class := fmt.Sprintf("robot-%d", i), fmt.Sprintf("class-%d", i)
		_, err := c.CoreV1().ServiceAccounts("default").Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: account},
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: account}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = c.SchedulingV1().PriorityClasses().Create(t.Context(), &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: class},
			Value: int32(1000 + i)}, metav1.CreateOptions{})
		require.NoError(t, err)
		p, err := c.CoreV1().Pods("default").Create(t.Context(), podOf(fmt.Sprintf("p%d", i), account, class), metav1.CreateOptions{})
		require.NoError(t, err, "round %d: the pod after its account's and class's creation", i)
		assert.Equal(t, []corev1.LocalObjectReference{{Name: account}}, p.Spec.ImagePullSecrets, "round %d", i)
		assert.Equal(t, int32(1000+i), *p.Spec.Priority, "round %d", i)

		require.NoError(t, c.CoreV1().ServiceAccounts("default").Delete(t.Context(), account, metav1.DeleteOptions{}))
		require.NoError(t, c.SchedulingV1().PriorityClasses().Delete(t.Context(), class, metav1.DeleteOptions{}))
		_, err = c.CoreV1().Pods("default").Create(t.Context(), podOf(fmt.Sprintf("q%d", i), account, ""), metav1.CreateOptions{})
		require.True(t, apierrors.IsForbidden(err), "round %d: the pod after its account's deletion: %v", i, err)
		_, err = c.CoreV1().Pods("default").Create(t.Context(), podOf(fmt.Sprintf("r%d", i), "", class), metav1.CreateOptions{})
		require.True(t, apierrors.IsForbidden(err), "round %d: the pod after its class's deletion: %v", i, err)
	}
}
