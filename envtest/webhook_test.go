package envtest_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kubeembed/apiserver/envtest"
)

// serveWebhooks runs controller-runtime's webhook server where envtest
// told it to, with the handlers, until the test ends, and returns once it
// accepts TLS connections (as kubebuilder's scaffolded suite waits).
func serveWebhooks(t *testing.T, o envtest.WebhookInstallOptions, handlers map[string]http.Handler) {
	t.Helper()
	// The certificate envtest wrote, loaded once. Left to the server (its
	// CertDir), controller-runtime's certificate watcher runs an fsnotify
	// goroutine that ends after the server's Start has returned, and never
	// when the server stops while the watcher still adds its watches:
	// TestNoGoroutineLeakAfterStop saw it (CI, 2026-12-07).
	pair, err := tls.LoadX509KeyPair(filepath.Join(o.LocalServingCertDir, "tls.crt"), filepath.Join(o.LocalServingCertDir, "tls.key"))
	require.NoError(t, err)
	srv := webhook.NewServer(webhook.Options{Host: o.LocalServingHost, Port: o.LocalServingPort, TLSOpts: []func(*tls.Config){
		func(c *tls.Config) {
			c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &pair, nil }
		},
	}})
	for path, h := range handlers {
		srv.Register(path, h)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
	})
	addr := net.JoinHostPort(o.LocalServingHost, strconv.Itoa(o.LocalServingPort))
	require.Eventually(t, func() bool {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a readiness probe
		if err != nil {
			return false
		}
		return conn.Close() == nil
	}, 10*time.Second, 10*time.Millisecond, "webhook server never listened on %s", addr)
}

type denyConfigMaps struct{}

func (denyConfigMaps) Handle(_ context.Context, req admission.Request) admission.Response {
	return admission.Denied("no config maps named " + req.Name)
}

// The webhook configurations of config/webhook address a Service; Start
// points them at the local webhook server with its generated CA, and the
// API server calls it.
func TestWebhookInstall(t *testing.T) {
	t.Parallel()
	te := &envtest.Environment{WebhookInstallOptions: envtest.WebhookInstallOptions{
		Paths: []string{filepath.Join("testdata", "webhooks")}}}
	c := clientsetFor(t, start(t, te))
	o := te.WebhookInstallOptions
	require.Len(t, o.ValidatingWebhooks, 1)
	cc := o.ValidatingWebhooks[0].Webhooks[0].ClientConfig
	assert.Nil(t, cc.Service)
	assert.Equal(t, fmt.Sprintf("https://127.0.0.1:%d/validate-v1-configmap", o.LocalServingPort), *cc.URL)
	assert.Equal(t, o.LocalServingCAData, cc.CABundle)
	serveWebhooks(t, o, map[string]http.Handler{"/validate-v1-configmap": &webhook.Admission{Handler: denyConfigMaps{}}})

	ctx := t.Context()
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "hooked",
		Labels: map[string]string{"webhook": "on"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}
	require.Eventually(t, func() bool { // the server's webhook informer sees the configuration
		_, err = c.CoreV1().ConfigMaps("hooked").Create(ctx, cm, metav1.CreateOptions{})
		return err != nil
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, `admission webhook "vconfigmap.kb.io" denied the request: no config maps named cm`, err.Error())
	_, err = c.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
	assert.NoError(t, err, "outside the namespace selector")
}

// convertGadgets converts example.com Gadgets between v1 (spec.size) and
// v2 (spec.replicas): a ConversionReview handler, as a CRD's conversion
// webhook.
func convertGadgets(w http.ResponseWriter, r *http.Request) {
	var review apiextensionsv1.ConversionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	from, to := map[string]string{"example.com/v1": "size", "example.com/v2": "replicas"}, review.Request.DesiredAPIVersion
	for _, raw := range review.Request.Objects {
		var obj unstructured.Unstructured
		if err := obj.UnmarshalJSON(raw.Raw); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if v, ok, _ := unstructured.NestedInt64(obj.Object, "spec", from[obj.GetAPIVersion()]); ok {
			unstructured.RemoveNestedField(obj.Object, "spec", from[obj.GetAPIVersion()])
			_ = unstructured.SetNestedField(obj.Object, v, "spec", from[to])
		}
		obj.SetAPIVersion(to)
		b, _ := obj.MarshalJSON()
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: b})
	}
	review.Response, review.Request = resp, nil
	_ = json.NewEncoder(w).Encode(&review)
}

// IgnoreSchemeConvertible points every CRD's conversion at the webhook
// server's /convert, with the generated CA: the API server converts
// through it on write and read.
func TestConversionWebhook(t *testing.T) {
	t.Parallel()
	te := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("testdata", "crds")},
		WebhookInstallOptions: envtest.WebhookInstallOptions{IgnoreSchemeConvertible: true}}
	cfg := start(t, te)
	for _, crd := range te.CRDs {
		require.NotNil(t, crd.Spec.Conversion, crd.Name)
		assert.Equal(t, apiextensionsv1.WebhookConverter, crd.Spec.Conversion.Strategy, crd.Name)
	}
	serveWebhooks(t, te.WebhookInstallOptions, map[string]http.Handler{"/convert": http.HandlerFunc(convertGadgets)})

	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	v1 := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}
	v2 := schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "gadgets"}
	g := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v2", "kind": "Gadget",
		"metadata": map[string]any{"name": "g"}, "spec": map[string]any{"replicas": int64(3)}}}
	_, err = dyn.Resource(v2).Namespace("default").Create(t.Context(), g, metav1.CreateOptions{})
	require.NoError(t, err, "written as v2, stored as v1 through the webhook")
	stored, err := dyn.Resource(v1).Namespace("default").Get(t.Context(), "g", metav1.GetOptions{})
	require.NoError(t, err)
	size, _, _ := unstructured.NestedInt64(stored.Object, "spec", "size")
	assert.Equal(t, int64(3), size)
}
