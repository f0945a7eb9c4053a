package podautoscaler_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

type env struct {
	srv     *apiserver.Server
	c       kubernetes.Interface
	clock   *clocktesting.FakeClock
	metrics *apiservertest.Metrics
}

// start starts a server whose Deployments' pods run, with the HPA
// controller on a fake clock and metrics.k8s.io served by the test. The
// clock is 10 minutes behind: the metrics' timestamps (the real time) are
// then more than a metric window after the pods became Ready (the fake
// time), so that their cpu counts during the initialisation period, as on
// a cluster where metrics-server scrapes after pods start.
func start(t *testing.T) *env {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Now().Add(-10 * time.Minute))
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Nodes: controllers.Nodes(2), Clock: clk,
		Controllers: []controllers.Name{controllers.ServiceAccount, controllers.Kubelet, controllers.Scheduler, controllers.NodeLifecycle,
			controllers.GarbageCollector, controllers.Deployment, controllers.ReplicaSet, controllers.HorizontalPodAutoscaling}}))
	c, err := srv.Clientset()
	require.NoError(t, err)
	return &env{srv: srv, c: c, clock: clk, metrics: apiservertest.ServeMetrics(t, srv)}
}

var web = map[string]string{"app": "web"}

// deployment creates Deployment web of replicas pods requesting 100m of
// cpu, and waits for them to run.
func (e *env) deployment(t *testing.T, replicas int32) {
	t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: web},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: web}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "nginx:1.27", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}}}}}
	_, err := e.c.AppsV1().Deployments("default").Create(t.Context(), d, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, e.srv)
}

// setCPU sets the cpu usage of every pod of web to milli millicores and
// returns how many there are.
func (e *env) setCPU(t *testing.T, milli int64) int {
	t.Helper()
	pods, err := e.c.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: "app=web"})
	require.NoError(t, err)
	for _, p := range pods.Items {
		e.metrics.SetPodMetrics("default", p.Name, map[string]corev1.ResourceList{"app": {corev1.ResourceCPU: *resource.NewMilliQuantity(milli, resource.DecimalSI)}})
	}
	return len(pods.Items)
}

func hpa(minReplicas, maxReplicas, utilization int32) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To(minReplicas), MaxReplicas: maxReplicas,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(utilization)}}}}}}
}

func (e *env) create(t *testing.T, h *autoscalingv2.HorizontalPodAutoscaler) {
	t.Helper()
	_, err := e.c.AutoscalingV2().HorizontalPodAutoscalers("default").Create(t.Context(), h, metav1.CreateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, e.srv)
}

func (e *env) hpa(t *testing.T) *autoscalingv2.HorizontalPodAutoscaler {
	t.Helper()
	h, err := e.c.AutoscalingV2().HorizontalPodAutoscalers("default").Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	return h
}

func (e *env) replicas(t *testing.T) int32 {
	t.Helper()
	d, err := e.c.AppsV1().Deployments("default").Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	return *d.Spec.Replicas
}

// condition is "Status Reason: message" of the HPA's condition ct.
func condition(h *autoscalingv2.HorizontalPodAutoscaler, ct autoscalingv2.HorizontalPodAutoscalerConditionType) string {
	for _, c := range h.Status.Conditions {
		if c.Type == ct {
			return string(c.Status) + " " + c.Reason + ": " + c.Message
		}
	}
	return "none"
}

