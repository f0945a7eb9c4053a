package apiserver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

func TestClaimsNodesPriorityClassesBudgets(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{
		// The test writes a node's taints and status itself: no node
		// lifecycle controller may change them meanwhile.
		Controllers: []controllers.Name{"*", "-" + controllers.NodeLifecycle}}))
	c := clientset(t, srv)
	ctx := t.Context()

	pvc, err := c.CoreV1().PersistentVolumeClaims("default").Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.ClaimPending, pvc.Status.Phase)
	assert.Equal(t, corev1.PersistentVolumeFilesystem, *pvc.Spec.VolumeMode)
	assert.Zero(t, pvc.Generation)
	pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	_, err = c.CoreV1().PersistentVolumeClaims("default").Update(ctx, pvc, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "claim spec is immutable: %v", err)
	assert.Contains(t, err.Error(), "spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n"+
		"@@ -1,6 +1,6 @@\n {\n  \"AccessModes\": [\n-  \"ReadWriteOnce\"\n+  \"ReadWriteMany\"\n  ],\n", "kube-apiserver's diff of the internal specs")
	pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
	_, err = c.CoreV1().PersistentVolumeClaims("default").Update(ctx, pvc, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "an unbound claim's request is immutable: %v", err)
	_, err = c.CoreV1().PersistentVolumeClaims("default").Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "empty"}}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "claim without access modes and size: %v", err)

	node, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}, node.Spec.Taints,
		"a new node is not ready until its kubelet says so")
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	node.Spec.Unschedulable = true // /status keeps the spec
	node.Labels = map[string]string{"kubernetes.io/hostname": "node-1"}
	updated, err := c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.ConditionTrue, updated.Status.Conditions[0].Status)
	assert.False(t, updated.Spec.Unschedulable, "/status may not change the spec")
	assert.Equal(t, "node-1", updated.Labels["kubernetes.io/hostname"], "a node's /status may change its labels, as the kubelet does")
	updated.Spec.Unschedulable = true
	updated.Status.Conditions = nil
	updated, err = c.CoreV1().Nodes().Update(ctx, updated, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.True(t, updated.Spec.Unschedulable)
	assert.Len(t, updated.Status.Conditions, 1, "the main resource keeps the status")

	system, err := c.SchedulingV1().PriorityClasses().Get(ctx, "system-node-critical", metav1.GetOptions{})
	require.NoError(t, err, "the system priority classes exist when Start returns")
	assert.EqualValues(t, 2000001000, system.Value)
	pc, err := c.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.PreemptLowerPriority, *pc.PreemptionPolicy)
	_, err = c.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: "system-mine"}, Value: 1}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "system- prefix is reserved: %v", err)

	one := intstr.FromInt32(1)
	_, err = c.PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "both"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, MaxUnavailable: &one},
	}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "minAvailable and maxUnavailable: %v", err)
}

func TestEndpointsTemplatesLimitsVolumes(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv).CoreV1()
	ctx := t.Context()

	_, err := c.Endpoints("default").Create(ctx, &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.244.0.5"}},
			Ports: []corev1.EndpointPort{{Port: 8080}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Endpoints("default").Create(ctx, &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Subsets:    []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "not-an-ip"}}}},
	}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "%v", err)

	tmpl, err := c.PodTemplates("default").Create(ctx, &corev1.PodTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "worker"},
		Template:   corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "w", Image: "busybox"}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.PullAlways, tmpl.Template.Spec.Containers[0].ImagePullPolicy, "template defaults")

	limits, err := c.LimitRanges("default").Create(ctx, &corev1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Name: "defaults"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
			Max: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			Min: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// kube-apiserver's defaults: a container's default limit is its max,
	// its default request the default limit, then the min.
	item := limits.Spec.Limits[0]
	assert.Equal(t, "2", item.Default.Cpu().String())
	assert.Equal(t, "2", item.DefaultRequest.Cpu().String())
	assert.Equal(t, "64Mi", item.DefaultRequest.Memory().String())
	_, err = c.LimitRanges("default").Create(ctx, &corev1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec:       corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: "Cluster"}}},
	}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "unknown limit type: %v", err)

	pv, err := c.PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
		Spec: corev1.PersistentVolumeSpec{
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.PersistentVolumeReclaimRetain, pv.Spec.PersistentVolumeReclaimPolicy)
	assert.Equal(t, corev1.VolumePending, pv.Status.Phase)
}
