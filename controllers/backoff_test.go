package controllers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/retry"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// A workload controller whose writes the server keeps refusing (here a
// validating webhook that denies them and counts its calls; controllers'
// requests skip fault injection) retries with its queue's exponential
// back-off (5 ms, doubling), never in a loop: over the two seconds after
// the first refusal it tries about ten times more, where a hot loop would
// try hundreds. The window is a measurement, not a wait for something to
// happen: load only lowers the count.
func TestRefusedWritesBackOff(t *testing.T) {
	t.Parallel()
	labels := map[string]string{"app": "a"}
	template := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
	selector := &metav1.LabelSelector{MatchLabels: labels}
	for _, tc := range []struct {
		name     string
		refused  admissionregistrationv1.RuleWithOperations
		workload func(ctx context.Context, c kubernetes.Interface) error
	}{
		{"deployment", refuse("apps", "replicasets"), func(ctx context.Context, c kubernetes.Interface) error {
			_, err := c.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "w"},
				Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: selector, Template: template}}, metav1.CreateOptions{})
			return err
		}},
		{"replicaset", refuse("", "pods"), func(ctx context.Context, c kubernetes.Interface) error {
			_, err := c.AppsV1().ReplicaSets("default").Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "w"},
				Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1), Selector: selector, Template: template}}, metav1.CreateOptions{})
			return err
		}},
		{"statefulset", refuse("", "pods"), func(ctx context.Context, c kubernetes.Interface) error {
			_, err := c.AppsV1().StatefulSets("default").Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "w"},
				Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Selector: selector, Template: template}}, metav1.CreateOptions{})
			return err
		}},
		{"daemonset", refuse("", "pods"), func(ctx context.Context, c kubernetes.Interface) error {
			_, err := c.AppsV1().DaemonSets("default").Create(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "w"},
				Spec: appsv1.DaemonSetSpec{Selector: selector, Template: template}}, metav1.CreateOptions{})
			return err
		}},
		{"job", refuse("", "pods"), func(ctx context.Context, c kubernetes.Interface) error {
			job := template.DeepCopy()
			job.Labels, job.Spec.RestartPolicy = nil, corev1.RestartPolicyNever
			_, err := c.BatchV1().Jobs("default").Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "w"},
				Spec: batchv1.JobSpec{Template: *job}}, metav1.CreateOptions{})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Nodes: controllers.Nodes(1)}))
			c, err := srv.Clientset()
			require.NoError(t, err)
			calls := denyWith(t, srv, c, tc.refused)
			require.NoError(t, tc.workload(t.Context(), c))
			first := calls.first(t)
			select {
			case <-time.After(time.Until(first.Add(2 * time.Second))):
			case <-t.Context().Done():
			}
			n := calls.since(first)
			t.Logf("%d tries in the two seconds from the first", n)
			assert.GreaterOrEqual(t, n, 2, "it retries")
			assert.LessOrEqual(t, n, 25, "it backs off")
		})
	}
}

func refuse(group, resource string) admissionregistrationv1.RuleWithOperations {
	return admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{resource}}}
}

// webhookCalls are the times a denying webhook was called for objects of
// the workload (the probe's dry runs aside).
type webhookCalls struct {
	mu    sync.Mutex
	times []time.Time
}

func (w *webhookCalls) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(rw, "bad review", http.StatusBadRequest)
		return
	}
	if review.Request.DryRun == nil || !*review.Request.DryRun {
		w.mu.Lock()
		w.times = append(w.times, time.Now())
		w.mu.Unlock()
	}
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: false,
		Result: &metav1.Status{Code: http.StatusForbidden, Message: "refused by the test"}}
	_ = json.NewEncoder(rw).Encode(review)
}

// first waits (at most 30 s) for the first call and returns its time.
func (w *webhookCalls) first(t *testing.T) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var first time.Time
	require.NoError(t, retry.Until(ctx, func(context.Context) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.times) == 0 {
			return errors.New("no call yet")
		}
		first = w.times[0]
		return nil
	}))
	return first
}

func (w *webhookCalls) since(t time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, at := range w.times {
		if !at.Before(t) {
			n++
		}
	}
	return n
}

// denyWith serves a webhook that denies rule in namespace default, and
// returns once it is in force (a dry-run create of a probe is refused).
func denyWith(t *testing.T, srv *apiserver.Server, c kubernetes.Interface, rule admissionregistrationv1.RuleWithOperations) *webhookCalls {
	t.Helper()
	calls := &webhookCalls{}
	ca := apiservertest.ServeService(t, srv, "default", "deny", calls)
	_, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(t.Context(), &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "deny"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "deny.example.com", Rules: []admissionregistrationv1.RuleWithOperations{rule},
			ClientConfig:      admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "default", Name: "deny"}, CABundle: ca},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "default"}},
			SideEffects:       ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	require.NoError(t, retry.Until(ctx, func(ctx context.Context) error {
		return probe(ctx, c, rule.Rule.Resources[0])
	}))
	return calls
}

// probe dry-runs a create of resource and wants it refused by the webhook.
func probe(ctx context.Context, c kubernetes.Interface, resource string) error {
	pod := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"probe": "p"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	var err error
	if resource == "pods" {
		_, err = c.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Spec: pod.Spec}, dry)
	} else {
		_, err = c.AppsV1().ReplicaSets("default").Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "probe"},
			Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: pod.Labels}, Template: pod}}, dry)
	}
	if err != nil && strings.Contains(err.Error(), "refused by the test") {
		return nil
	}
	return fmt.Errorf("the webhook is not in force yet: %v", err)
}