// events are "Type Reason: message" of the HPA's events, sorted.
func (e *env) events(t *testing.T) []string {
	t.Helper()
	list, err := e.c.CoreV1().Events("default").List(t.Context(), metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.kind": "HorizontalPodAutoscaler", "involvedObject.name": "web"}.String()})
	require.NoError(t, err)
	var out []string
	for _, ev := range list.Items {
		assert.Equal(t, "horizontal-pod-autoscaler", ev.Source.Component)
		out = append(out, ev.Type+" "+ev.Reason+": "+ev.Message)
	}
	sort.Strings(out)
	return out
}

// High cpu scales the Deployment up, by at most double (or 4) at once;
// the status, conditions and event say so as upstream's do.
func TestScalesUpFromHighCPU(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.deployment(t, 2)
	require.Equal(t, 2, e.setCPU(t, 200)) // 200 % of the request, the target is 50 %
	e.create(t, hpa(1, 10, 50))

	assert.Equal(t, int32(4), e.replicas(t))
	h := e.hpa(t)
	assert.Equal(t, int32(2), h.Status.CurrentReplicas)
	assert.Equal(t, int32(4), h.Status.DesiredReplicas)
	require.NotNil(t, h.Status.LastScaleTime)
	assert.Equal(t, ptr.To(h.Generation), h.Status.ObservedGeneration)
	require.Len(t, h.Status.CurrentMetrics, 1)
	cur := h.Status.CurrentMetrics[0].Resource
	require.NotNil(t, cur)
	assert.Equal(t, ptr.To[int32](200), cur.Current.AverageUtilization)
	assert.Equal(t, "200m", cur.Current.AverageValue.String())
	assert.Equal(t, "True SucceededRescale: the HPA controller was able to update the target scale to 4", condition(h, autoscalingv2.AbleToScale))
	assert.Equal(t, "True ValidMetricFound: the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)",
		condition(h, autoscalingv2.ScalingActive))
	assert.Equal(t, "True ScaleUpLimit: the desired replica count is increasing faster than the maximum scale rate", condition(h, autoscalingv2.ScalingLimited))
	assert.Equal(t, "False NotScaledToZero: the HPA controller did not scale the workload to zero", condition(h, autoscalingv2.ScaledToZero))
	assert.Equal(t, []string{"Normal SuccessfulRescale: New size: 4; reason: cpu resource utilization (percentage of request) above target"}, e.events(t))
}

// A usage within the tolerance (10 %) of the target changes nothing.
func TestToleranceHolds(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.deployment(t, 2)
	e.setCPU(t, 54) // 54 % for a target of 50 %: a ratio of 1.08
	e.create(t, hpa(1, 10, 50))

	assert.Equal(t, int32(2), e.replicas(t))
	h := e.hpa(t)
	assert.Equal(t, int32(2), h.Status.DesiredReplicas)
	assert.Nil(t, h.Status.LastScaleTime)
	assert.Equal(t, "True ReadyForNewScale: recommended size matches current size", condition(h, autoscalingv2.AbleToScale))
	assert.Equal(t, "False DesiredWithinRange: the desired count is within the acceptable range", condition(h, autoscalingv2.ScalingLimited))
	assert.Equal(t, "none", condition(h, autoscalingv2.ScaledToZero))
	assert.Empty(t, e.events(t))
}

// Low usage scales down only once the 5 minute stabilisation window has
// passed the last higher recommendation, on the server's clock.
func TestScalesDownAfterStabilizationWindow(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.deployment(t, 4)
	e.setCPU(t, 10) // 10 % for a target of 50 %: 1 replica would do
	e.create(t, hpa(1, 10, 50))

	assert.Equal(t, int32(4), e.replicas(t))
	assert.Equal(t, "True ScaleDownStabilized: recent recommendations were higher than current one, applying the highest recent recommendation",
		condition(e.hpa(t), autoscalingv2.AbleToScale))

	apiservertest.StepClock(t, e.srv, e.clock, 299*time.Second)
	assert.Equal(t, int32(4), e.replicas(t), "within the window")
	apiservertest.StepClock(t, e.srv, e.clock, 16*time.Second)
	assert.Equal(t, int32(1), e.replicas(t), "the window passed")
	h := e.hpa(t)
	assert.Equal(t, "True SucceededRescale: the HPA controller was able to update the target scale to 1", condition(h, autoscalingv2.AbleToScale))
	assert.Contains(t, e.events(t), "Normal SuccessfulRescale: New size: 1; reason: All metrics below target")
}

// maxReplicas caps a scale up, ScalingLimited says why.
func TestMaxReplicasLimits(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.deployment(t, 2)
	e.setCPU(t, 400)
	e.create(t, hpa(1, 3, 50))

	assert.Equal(t, int32(3), e.replicas(t))
	assert.Equal(t, "True TooManyReplicas: the desired replica count is more than the maximum replica count", condition(e.hpa(t), autoscalingv2.ScalingLimited))
}

// minReplicas floors a scale down (without stabilisation: the behavior's
// scale-down window is 0).
func TestMinReplicasLimits(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.deployment(t, 3)
	e.setCPU(t, 5)
	h := hpa(2, 5, 50)
	h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)}}
	e.create(t, h)

	assert.Equal(t, int32(2), e.replicas(t))
	h = e.hpa(t)
	assert.Equal(t, "True TooFewReplicas: the desired replica count is less than the minimum replica count", condition(h, autoscalingv2.ScalingLimited))
	assert.Equal(t, []string{"Normal SuccessfulRescale: New size: 2; reason: All metrics below target"}, e.events(t))
}

// A Deployment outside minReplicas and maxReplicas is brought within
// them without metrics.
func TestOutsideRangeWithoutMetrics(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.deployment(t, 4)
	e.create(t, hpa(1, 2, 50))

	assert.Equal(t, int32(2), e.replicas(t))
	h := e.hpa(t)
	assert.Equal(t, "True SucceededRescale: the HPA controller was able to update the target scale to 2", condition(h, autoscalingv2.AbleToScale))
	assert.Equal(t, "none", condition(h, autoscalingv2.ScalingActive))
	assert.Equal(t, []string{"Normal SuccessfulRescale: New size: 2; reason: Current number of replicas above Spec.MaxReplicas"}, e.events(t))
}

// Without metrics, ScalingActive is False with upstream's reason, and the
// failures are events.
func TestMissingMetrics(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.deployment(t, 2)
	e.create(t, hpa(1, 5, 50))

	assert.Equal(t, int32(2), e.replicas(t))
	h := e.hpa(t)
	const cause = "failed to get cpu utilization: unable to get metrics for resource cpu: no metrics returned from resource metrics API"
	assert.Equal(t, "False FailedGetResourceMetric: the HPA was unable to compute the replica count: "+cause, condition(h, autoscalingv2.ScalingActive))
	assert.Equal(t, "True SucceededGetScale: the HPA controller was able to get the target's current scale", condition(h, autoscalingv2.AbleToScale))
	assert.Equal(t, int32(2), h.Status.CurrentReplicas)
	assert.Equal(t, []string{
		"Warning FailedComputeMetricsReplicas: invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric value: " + cause,
		"Warning FailedGetResourceMetric: " + cause,
	}, e.events(t))
}

