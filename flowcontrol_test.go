package apiserver_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"fmt"
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
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fcbootstrap "k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// headers returns the status and headers of a GET of path.
func headers(t *testing.T, cfg *rest.Config, path string) (int, http.Header) {
	t.Helper()
	code, h, _ := fetch(t, cfg, path)
	return code, h
}

func TestPriorityAndFairnessClassifies(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	fc := c.FlowcontrolV1()
	exempt, err := fc.FlowSchemas().Get(t.Context(), "exempt", metav1.GetOptions{})
	require.NoError(t, err, "the mandatory configuration exists when Start returns")
	for _, name := range []string{"catch-all", "global-default", "workload-low", "leader-election"} {
		_, err := fc.PriorityLevelConfigurations().Get(t.Context(), name, metav1.GetOptions{})
		assert.NoError(t, err, "bootstrap priority level %s", name)
	}
	// The filter classifies with the mandatory configuration at once, and
	// names its objects' UIDs once the configuration controller has seen
	// them stored (as on kube-apiserver, a moment after readiness).
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, h := headers(t, srv.RESTConfig(), "/api/v1/namespaces")
		require.Equal(c, http.StatusOK, code)
		assert.Equal(c, string(exempt.UID), h.Get("X-Kubernetes-PF-FlowSchema-UID"), "system:masters is exempt")
		assert.NotEmpty(c, h.Get("X-Kubernetes-PF-PriorityLevel-UID"))
	}, 10*time.Second, 10*time.Millisecond)

	// A FlowSchema for a priority level that does not exist is dangling
	// (named anew: see TestWaitIdleCoversFlowSchemaStatus).
	name := uniqueFlowSchemaName("dangling")
	_, err = fc.FlowSchemas().Create(t.Context(), &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: flowcontrolv1.FlowSchemaSpec{PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "missing"}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		fs, err := fc.FlowSchemas().Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(c, err)
		require.Len(c, fs.Status.Conditions, 1)
		assert.Equal(c, flowcontrolv1.FlowSchemaConditionType(flowcontrolv1.FlowSchemaConditionDangling), fs.Status.Conditions[0].Type)
		assert.Equal(c, flowcontrolv1.ConditionTrue, fs.Status.Conditions[0].Status)
		assert.Equal(c, "NotFound", fs.Status.Conditions[0].Reason)
	}, 10*time.Second, 10*time.Millisecond, "the configuration controller writes the condition")
}

// WaitIdle returns once priority and fairness has written the Dangling
// condition of the FlowSchemas written before it (its configuration
// controller writes from a queue of its own): a snapshot taken then holds
// the statuses, and every FlowSchema of a just-started server has one.
// The FlowSchema's name is new to the server: it may be a reused one,
// whose priority and fairness delays the status write of a name written
// more than 5 times in a minute (-count=3 does).
func TestWaitIdleCoversFlowSchemaStatus(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	later := uniqueFlowSchemaName("later")
	fc := clientset(t, srv).FlowcontrolV1()
	dangling := func(name string) flowcontrolv1.FlowSchemaCondition {
		t.Helper()
		fs, err := fc.FlowSchemas().Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Len(t, fs.Status.Conditions, 1, "FlowSchema %s", name)
		return fs.Status.Conditions[0]
	}
	apiservertest.WaitIdle(t, srv)
	all, err := fc.FlowSchemas().List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	for _, fs := range all.Items {
		assert.Equal(t, "Found", dangling(fs.Name).Reason, "FlowSchema %s once started", fs.Name)
	}

	_, err = fc.FlowSchemas().Create(t.Context(), &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: later},
		Spec: flowcontrolv1.FlowSchemaSpec{PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: later}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	c := dangling(later)
	assert.Equal(t, flowcontrolv1.ConditionTrue, c.Status)
	assert.Equal(t, "NotFound", c.Reason)
	assert.Equal(t, fmt.Sprintf("This FlowSchema references the PriorityLevelConfiguration object named %q but there is no such object", later), c.Message)

	_, err = fc.PriorityLevelConfigurations().Create(t.Context(), &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: later},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	c = dangling(later)
	assert.Equal(t, flowcontrolv1.ConditionFalse, c.Status)
	assert.Equal(t, fmt.Sprintf("This FlowSchema references the PriorityLevelConfiguration object named %q and it exists", later), c.Message)
}

