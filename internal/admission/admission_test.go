package admission_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	resourcequotaapi "k8s.io/apiserver/pkg/admission/plugin/resourcequota/apis/resourcequota"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	kubeadmission "github.com/kubeembed/apiserver/internal/admission"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// createPod runs the plugin on the create of pod in namespace "default".
func createPod(t *testing.T, plugin admission.MutationInterface, pod *corev1.Pod) error {
	t.Helper()
	a := admission.NewAttributesRecord(pod, nil, corev1.SchemeGroupVersion.WithKind("Pod"), "default", pod.Name,
		corev1.SchemeGroupVersion.WithResource("pods"), "", admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "test"})
	return plugin.Admit(t.Context(), a, nil)
}

func pod(name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	for _, m := range mutate {
		m(p)
	}
	return p
}

// The plugin looks up service accounts and priority classes on a real
// server.
func newPods(t *testing.T) (*kubeadmission.Pods, kubernetes.Interface) {
	t.Helper()
	srv := apiservertest.Start(t)
	c, err := srv.Clientset()
	require.NoError(t, err)
	return kubeadmission.NewPods(c, true, kubeadmission.PodListers{}), c
}

func TestPodsServiceAccount(t *testing.T) {
	t.Parallel()
	plugin, c := newPods(t)

	p := pod("default-sa")
	require.NoError(t, createPod(t, plugin, p))
	assert.Equal(t, "default", p.Spec.ServiceAccountName)
	require.Len(t, p.Spec.Volumes, 1)
	assert.True(t, strings.HasPrefix(p.Spec.Volumes[0].Name, "kube-api-access-"), p.Spec.Volumes[0].Name)
	require.Len(t, p.Spec.Containers[0].VolumeMounts, 1)
	mount := p.Spec.Containers[0].VolumeMounts[0]
	assert.Equal(t, "/var/run/secrets/kubernetes.io/serviceaccount", mount.MountPath)
	assert.True(t, mount.ReadOnly)

	noMount := pod("no-mount", func(p *corev1.Pod) { p.Spec.AutomountServiceAccountToken = ptr.To(false) })
	require.NoError(t, createPod(t, plugin, noMount))
	assert.Empty(t, noMount.Spec.Volumes, "automounting off: no token volume")

	err := createPod(t, plugin, pod("missing", func(p *corev1.Pod) { p.Spec.ServiceAccountName = "robot" }))
	assert.True(t, apierrors.IsForbidden(err), "a missing service account is refused: %v", err)
	assert.ErrorContains(t, err, "error looking up service account default/robot")

	_, err = c.CoreV1().ServiceAccounts("default").Create(t.Context(), &corev1.ServiceAccount{
		ObjectMeta:       metav1.ObjectMeta{Name: "robot"},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	robot := pod("robot", func(p *corev1.Pod) { p.Spec.ServiceAccountName = "robot" })
	require.NoError(t, createPod(t, plugin, robot), "an account created just before is seen")
	assert.Equal(t, []corev1.LocalObjectReference{{Name: "registry"}}, robot.Spec.ImagePullSecrets)
}

func TestPodsPriorityAndTolerations(t *testing.T) {
	t.Parallel()
	plugin, c := newPods(t)

	p := pod("plain")
	require.NoError(t, createPod(t, plugin, p))
	assert.Equal(t, int32(0), ptr.Deref(p.Spec.Priority, -1))
	assert.Equal(t, corev1.PreemptLowerPriority, ptr.Deref(p.Spec.PreemptionPolicy, ""))
	assert.ElementsMatch(t, []corev1.Toleration{
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(300))},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(300))},
	}, p.Spec.Tolerations)

	critical := pod("critical", func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-node-critical" })
	require.NoError(t, createPod(t, plugin, critical))
	assert.Equal(t, int32(2000001000), *critical.Spec.Priority)

	err := createPod(t, plugin, pod("unknown", func(p *corev1.Pod) { p.Spec.PriorityClassName = "nope" }))
	assert.True(t, apierrors.IsForbidden(err), "%v", err)
	assert.ErrorContains(t, err, "no PriorityClass with name nope was found")

	err = createPod(t, plugin, pod("given", func(p *corev1.Pod) { p.Spec.Priority = ptr.To(int32(5)) }))
	assert.True(t, apierrors.IsForbidden(err), "a priority given without its class: %v", err)

	_, err = c.SchedulingV1().PriorityClasses().Create(t.Context(), &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: "everyone"}, Value: 42, GlobalDefault: true}, metav1.CreateOptions{})
	require.NoError(t, err)
	defaulted := pod("defaulted")
	require.NoError(t, createPod(t, plugin, defaulted))
	assert.Equal(t, int32(42), *defaulted.Spec.Priority, "the global default class applies")
	assert.Equal(t, "everyone", defaulted.Spec.PriorityClassName)
}

