package apiserver_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// causes are an invalid answer's causes as "field: message", in order.
func causes(t *testing.T, err error) []string {
	t.Helper()
	var st apierrors.APIStatus
	require.True(t, errors.As(err, &st), "want a Status error, got %v", err)
	require.True(t, apierrors.IsInvalid(err), "want 422, got %v", err)
	var out []string
	for _, c := range st.Status().Details.Causes {
		out = append(out, fmt.Sprintf("%s: %s", c.Field, c.Message))
	}
	return out
}

func deploymentHPA(name string, mutate func(*autoscalingv2.HorizontalPodAutoscalerSpec)) *autoscalingv2.HorizontalPodAutoscaler {
	h := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 3,
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}}}
	mutate(&h.Spec)
	return h
}

// Creates answer kube-apiserver's causes in its order: the declarative
// replica checks last, scale to zero allowed with an External metric.
func TestHorizontalPodAutoscalerValidationCreate(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	hpas := clientset(t, srv).AutoscalingV2().HorizontalPodAutoscalers("default")
	cases := []struct {
		name   string
		mutate func(*autoscalingv2.HorizontalPodAutoscalerSpec)
		want   []string
	}{
		{"replicas", func(s *autoscalingv2.HorizontalPodAutoscalerSpec) {
			s.MinReplicas, s.MaxReplicas = ptr[int32](-1), 0
			s.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{Kind: "a/b", Name: "..", APIVersion: "v1"}
		}, []string{
			"spec.scaleTargetRef.kind: Invalid value: \"a/b\": may not contain '/'",
			"spec.scaleTargetRef.name: Invalid value: \"..\": may not be '..'",
			"spec.scaleTargetRef.apiVersion: Invalid value: \"v1\": apiVersion must specify API group",
			"spec.minReplicas: Invalid value: -1: must be greater than or equal to 0",
			"spec.maxReplicas: Required value",
		}},
		{"max-below-min", func(s *autoscalingv2.HorizontalPodAutoscalerSpec) { s.MaxReplicas = -2 }, []string{
			"spec.maxReplicas: Invalid value: -2: must be greater than or equal to `minReplicas`",
			"spec.maxReplicas: Invalid value: -2: must be greater than or equal to 1",
		}},
		{"metrics", func(s *autoscalingv2.HorizontalPodAutoscalerSpec) {
			s.Metrics = []autoscalingv2.MetricSpec{{}, {Type: autoscalingv2.PodsMetricSourceType},
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: "cpu",
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr[int32](0)}},
					External: &autoscalingv2.ExternalMetricSource{}}}
		}, []string{
			"spec.metrics[0].type: Required value: must specify a metric source type",
			`spec.metrics[0].type: Unsupported value: "": supported values: "ContainerResource", "External", "Object", "Pods", "Resource"`,
			"spec.metrics[1].pods: Required value: must populate information for the given metric source",
			"spec.metrics[2].external.metric.name: Required value: must specify a metric name",
			"spec.metrics[2].external.target.type: Required value: must specify a metric target type",
			`spec.metrics[2].external.target.type: Invalid value: "": must be either Utilization, Value, or AverageValue`,
			"spec.metrics[2].external.target.averageValue: Required value: must set either a target value for metric or a per-pod target",
			"spec.metrics[2].external: Forbidden: must populate the given metric source only",
		}},
		{"behavior", func(s *autoscalingv2.HorizontalPodAutoscalerSpec) {
			s.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr[int32](4000)},
				ScaleDown: &autoscalingv2.HPAScalingRules{SelectPolicy: ptr[autoscalingv2.ScalingPolicySelect]("Some"), Tolerance: ptr(resource.MustParse("-1")),
					Policies: []autoscalingv2.HPAScalingPolicy{{Type: "Items", Value: 0, PeriodSeconds: 1801}}}}
		}, []string{
			"spec.behavior.scaleUp.stabilizationWindowSeconds: Invalid value: 4000: must be less than or equal to 3600",
			`spec.behavior.scaleDown.selectPolicy: Unsupported value: "Some": supported values: "Disabled", "Max", "Min"`,
			`spec.behavior.scaleDown.policies[0].type: Unsupported value: "Items": supported values: "Percent", "Pods"`,
			"spec.behavior.scaleDown.policies[0].value: Invalid value: 0: must be greater than zero",
			"spec.behavior.scaleDown.policies[0].periodSeconds: Invalid value: 1801: must be less than or equal to 1800",
			`spec.behavior.scaleDown.tolerance: Invalid value: "-1": must be greater than or equal to 0`,
		}},
	}
	for _, tc := range cases {
		_, err := hpas.Create(t.Context(), deploymentHPA(tc.name, tc.mutate), metav1.CreateOptions{})
		assert.Equal(t, tc.want, causes(t, err), tc.name)
	}

	zero, err := hpas.Create(t.Context(), deploymentHPA("zero", func(s *autoscalingv2.HorizontalPodAutoscalerSpec) {
		s.MinReplicas = ptr[int32](0)
		s.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: "queue"},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: ptr(resource.MustParse("10"))}}}}
	}), metav1.CreateOptions{})
	require.NoError(t, err)
	assert.EqualValues(t, 0, *zero.Spec.MinReplicas)
}

// An update checks the target's apiVersion only when it changes it or the
// kind; a ReplicationController target may name the core group.
func TestHorizontalPodAutoscalerValidationUpdate(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	hpas := clientset(t, srv).AutoscalingV2().HorizontalPodAutoscalers("default")
	_, err := hpas.Create(t.Context(), deploymentHPA("rc", func(s *autoscalingv2.HorizontalPodAutoscalerSpec) {
		s.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "ReplicationController", Name: "rc"}
	}), metav1.CreateOptions{})
	require.NoError(t, err)

	_, err = hpas.Patch(t.Context(), "rc", types.MergePatchType, []byte(`{"spec":{"scaleTargetRef":{"name":"other"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	_, err = hpas.Patch(t.Context(), "rc", types.MergePatchType, []byte(`{"spec":{"scaleTargetRef":{"kind":"Deployment"},"maxReplicas":0}}`), metav1.PatchOptions{})
	assert.Equal(t, []string{
		"spec.maxReplicas: Invalid value: 0: must be greater than or equal to `minReplicas`",
		`spec.scaleTargetRef.apiVersion: Invalid value: "v1": apiVersion must specify API group`,
		"spec.maxReplicas: Required value",
	}, causes(t, err))
}

// autoscaling/v1 writes are checked as their v2 form: the CPU target is a
// metric, paths are v2's.
func TestHorizontalPodAutoscalerValidationV1(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	_, err := clientset(t, srv).AutoscalingV1().HorizontalPodAutoscalers("default").Create(t.Context(), &autoscalingv1.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{MinReplicas: ptr[int32](0), TargetCPUUtilizationPercentage: ptr[int32](0),
			ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{Kind: "Deployment", Name: "web"}},
	}, metav1.CreateOptions{})
	assert.Equal(t, []string{
		`spec.scaleTargetRef.apiVersion: Invalid value: "": apiVersion must specify API group`,
		"spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0",
		"spec.metrics: Forbidden: must specify at least one Object or External metric to support scaling to zero replicas",
		"spec.maxReplicas: Required value",
	}, causes(t, err))
}
