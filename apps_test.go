package apiserver_test

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

func ptr[T any](v T) *T { return &v }

func minimalDeployment(name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: "nginx",
					Ports: []corev1.ContainerPort{{ContainerPort: 80}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
						HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}},
				}}},
			},
		},
	}
}

// The defaults a kube-apiserver 1.37 gives a minimal Deployment.
func TestDeploymentDefaults(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	d, err := clientset(t, srv).AppsV1().Deployments("default").Create(t.Context(), minimalDeployment("web"), metav1.CreateOptions{})
	require.NoError(t, err)

	quarter := intstr.FromString("25%")
	want := appsv1.DeploymentSpec{
		Replicas: ptr(int32(1)),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &quarter, MaxSurge: &quarter}},
		RevisionHistoryLimit:    ptr(int32(10)),
		ProgressDeadlineSeconds: ptr(int32(600)),
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{
					Name: "web", Image: "nginx",
					Ports:                    []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}},
					TerminationMessagePath:   "/dev/termination-log",
					TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					ImagePullPolicy:          corev1.PullAlways,
					ReadinessProbe: &corev1.Probe{
						ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
							Path: "/", Port: intstr.FromInt32(80), Scheme: corev1.URISchemeHTTP}},
						TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
					},
				}},
				RestartPolicy:                 corev1.RestartPolicyAlways,
				TerminationGracePeriodSeconds: ptr(int64(30)),
				DNSPolicy:                     corev1.DNSClusterFirst,
				SecurityContext:               &corev1.PodSecurityContext{},
				SchedulerName:                 "default-scheduler",
			},
		},
	}
	if diff := cmp.Diff(want, d.Spec); diff != "" {
		t.Errorf("defaults differ from kube-apiserver's (-want +got):\n%s", diff)
	}
	assert.EqualValues(t, 1, d.Generation)
}