// Priority and fairness puts off the status write of a FlowSchema written
// more than 5 times in a minute, 30 to 75 s: WaitIdle does not wait for
// that (it ran out at 30 s), as for other work put off on purpose. Here its
// priority level comes and goes until the controller holds the write back.
func TestWaitIdleLeavesAHeldBackFlowSchemaStatus(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t, apiservertest.WithNewServer())
	fc := clientset(t, srv).FlowcontrolV1()
	name := uniqueFlowSchemaName("flapping")
	_, err := fc.FlowSchemas().Create(t.Context(), &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: flowcontrolv1.FlowSchemaSpec{PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: name}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv) // its first write: NotFound
	level := &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}}}}
	reasons := []string{}
	for range 4 {
		for _, exists := range []bool{true, false} {
			if exists {
				_, err = fc.PriorityLevelConfigurations().Create(t.Context(), level, metav1.CreateOptions{})
			} else {
				err = fc.PriorityLevelConfigurations().Delete(t.Context(), name, metav1.DeleteOptions{})
			}
			require.NoError(t, err)
			apiservertest.WaitIdle(t, srv)
			fs, err := fc.FlowSchemas().Get(t.Context(), name, metav1.GetOptions{})
			require.NoError(t, err)
			reasons = append(reasons, fs.Status.Conditions[0].Reason)
		}
	}
	assert.Equal(t, []string{"Found", "NotFound", "Found", "NotFound", "Found", "Found", "Found", "Found"}, reasons,
		"written 6 times (NotFound at create, then 5 changes), the 7th write is held back")
}

// slowWriterName is a user the tests' FlowSchemas send to a slow
// priority level; an admin's requests (system:masters) are exempt, and
// only the exempt FlowSchema may have precedence 1.
const slowWriterName = "slow-writer"

// slowWriter returns the configuration of slowWriterName, bound to
// cluster-admin.
func slowWriter(t *testing.T, srv *apiserver.Server) *rest.Config {
	t.Helper()
	_, err := clientset(t, srv).RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: slowWriterName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: slowWriterName}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	cfg, err := srv.RESTConfigFor(&user.DefaultInfo{Name: slowWriterName})
	require.NoError(t, err)
	return cfg
}

// slowFlow makes a FlowSchema sending slowWriterName's requests of verb on
// ConfigMaps in "slow" to the priority level named level, ahead of every
// other FlowSchema it could match.
func slowFlow(t *testing.T, srv *apiserver.Server, level, verb string) *flowcontrolv1.FlowSchema {
	t.Helper()
	fs, err := clientset(t, srv).FlowcontrolV1().FlowSchemas().Create(t.Context(), &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: "slow"},
		Spec: flowcontrolv1.FlowSchemaSpec{PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: level},
			MatchingPrecedence: 2,
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: slowWriterName}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{verb}, APIGroups: []string{""},
					Resources: []string{"configmaps"}, Namespaces: []string{"slow"}}},
			}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return fs
}

// uniqueFlowSchemaName is prefix and a random suffix.
func uniqueFlowSchemaName(prefix string) string {
	return prefix + "-" + strings.ToLower(rand.Text()[:8])
}

