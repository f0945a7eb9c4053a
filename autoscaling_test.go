package apiserver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// An HPA written as autoscaling/v1 reads back as v2 with the CPU target as
// a metric, and the other way round; conditions written through v2 show in
// v1's annotation, as on kube-apiserver.
func TestHorizontalPodAutoscalerVersions(t *testing.T) {
	t.Parallel()
	// The API's conversions: the HPA controller does not write the
	// status this test writes.
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Controllers: withoutWorkloads}))
	c := clientset(t, srv)
	ctx := t.Context()
	target := int32(60)
	_, err := c.AutoscalingV1().HorizontalPodAutoscalers("default").Create(ctx, &autoscalingv1.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{MaxReplicas: 5, TargetCPUUtilizationPercentage: &target,
			ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	v2, err := c.AutoscalingV2().HorizontalPodAutoscalers("default").Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, v2.Spec.Metrics, 1)
	assert.EqualValues(t, 60, *v2.Spec.Metrics[0].Resource.Target.AverageUtilization)
	assert.EqualValues(t, 1, *v2.Spec.MinReplicas)

	v2.Status.Conditions = []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.AbleToScale, Status: "True", Reason: "ReadyForNewScale"}}
	_, err = c.AutoscalingV2().HorizontalPodAutoscalers("default").UpdateStatus(ctx, v2, metav1.UpdateOptions{})
	require.NoError(t, err)
	v1, err := c.AutoscalingV1().HorizontalPodAutoscalers("default").Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.EqualValues(t, 60, *v1.Spec.TargetCPUUtilizationPercentage)
	assert.Contains(t, v1.Annotations["autoscaling.alpha.kubernetes.io/conditions"], "ReadyForNewScale")

	list, err := c.AutoscalingV1().HorizontalPodAutoscalers("default").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
}

// A behavior given is filled in as kube-apiserver's defaulting fills it:
// both rules' selectPolicy, the scale-up window and policies, the
// scale-down policy; the scale-down window stays unset (the controller's).
func TestHorizontalPodAutoscalerBehaviorDefaults(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c, err := srv.Clientset()
	require.NoError(t, err)
	hpa, err := c.AutoscalingV2().HorizontalPodAutoscalers("default").Create(t.Context(), &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 5,
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: &autoscalingv2.HPAScalingRules{
				StabilizationWindowSeconds: new(int32(60))}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	maxPolicy := autoscalingv2.MaxChangePolicySelect
	assert.Equal(t, &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: new(int32(60)), SelectPolicy: &maxPolicy,
			Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
				{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}}},
		ScaleDown: &autoscalingv2.HPAScalingRules{SelectPolicy: &maxPolicy,
			Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}}},
	}, hpa.Spec.Behavior)
}