func TestDeploymentValidationScaleAndStatus(t *testing.T) {
	t.Parallel()
	// The test writes the Deployment's status itself: no controller may
	// roll it out meanwhile.
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{
		Controllers: []controllers.Name{"*", "-" + controllers.Deployment}}))
	deploys := clientset(t, srv).AppsV1().Deployments("default")
	ctx := t.Context()

	invalid := func(d *appsv1.Deployment, fieldPath string) {
		t.Helper()
		_, err := deploys.Create(ctx, d, metav1.CreateOptions{})
		require.Error(t, err)
		st := statusOf(t, err)
		assert.Equal(t, int32(http.StatusUnprocessableEntity), st.Code, st.Message)
		var fields []string
		for _, c := range st.Details.Causes {
			fields = append(fields, c.Field)
		}
		assert.Contains(t, fields, fieldPath, st.Message)
	}
	mismatch := minimalDeployment("mismatch")
	mismatch.Spec.Template.Labels = map[string]string{"app": "other"}
	invalid(mismatch, "spec.template.metadata.labels")
	noImage := minimalDeployment("no-image")
	noImage.Spec.Template.Spec.Containers[0].Image = ""
	invalid(noImage, "spec.template.spec.containers[0].image")
	noSelector := minimalDeployment("no-selector")
	noSelector.Spec.Selector = nil
	invalid(noSelector, "spec.selector")

	d, err := deploys.Create(ctx, minimalDeployment("web"), metav1.CreateOptions{})
	require.NoError(t, err)

	// The selector is immutable in apps/v1.
	changed := d.DeepCopy()
	changed.Spec.Selector.MatchLabels["tier"] = "x"
	changed.Spec.Template.Labels["tier"] = "x"
	_, err = deploys.Update(ctx, changed, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "selector change: %v", err)

	// Scale through the scale subresource.
	scale, err := deploys.GetScale(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.EqualValues(t, 1, scale.Spec.Replicas)
	assert.Equal(t, "app=web", scale.Status.Selector)
	_, err = deploys.UpdateScale(ctx, "web", &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: autoscalingv1.ScaleSpec{Replicas: 3}}, metav1.UpdateOptions{})
	require.NoError(t, err)
	d, err = deploys.Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.EqualValues(t, 3, *d.Spec.Replicas)
	assert.EqualValues(t, 2, d.Generation, "a spec change bumps the generation")

	// Status writes go through /status only, and leave spec alone.
	d.Status.Replicas = 3
	d.Spec.Paused = true
	updated, err := deploys.UpdateStatus(ctx, d, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.EqualValues(t, 3, updated.Status.Replicas)
	assert.False(t, updated.Spec.Paused)
	assert.EqualValues(t, 2, updated.Generation)
	updated.Status.Replicas = 7
	updated, err = deploys.Update(ctx, updated, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.EqualValues(t, 3, updated.Status.Replicas, "the main resource ignores status")
}

func TestStatefulSetDaemonSetReplicaSetDefaults(t *testing.T) {
	t.Parallel()
	// The API's defaults and validation: no workload controller writes
	// the objects meanwhile.
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Controllers: withoutWorkloads}))
	apps := clientset(t, srv).AppsV1()
	ctx := t.Context()
	base := minimalDeployment("db")

	sts, err := apps.StatefulSets("default").Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Selector: base.Spec.Selector, Template: base.Spec.Template, ServiceName: "db",
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.EqualValues(t, 1, *sts.Spec.Replicas)
	assert.Equal(t, appsv1.OrderedReadyPodManagement, sts.Spec.PodManagementPolicy)
	assert.Equal(t, appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr(int32(0)), MaxUnavailable: ptr(intstr.FromInt32(1))}}, sts.Spec.UpdateStrategy)
	assert.EqualValues(t, 10, *sts.Spec.RevisionHistoryLimit)
	assert.Equal(t, &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
	}, sts.Spec.PersistentVolumeClaimRetentionPolicy)
	require.Len(t, sts.Spec.VolumeClaimTemplates, 1)
	assert.Equal(t, corev1.ClaimPending, sts.Spec.VolumeClaimTemplates[0].Status.Phase)
	assert.Equal(t, corev1.PersistentVolumeFilesystem, *sts.Spec.VolumeClaimTemplates[0].Spec.VolumeMode)
	assert.Equal(t, "default-scheduler", sts.Spec.Template.Spec.SchedulerName)

	// Only some of a StatefulSet's spec may change.
	sts.Spec.ServiceName = "other"
	_, err = apps.StatefulSets("default").Update(ctx, sts, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "changing serviceName: %v", err)
	scale, err := apps.StatefulSets("default").GetScale(ctx, "db", metav1.GetOptions{})
	require.NoError(t, err)
	scale.Spec.Replicas = 3
	_, err = apps.StatefulSets("default").UpdateScale(ctx, "db", scale, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = apps.StatefulSets("default").UpdateScale(ctx, "db", scale, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsConflict(err), "a stale Scale conflicts: %v", err)

	ds, err := apps.DaemonSets("default").Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec:       appsv1.DaemonSetSpec{Selector: base.Spec.Selector, Template: base.Spec.Template},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	one, zero := intstr.FromInt32(1), intstr.FromInt32(0)
	assert.Equal(t, appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &one, MaxSurge: &zero}}, ds.Spec.UpdateStrategy)
	assert.EqualValues(t, 10, *ds.Spec.RevisionHistoryLimit)

	rs, err := apps.ReplicaSets("default").Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1"},
		Spec:       appsv1.ReplicaSetSpec{Selector: base.Spec.Selector, Template: base.Spec.Template},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.EqualValues(t, 1, *rs.Spec.Replicas)

	rev, err := apps.ControllerRevisions("default").Create(ctx, &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: "db-1"}, Revision: 1,
		Data: runtime.RawExtension{Raw: []byte(`{"spec":{}}`)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	rev.Data = runtime.RawExtension{Raw: []byte(`{"spec":{"x":1}}`)}
	_, err = apps.ControllerRevisions("default").Update(ctx, rev, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "controller revision data is immutable: %v", err)
}

// A StatefulSet's containers mount its claim templates by name, as on
// kube-apiserver (which validates the template with a volume per claim
// template); the stored template is unchanged.
func TestStatefulSetMountsItsClaimTemplates(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Controllers: withoutWorkloads}))
	apps := clientset(t, srv).AppsV1()
	base := minimalDeployment("db")
	base.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	sts, err := apps.StatefulSets("default").Create(t.Context(), &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{Selector: base.Spec.Selector, Template: base.Spec.Template, ServiceName: "db",
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Empty(t, sts.Spec.Template.Spec.Volumes)
	base.Spec.Template.Spec.Containers[0].VolumeMounts[0].Name = "other"
	_, err = apps.StatefulSets("default").Create(t.Context(), &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db2"},
		Spec: appsv1.StatefulSetSpec{Selector: base.Spec.Selector, Template: base.Spec.Template, ServiceName: "db"}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	assert.Contains(t, err.Error(), "spec.template.spec.containers[0].volumeMounts[0].name: Not found: \"other\"")
}