// post creates a ConfigMap named name in namespace ns with a raw request,
// and returns the status and headers.
func post(t *testing.T, cfg *rest.Config, ns, name string) (int, http.Header) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return 0, nil
	}
	body := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q}}`, name)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, cfg.Host+"/api/v1/namespaces/"+ns+"/configmaps", strings.NewReader(body))
	if err != nil {
		return 0, nil
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil
	}
	_ = resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// holdingWebhook is a validating webhook that holds the creates of
// ConfigMaps named "hold" until the test ends: each holds a seat of its
// priority level meanwhile.
func holdingWebhook(t *testing.T, c kubernetes.Interface, ns string) (held <-chan struct{}) {
	heldCh, release := make(chan struct{}, 10), make(chan struct{})
	hook := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		_ = json.NewDecoder(r.Body).Decode(&review)
		if review.Request.Name == "hold" {
			heldCh <- struct{}{}
			<-release
		}
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		_ = json.NewEncoder(w).Encode(review)
	}))
	t.Cleanup(hook.Close)
	t.Cleanup(func() { close(release) }) // before hook.Close, which waits for handlers
	none := admissionregistrationv1.SideEffectClassNone
	_, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(t.Context(), &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "hold"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "hold.example.com", SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr(hook.URL),
				CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hook.Certificate().Raw})},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return heldCh
}

// A saturated priority level rejects what its FlowSchema sends it, with 429
// and Retry-After; other flows go on.
func TestPriorityAndFairnessRejects(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	fc := c.FlowcontrolV1()
	_, err := c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "slow"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	held := holdingWebhook(t, c, "slow")
	_, err = fc.PriorityLevelConfigurations().Create(t.Context(), &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "one-seat"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: ptr(int32(0)),
				LendablePercent: ptr(int32(0)), BorrowingLimitPercent: ptr(int32(0)),
				LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	fs := slowFlow(t, srv, "one-seat", "create")
	cfg := slowWriter(t, srv)
	i := 0
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		i++
		_, h := post(t, cfg, "slow", fmt.Sprintf("probe-%d", i))
		assert.Equal(c, string(fs.UID), h.Get("X-Kubernetes-PF-FlowSchema-UID"), "the new configuration applies")
	}, 10*time.Second, 10*time.Millisecond)

	// Hold seats until the level is full; then it rejects.
	for range 5 {
		answered := make(chan int, 1)
		go func() { code, _ := post(t, cfg, "slow", "hold"); answered <- code }()
		select {
		case <-held:
		case code := <-answered:
			// Answered without reaching the webhook: the seats are taken
			// (a slow machine let an earlier hold keep its seat).
			require.Equal(t, http.StatusTooManyRequests, code, "a hold answered before the webhook held it")
		case <-time.After(30 * time.Second):
			t.Fatal("the hold never reached the webhook")
		}
		code, h := post(t, cfg, "slow", "next")
		if code == http.StatusTooManyRequests {
			assert.NotEmpty(t, h.Get("Retry-After"))
			assert.Equal(t, string(fs.UID), h.Get("X-Kubernetes-PF-FlowSchema-UID"))
			code, _ := post(t, cfg, "default", "other")
			assert.Equal(t, http.StatusCreated, code, "other flows are not affected")
			return
		}
	}
	t.Fatal("the priority level never rejected")
}

func TestWithoutPriorityAndFairness(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{DisablePriorityAndFairness: true}))
	code, h := headers(t, srv.RESTConfig(), "/api/v1/namespaces")
	require.Equal(t, http.StatusOK, code)
	assert.Empty(t, h.Get("X-Kubernetes-PF-FlowSchema-UID"))
	list, err := clientset(t, srv).FlowcontrolV1().FlowSchemas().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, list.Items, "no bootstrap configuration")
	_, body := get(t, srv.RESTConfig(), "/readyz?verbose")
	assert.Contains(t, body, "[+]poststarthook/max-in-flight-filter ok")
	assert.NotContains(t, body, "priority-and-fairness")
}

// The bootstrap configuration is all there at Start, with its writer's
// field manager, and the producer read what existed from the server's
// informers, as kube-apiserver's ensurer reads its listers: no GET of a
// flow schema or a priority level (until 2026-12-06, one of each of the
// 19 objects at every start and every minute).
func TestPriorityAndFairnessBootstrapReadsInformers(t *testing.T) {
	t.Parallel()
	// A new server: /metrics counts every request since the server
	// started, and a pooled one served earlier tests' GETs.
	srv := apiservertest.Start(t, apiservertest.WithNewServer())
	fc := clientset(t, srv).FlowcontrolV1()
	levels, err := fc.PriorityLevelConfigurations().List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	schemas, err := fc.FlowSchemas().List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, levels.Items, len(fcbootstrap.MandatoryPriorityLevelConfigurations)+len(fcbootstrap.SuggestedPriorityLevelConfigurations))
	assert.Len(t, schemas.Items, len(fcbootstrap.MandatoryFlowSchemas)+len(fcbootstrap.SuggestedFlowSchemas))
	for _, pl := range levels.Items {
		require.NotEmpty(t, pl.ManagedFields, pl.Name)
		assert.Equal(t, "api-priority-and-fairness-config-producer-v1", pl.ManagedFields[0].Manager, pl.Name)
	}
	for labels, n := range metricsOf(t, srv, "apiserver_request_total") {
		if strings.Contains(labels, "group=flowcontrol.apiserver.k8s.io") && strings.Contains(labels, "verb=GET") {
			assert.Zero(t, n, labels)
		}
	}
}
