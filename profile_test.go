package apiserver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// ProfileEnvtest is envtest's control plane: a new namespace has no
// service account, a pod needs none and gets no token volume, and a deleted
// namespace stays Terminating with its content (no controller empties it).
func TestProfileEnvtest(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Profile: apiserver.ProfileEnvtest}))
	c := clientset(t, srv)
	ctx := t.Context()
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "suite"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	sas, err := c.CoreV1().ServiceAccounts("suite").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, sas.Items, "no default service account")

	pod, err := c.CoreV1().Pods("suite").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
	require.NoError(t, err, "no ServiceAccount admission: a pod needs no service account")
	assert.Empty(t, pod.Spec.ServiceAccountName)
	assert.Empty(t, pod.Spec.Volumes, "no token volume")
	assert.Equal(t, []corev1.Toleration{
		{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))},
		{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))},
	}, pod.Spec.Tolerations, "the other pod plugins run")

	require.NoError(t, c.CoreV1().Namespaces().Delete(ctx, "suite", metav1.DeleteOptions{}))
	require.NoError(t, srv.WaitIdle(ctx), "no controllers: nothing to wait for")
	ns, err := c.CoreV1().Namespaces().Get(ctx, "suite", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.NamespaceTerminating, ns.Status.Phase)
	_, err = c.CoreV1().Pods("suite").Get(ctx, "p", metav1.GetOptions{})
	assert.NoError(t, err, "the pod stays: no namespace controller")
}

// Controllers given with ProfileEnvtest run; the service account one gives
// namespaces their default service account again.
func TestProfileEnvtestWithControllers(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Profile: apiserver.ProfileEnvtest,
		Controllers: []controllers.Name{controllers.ServiceAccount, controllers.Namespace}}))
	c := clientset(t, srv)
	ctx := t.Context()
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "suite"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.CoreV1().ServiceAccounts("suite").Get(ctx, "default", metav1.GetOptions{})
	require.NoError(t, err)
	pod, err := c.CoreV1().Pods("suite").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Empty(t, pod.Spec.ServiceAccountName, "the profile's admission stays envtest's")

	require.NoError(t, c.CoreV1().Namespaces().Delete(ctx, "suite", metav1.DeleteOptions{}))
	require.NoError(t, srv.WaitIdle(ctx))
	_, err = c.CoreV1().Namespaces().Get(ctx, "suite", metav1.GetOptions{})
	requireGone(t, err, "namespace")
}

// Without the serviceaccount controller a cluster profile's pods are
// refused for their missing service account, as on a cluster whose
// controller-manager does not run it.
func TestProfileClusterWithoutServiceAccounts(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Controllers: []controllers.Name{"*", "-serviceaccount"}}))
	c := clientset(t, srv)
	_, err := c.CoreV1().Pods("default").Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
	require.Error(t, err)
	assert.Equal(t, `pods "p" is forbidden: error looking up service account default/default: serviceaccount "default" not found`, err.Error())
}

func TestProfileUnknown(t *testing.T) {
	t.Parallel()
	_, err := apiserver.New(apiserver.Options{Profile: "kind"})
	require.Error(t, err)
	assert.Equal(t, `options: Profile "kind" is not a profile (known: [cluster envtest])`, err.Error())
}