// A pod without metrics counts as using none of its request on a scale
// up: one pod at 300 % and one without metrics is 150 %, 3 replicas.
func TestPodWithoutMetricsOnScaleUp(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.deployment(t, 2)
	pods, err := e.c.CoreV1().Pods("default").List(t.Context(), metav1.ListOptions{LabelSelector: "app=web"})
	require.NoError(t, err)
	require.Len(t, pods.Items, 2)
	e.metrics.SetPodMetrics("default", pods.Items[0].Name, map[string]corev1.ResourceList{"app": {corev1.ResourceCPU: resource.MustParse("300m")}})
	e.create(t, hpa(1, 10, 100))

	assert.Equal(t, int32(3), e.replicas(t))
}

// A scale-up policy limits the rate: one pod a minute, counted on the
// server's clock; a missing target is FailedGetScale.
func TestScaleUpPolicy(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.deployment(t, 2)
	e.setCPU(t, 400)
	h := hpa(1, 10, 50)
	h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{
		Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 60}}}}
	e.create(t, h)
	assert.Equal(t, int32(3), e.replicas(t))

	e.setCPU(t, 400)
	apiservertest.StepClock(t, e.srv, e.clock, 30*time.Second)
	assert.Equal(t, int32(3), e.replicas(t), "within the policy's period")
	assert.Equal(t, "True ScaleUpLimit: the desired replica count is increasing faster than the maximum scale rate", condition(e.hpa(t), autoscalingv2.ScalingLimited))
	apiservertest.StepClock(t, e.srv, e.clock, 45*time.Second)
	assert.Equal(t, int32(4), e.replicas(t), "the period passed")
}

// A target that does not exist: AbleToScale False, FailedGetScale.
func TestTargetMissing(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.create(t, hpa(1, 3, 50))

	h := e.hpa(t)
	assert.Equal(t, `False FailedGetScale: the HPA controller was unable to get the target's current scale: deployments.apps "web" not found`,
		condition(h, autoscalingv2.AbleToScale))
	assert.Equal(t, []string{`Warning FailedGetScale: deployments.apps "web" not found`}, e.events(t))
}

// installWidgets serves example.com/v1 Widgets, with a scale subresource
// whose selector is .status.selector, and waits until discovery has them.
func installWidgets(t *testing.T, srv *apiserver.Server) dynamic.ResourceInterface {
	t.Helper()
	c, err := apiextensionsclient.NewForConfig(srv.RESTConfig())
	require.NoError(t, err)
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
					Scale: &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas",
						LabelSelectorPath: ptr.To(".status.selector")}}}}}}
	_, err = c.ApiextensionsV1().CustomResourceDefinitions().Create(t.Context(), crd, metav1.CreateOptions{})
	require.NoError(t, err)
	admin, err := srv.Clientset()
	require.NoError(t, err)
	require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, err := admin.Discovery().ServerResourcesForGroupVersion("example.com/v1")
		return err == nil, nil
	}))
	dyn, err := dynamic.NewForConfig(srv.RESTConfig())
	require.NoError(t, err)
	return dyn.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}).Namespace("default")
}

func widgetHPA(minReplicas, maxReplicas int32) *autoscalingv2.HorizontalPodAutoscaler {
	h := hpa(minReplicas, maxReplicas, 50)
	h.Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "example.com/v1", Kind: "Widget", Name: "w"}
	return h
}

// A custom resource is scaled through its scale subresource, found by a
// mapper that learns the CRD installed after it started; one whose scale
// has no selector cannot be scaled from metrics.
func TestCustomResourceTarget(t *testing.T) {
	t.Parallel()
	e := start(t)
	widgets := installWidgets(t, e.srv)
	w := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w"}, "spec": map[string]any{"replicas": int64(5)}}}
	_, err := widgets.Create(t.Context(), w, metav1.CreateOptions{})
	require.NoError(t, err)
	e.create(t, widgetHPA(1, 2))

	got, err := widgets.Get(t.Context(), "w", metav1.GetOptions{})
	require.NoError(t, err)
	replicas, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas")
	assert.Equal(t, int64(2), replicas)
	assert.Equal(t, []string{"Normal SuccessfulRescale: New size: 2; reason: Current number of replicas above Spec.MaxReplicas"}, e.events(t))

	// Within range, the metrics need the scale's selector, which it lacks.
	apiservertest.StepClock(t, e.srv, e.clock, 15*time.Second)
	h := e.hpa(t)
	assert.Equal(t, "False InvalidSelector: the HPA target's scale is missing a selector", condition(h, autoscalingv2.ScalingActive))
	assert.Contains(t, e.events(t), "Warning SelectorRequired: selector is required")
	assert.Contains(t, e.events(t), "Warning FailedComputeMetricsReplicas: selector is required")
}
