package apiserver_test

import (
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
