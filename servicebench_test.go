package apiserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// admitAll answers AdmissionReviews: /mutate labels the object, /validate
// allows it; validated counts the validations.
func admitAll(validated *atomic.Int64) http.Handler {
	patch := []byte(`[{"op":"add","path":"/metadata/labels","value":{"mutated":"yes"}}]`)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		if r.URL.Path == "/mutate" {
			pt := admissionv1.PatchTypeJSONPatch
			resp.Patch, resp.PatchType = patch, &pt
		} else {
			validated.Add(1)
		}
		review.Request, review.Response = nil, resp
		_ = json.NewEncoder(w).Encode(&review)
	})
}

// installAdmitAll registers a mutating and a validating webhook on config
// maps, both reached through the Service system/webhook-service.
func installAdmitAll(b *testing.B, srv *apiserver.Server, ca []byte) {
	c, err := srv.Clientset()
	if err != nil {
		b.Fatal(err)
	}
	none := admissionregistrationv1.SideEffectClassNone
	cc := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{CABundle: ca,
			Service: &admissionregistrationv1.ServiceReference{Namespace: "system", Name: "webhook-service", Path: new(path)}}
	}
	rules := []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}
	ctx := context.Background()
	if _, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "m"}, Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "m.example.com",
			AdmissionReviewVersions: []string{"v1"}, SideEffects: &none, ClientConfig: cc("/mutate"), Rules: rules}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "v"}, Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "v.example.com",
			AdmissionReviewVersions: []string{"v1"}, SideEffects: &none, ClientConfig: cc("/validate"), Rules: rules}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkCreateThroughWebhooksByService is a ConfigMap create through a
// mutating and a validating webhook reached through their Service (p50 in
// p50-µs), beside the same create without webhooks on another server.
func BenchmarkCreateThroughWebhooksByService(b *testing.B) {
	hooked := startServer(b, apiserver.Options{})
	b.Cleanup(func() { _ = hooked.Close() })
	var validated atomic.Int64
	installAdmitAll(b, hooked, apiservertest.ServeService(b, hooked, "system", "webhook-service", admitAll(&validated)))
	plain := startServer(b, apiserver.Options{})
	b.Cleanup(func() { _ = plain.Close() })
	for _, s := range []struct {
		name string
		srv  *apiserver.Server
	}{{"no-webhooks", plain}, {"two-webhooks-by-service", hooked}} {
		c, err := s.srv.Clientset()
		if err != nil {
			b.Fatal(err)
		}
		i := 0
		b.Run(s.name, func(b *testing.B) {
			var d []time.Duration
			for b.Loop() {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}
				i++
				start := time.Now()
				if _, err := c.CoreV1().ConfigMaps("default").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
				d = append(d, time.Since(start))
			}
			reportP50(b, d)
		})
	}
	if validated.Load() == 0 {
		b.Fatal("the webhooks were never called")
	}
}

// BenchmarkGetThroughAggregator is a get of pod metrics through the
// aggregator's proxy to apiservertest.ServeMetrics (p50 in p50-µs).
func BenchmarkGetThroughAggregator(b *testing.B) {
	srv := startServer(b, apiserver.Options{})
	b.Cleanup(func() { _ = srv.Close() })
	m := apiservertest.ServeMetrics(b, srv)
	m.SetPodMetrics("default", "web", map[string]corev1.ResourceList{"c": usage("1", "1Gi")})
	mc, err := metricsclient.NewForConfig(srv.RESTConfig())
	if err != nil {
		b.Fatal(err)
	}
	var d []time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := mc.MetricsV1beta1().PodMetricses("default").Get(context.Background(), "web", metav1.GetOptions{}); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(start))
	}
	reportP50(b, d)
}