// recorder is an admission plugin that counts its calls.
type recorder struct {
	*admission.Handler
	admits, validates atomic.Int32
}

func (r *recorder) Admit(context.Context, admission.Attributes, admission.ObjectInterfaces) error {
	r.admits.Add(1)
	return nil
}

func (r *recorder) Validate(context.Context, admission.Attributes, admission.ObjectInterfaces) error {
	r.validates.Add(1)
	return nil
}

func TestWhenAny(t *testing.T) {
	t.Parallel()
	attrs := admission.NewAttributesRecord(&corev1.ConfigMap{}, nil, corev1.SchemeGroupVersion.WithKind("ConfigMap"), "default", "x",
		corev1.SchemeGroupVersion.WithResource("configmaps"), "", admission.Create, &metav1.CreateOptions{}, false, nil)
	var any atomic.Bool
	var built atomic.Int32
	plugin := &recorder{Handler: admission.NewHandler(admission.Create)}
	gate := kubeadmission.WhenAny(func() (admission.Interface, error) {
		built.Add(1)
		return plugin, nil
	}, any.Load)
	m, v := gate.(admission.MutationInterface), gate.(admission.ValidationInterface)

	require.NoError(t, m.Admit(t.Context(), attrs, nil))
	require.NoError(t, v.Validate(t.Context(), attrs, nil))
	assert.Zero(t, built.Load(), "nothing to apply: the plugin is not built")

	any.Store(true)
	for range 3 {
		require.NoError(t, m.Admit(t.Context(), attrs, nil))
		require.NoError(t, v.Validate(t.Context(), attrs, nil))
	}
	assert.Equal(t, int32(1), built.Load(), "built once")
	assert.Equal(t, int32(3), plugin.admits.Load())
	assert.Equal(t, int32(3), plugin.validates.Load())

	failing := kubeadmission.WhenAny(func() (admission.Interface, error) { return nil, errors.New("no CEL") }, func() bool { return true })
	err := failing.(admission.ValidationInterface).Validate(t.Context(), attrs, nil)
	assert.True(t, apierrors.IsInternalError(err), "%v", err)
	assert.ErrorContains(t, err, "admission policy plugin: no CEL")
}

// With resources limited by default, a namespace without quota is refused
// them: the plugin must be asked, fresh lister or not.
func TestWhereQuotasKeepsLimitedResources(t *testing.T) {
	plugin := refuseAll{admission.NewHandler(admission.Create, admission.Update)}
	fresh := kubeadmission.Fresh[corev1listers.ResourceQuotaLister]{
		Lister: corev1listers.NewResourceQuotaLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})),
		Fresh:  func() bool { return true },
	}
	attrs := admission.NewAttributesRecord(&corev1.Pod{}, nil, corev1.SchemeGroupVersion.WithKind("Pod"), "ns", "p",
		corev1.SchemeGroupVersion.WithResource("pods"), "", admission.Create, &metav1.CreateOptions{}, false, nil)
	limited := &resourcequotaapi.Configuration{LimitedResources: []resourcequotaapi.LimitedResource{{Resource: "pods", MatchContains: []string{"cpu"}}}}
	require.Error(t, kubeadmission.WhereQuotas(plugin, limited, fresh).Validate(context.Background(), attrs, nil))
	require.NoError(t, kubeadmission.WhereQuotas(plugin, nil, fresh).Validate(context.Background(), attrs, nil), "no quota, nothing limited: admitted")
}

type refuseAll struct{ *admission.Handler }

func (refuseAll) Validate(context.Context, admission.Attributes, admission.ObjectInterfaces) error {
	return errors.New("refused")
}
