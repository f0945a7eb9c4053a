package apiservertest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// ExampleStart lists the namespaces every server starts with. In a test, pass
// the *testing.T (or Ginkgo's GinkgoT()): the server is handed back for the
// next test (or closed) when the test ends. Here a minimal TB stands in for
// it.
func ExampleStart() {
	t := &exampleT{}
	defer t.cleanup()

	srv := apiservertest.Start(t)
	client, err := srv.Clientset()
	if err != nil {
		t.Fatalf("%v", err)
	}
	list, err := client.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("%v", err)
	}
	for _, ns := range list.Items {
		fmt.Println(ns.Name, ns.Status.Phase)
	}
	// Output:
	// default Active
	// kube-node-lease Active
	// kube-public Active
	// kube-system Active
}

// exampleT is the smallest apiservertest.TB.
type exampleT struct{ cleanups []func() }

func (t *exampleT) Helper()                           {}
func (t *exampleT) Cleanup(f func())                  { t.cleanups = append(t.cleanups, f) }
func (t *exampleT) Fatalf(format string, args ...any) { log.Fatalf(format, args...) }
func (t *exampleT) Logf(string, ...any)               {}
func (t *exampleT) Context() context.Context          { return context.Background() }

func (t *exampleT) cleanup() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}

// ExampleServeMetrics feeds metrics.k8s.io from the test and reads it back
// through the API server, as kubectl top and an HPA's metrics client do.
func ExampleServeMetrics() {
	t := &exampleT{}
	defer t.cleanup()

	srv := apiservertest.Start(t)
	metrics := apiservertest.ServeMetrics(t, srv)
	metrics.SetPodMetrics("default", "web", map[string]corev1.ResourceList{
		"app": {corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")}})

	mc, err := metricsclient.NewForConfig(srv.RESTConfig())
	if err != nil {
		t.Fatalf("%v", err)
	}
	pm, err := mc.MetricsV1beta1().PodMetricses("default").Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("%v", err)
	}
	fmt.Println(pm.Name, pm.Containers[0].Name, pm.Containers[0].Usage.Cpu(), pm.Containers[0].Usage.Memory())
	// Output: web app 250m 64Mi
}

// ExampleServeService serves a validating webhook as the Service
// system/webhook-service, and installs the webhook configuration a project
// ships (clientConfig.service) with the returned caBundle.
func ExampleServeService() {
	t := &exampleT{}
	defer t.cleanup()

	srv := apiservertest.Start(t)
	deny := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		_ = json.NewDecoder(r.Body).Decode(&review)
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID,
			Result: &metav1.Status{Message: "read-only cluster", Code: http.StatusForbidden}}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(&review)
	})
	caBundle := apiservertest.ServeService(t, srv, "system", "webhook-service", deny)

	client, err := srv.Clientset()
	if err != nil {
		t.Fatalf("%v", err)
	}
	none, fail := admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.Fail
	_, err = client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(t.Context(), &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "deny"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "deny.example.com", AdmissionReviewVersions: []string{"v1"},
			SideEffects: &none, FailurePolicy: &fail,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: caBundle,
				Service: &admissionregistrationv1.ServiceReference{Namespace: "system", Name: "webhook-service"}},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("%v", err)
	}
	// The admission plugin sees a new configuration through its informer:
	// retry the (dry-run) create until the webhook answers.
	_ = wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err = client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil, nil
	})
	fmt.Println(err)
	// Output: admission webhook "deny.example.com" denied the request: read-only cluster
}
