package apiserver_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

func createQuota(t *testing.T, c kubernetes.Interface, ns string, q *corev1.ResourceQuota) *corev1.ResourceQuota {
	t.Helper()
	out, err := c.CoreV1().ResourceQuotas(ns).Create(t.Context(), q, metav1.CreateOptions{})
	require.NoError(t, err)
	return out
}

func quotaStatus(t *testing.T, srv *apiserver.Server, c kubernetes.Interface, ns, name string) corev1.ResourceQuotaStatus {
	t.Helper()
	require.NoError(t, srv.WaitIdle(t.Context()))
	q, err := c.CoreV1().ResourceQuotas(ns).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return q.Status
}

func pod(name string, requests corev1.ResourceList) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{Requests: requests, Limits: requests}}}}}
}

// assertUsed checks the quota's used amounts, compared as quantities.
func assertUsed(t *testing.T, want map[corev1.ResourceName]string, got corev1.ResourceList) {
	t.Helper()
	assert.Len(t, got, len(want), "used: %v", got)
	for name, q := range want {
		v, ok := got[name]
		if assert.Truef(t, ok, "used has no %s: %v", name, got) {
			assert.Zerof(t, v.Cmp(resource.MustParse(q)), "used %s = %s, want %s", name, v.String(), q)
		}
	}
}

// A quota's status holds its hard limits and the namespace's usage, charged
// by admission as objects are created and given back by the controller as
// they are deleted.
func TestResourceQuotaUsage(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	createCM(t, c, "default", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before"}})
	createQuota(t, c, "default", &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
		"pods": resource.MustParse("5"), "requests.cpu": resource.MustParse("2"), "limits.memory": resource.MustParse("1Gi"),
		"configmaps": resource.MustParse("10"), "count/deployments.apps": resource.MustParse("3"), "services.nodeports": resource.MustParse("2"),
	}}})
	status := quotaStatus(t, srv, c, "default", "q")
	assert.Len(t, status.Hard, 6)
	// kube-root-ca.crt and "before"
	assertUsed(t, map[corev1.ResourceName]string{"pods": "0", "requests.cpu": "0", "limits.memory": "0", "configmaps": "2",
		"count/deployments.apps": "0", "services.nodeports": "0"}, status.Used)

	_, err := c.CoreV1().Pods("default").Create(t.Context(), pod("p", corev1.ResourceList{"cpu": resource.MustParse("500m"), "memory": resource.MustParse("256Mi")}), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.CoreV1().Services("default").Create(t.Context(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "np"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assertUsed(t, map[corev1.ResourceName]string{"pods": "1", "requests.cpu": "500m", "limits.memory": "256Mi", "configmaps": "2",
		"count/deployments.apps": "0", "services.nodeports": "1"}, quotaStatus(t, srv, c, "default", "q").Used)

	require.NoError(t, c.CoreV1().Pods("default").Delete(t.Context(), "p", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	require.NoError(t, c.CoreV1().ConfigMaps("default").Delete(t.Context(), "before", metav1.DeleteOptions{}))
	assertUsed(t, map[corev1.ResourceName]string{"pods": "0", "requests.cpu": "0", "limits.memory": "0", "configmaps": "1",
		"count/deployments.apps": "0", "services.nodeports": "1"}, quotaStatus(t, srv, c, "default", "q").Used)
}

// What exceeds a quota is refused with kube-apiserver's 403, and creating
// fits again once the controller has given the usage back.
func TestResourceQuotaAdmission(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	createQuota(t, c, "default", &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "two"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
		"count/secrets": resource.MustParse("2"), "requests.memory": resource.MustParse("1Gi")}}})
	quotaStatus(t, srv, c, "default", "two")
	for _, name := range []string{"a", "b"} {
		_, err := c.CoreV1().Secrets("default").Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := c.CoreV1().Secrets("default").Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "got %v", err)
	assert.Equal(t, `secrets "c" is forbidden: exceeded quota: two, requested: count/secrets=1, used: count/secrets=2, limited: count/secrets=2`, err.Error())

	_, err = c.CoreV1().Pods("default").Create(t.Context(), pod("nomem", nil), metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "got %v", err)
	assert.Equal(t, `pods "nomem" is forbidden: failed quota: two: must specify requests.memory for: c`, err.Error())

	require.NoError(t, c.CoreV1().Secrets("default").Delete(t.Context(), "a", metav1.DeleteOptions{}))
	require.NoError(t, srv.WaitIdle(t.Context()))
	_, err = c.CoreV1().Secrets("default").Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// Without the controller a quota's status stays empty, and kube-apiserver's
// admission enforces only the limits a status holds: none.
func TestResourceQuotaWithoutController(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Controllers: []controllers.Name{"*", "-" + controllers.ResourceQuota}}))
	c := clientset(t, srv)
	createQuota(t, c, "default", &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
		"configmaps": resource.MustParse("1")}}})
	for _, name := range []string{"x", "y"} {
		createCM(t, c, "default", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	assert.Empty(t, quotaStatus(t, srv, c, "default", "q"))
}

// A LimitRange gives containers its defaults, noted in the pod's
// annotation, and refuses what is out of its bounds with kube-apiserver's
// 403.
func TestLimitRanger(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	_, err := c.CoreV1().LimitRanges("default").Create(t.Context(), &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "lr"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type:           corev1.LimitTypeContainer,
			Default:        corev1.ResourceList{"cpu": resource.MustParse("500m"), "memory": resource.MustParse("128Mi")},
			DefaultRequest: corev1.ResourceList{"cpu": resource.MustParse("100m")},
			Max:            corev1.ResourceList{"cpu": resource.MustParse("1")},
		}, {
			Type: corev1.LimitTypePersistentVolumeClaim,
			Min:  corev1.ResourceList{"storage": resource.MustParse("1Gi")},
		}}}}, metav1.CreateOptions{})
	require.NoError(t, err)

	p, err := c.CoreV1().Pods("default").Create(t.Context(), pod("defaulted", nil), metav1.CreateOptions{})
	require.NoError(t, err)
	res := p.Spec.Containers[0].Resources
	assert.Equal(t, "100m", res.Requests.Cpu().String())
	assert.Equal(t, "128Mi", res.Requests.Memory().String(), "the LimitRange's defaultRequest defaults to its default")
	assert.Equal(t, "500m", res.Limits.Cpu().String())
	assert.Equal(t, "LimitRanger plugin set: cpu, memory request for container c; cpu, memory limit for container c", p.Annotations["kubernetes.io/limit-ranger"])

	_, err = c.CoreV1().Pods("default").Create(t.Context(), pod("big", corev1.ResourceList{"cpu": resource.MustParse("2")}), metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "got %v", err)
	assert.Equal(t, `pods "big" is forbidden: maximum cpu usage per Container is 1, but limit is 2`, err.Error())

	_, err = c.CoreV1().PersistentVolumeClaims("default").Create(t.Context(), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "small"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{"storage": resource.MustParse("100Mi")}}}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "got %v", err)
	assert.Equal(t, `persistentvolumeclaims "small" is forbidden: minimum storage usage per PersistentVolumeClaim is 1Gi, but request is 100Mi`, err.Error())
}

// The LimitRange a client has just created, changed or deleted is the one
// the next pod gets, without waiting: the plugin reads its informer only
// once that holds every LimitRange written (it failed in the first rounds
// when it read the informer alone).
func TestLimitRangerReadsItsWrites(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	limits := c.CoreV1().LimitRanges("default")
	cpuDefault := func(p *corev1.Pod) string {
		if q, ok := p.Spec.Containers[0].Resources.Limits["cpu"]; ok {
			return q.String()
		}
		return "none"
	}
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "lr"}}
	for i := range 30 {
		want := fmt.Sprintf("%dm", 100+i)
		lr.Spec.Limits = []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
			Default: corev1.ResourceList{"cpu": resource.MustParse(want)}}}
		var err error
		if lr.ResourceVersion == "" {
			lr, err = limits.Create(t.Context(), lr, metav1.CreateOptions{})
		} else {
			lr, err = limits.Update(t.Context(), lr, metav1.UpdateOptions{})
		}
		require.NoError(t, err)
		p, err := c.CoreV1().Pods("default").Create(t.Context(), pod(fmt.Sprintf("p%d", i), nil), metav1.CreateOptions{})
		require.NoError(t, err)
		require.Equal(t, want, cpuDefault(p), "round %d: the pod after the LimitRange's write", i)
		if i%3 == 2 {
			require.NoError(t, limits.Delete(t.Context(), "lr", metav1.DeleteOptions{}))
			p, err := c.CoreV1().Pods("default").Create(t.Context(), pod(fmt.Sprintf("q%d", i), nil), metav1.CreateOptions{})
			require.NoError(t, err)
			require.Equal(t, "none", cpuDefault(p), "round %d: the pod after the LimitRange's deletion", i)
			lr = &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "lr"}}
		}
	}
}

// Admission reads its writes across Server.Restore too: the LimitRange a
// restore puts back, or takes away, is the one the next pod gets (the
// plugins trusted informers that had not yet listed again after the
// restore, until Restore told the server what it wrote).
func TestLimitRangerAfterRestore(t *testing.T) {
	t.Parallel()
	srv := startOnMemory(t) // snapshots are the memory store's
	c := clientset(t, srv)
	empty, err := srv.Snapshot()
	require.NoError(t, err)
	_, err = c.CoreV1().LimitRanges("default").Create(t.Context(), &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "lr"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
			Default: corev1.ResourceList{"cpu": resource.MustParse("300m")}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	limited, err := srv.Snapshot()
	require.NoError(t, err)
	for i := range 10 {
		require.NoError(t, srv.Restore(t.Context(), empty))
		p, err := c.CoreV1().Pods("default").Create(t.Context(), pod(fmt.Sprintf("a%d", i), nil), metav1.CreateOptions{})
		require.NoError(t, err)
		assert.Empty(t, p.Spec.Containers[0].Resources.Limits, "round %d: restored away", i)
		require.NoError(t, srv.Restore(t.Context(), limited))
		p, err = c.CoreV1().Pods("default").Create(t.Context(), pod(fmt.Sprintf("b%d", i), nil), metav1.CreateOptions{})
		require.NoError(t, err)
		assert.Equal(t, "300m", p.Spec.Containers[0].Resources.Limits.Cpu().String(), "round %d: restored back", i)
	}
}

// A scoped quota counts only the pods in its scope: BestEffort pods here,
// not those with requests.
func TestResourceQuotaScopes(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	createQuota(t, c, "default", &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "besteffort"}, Spec: corev1.ResourceQuotaSpec{
		Hard: corev1.ResourceList{"pods": resource.MustParse("1")}, Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}}})
	quotaStatus(t, srv, c, "default", "besteffort")
	for _, p := range []*corev1.Pod{pod("first", nil), pod("burstable", corev1.ResourceList{"cpu": resource.MustParse("100m")})} {
		_, err := c.CoreV1().Pods("default").Create(t.Context(), p, metav1.CreateOptions{})
		require.NoError(t, err, p.Name)
	}
	_, err := c.CoreV1().Pods("default").Create(t.Context(), pod("second", nil), metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "got %v", err)
	assert.Equal(t, `pods "second" is forbidden: exceeded quota: besteffort, requested: pods=1, used: pods=1, limited: pods=1`, err.Error())
	assertUsed(t, map[corev1.ResourceName]string{"pods": "1"}, quotaStatus(t, srv, c, "default", "besteffort").Used)
}

func deviceClaim(name string, requests ...resourcev1.DeviceRequest) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: requests}}}
}

func gpus(name string, count int64) resourcev1.DeviceRequest {
	return resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com", Count: count}}
}

// DRA resource claims are charged per device class, as devices and as the
// class's extended resources, a prioritized list for the most it may take;
// what exceeds is refused with kube-apiserver's 403 and a deleted claim
// gives its devices back.
func TestResourceQuotaDRAClaims(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	c := clientset(t, srv)
	extended := "example.com/gpu"
	_, err := c.ResourceV1().DeviceClasses().Create(t.Context(), &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"},
		Spec: resourcev1.DeviceClassSpec{ExtendedResourceName: &extended}}, metav1.CreateOptions{})
	require.NoError(t, err)
	createQuota(t, c, "default", &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "dra"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
		"count/resourceclaims.resource.k8s.io":                        resource.MustParse("5"),
		"gpu.example.com.deviceclass.resource.k8s.io/devices":         resource.MustParse("4"),
		"requests.deviceclass.resource.kubernetes.io/gpu.example.com": resource.MustParse("4"),
		"requests.example.com/gpu":                                    resource.MustParse("4"),
	}}})
	quotaStatus(t, srv, c, "default", "dra")
	claims := c.ResourceV1().ResourceClaims("default")
	_, err = claims.Create(t.Context(), deviceClaim("one", gpus("gpu", 1)), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = claims.Create(t.Context(), deviceClaim("either", resourcev1.DeviceRequest{Name: "gpu", FirstAvailable: []resourcev1.DeviceSubRequest{
		{Name: "two", DeviceClassName: "gpu.example.com", Count: 2}, {Name: "one", DeviceClassName: "gpu.example.com", Count: 1}}}), metav1.CreateOptions{})
	require.NoError(t, err)
	used := map[corev1.ResourceName]string{"count/resourceclaims.resource.k8s.io": "2", "gpu.example.com.deviceclass.resource.k8s.io/devices": "3",
		"requests.deviceclass.resource.kubernetes.io/gpu.example.com": "3", "requests.example.com/gpu": "3"}
	assertUsed(t, used, quotaStatus(t, srv, c, "default", "dra").Used)

	_, err = claims.Create(t.Context(), deviceClaim("two", gpus("gpu", 2)), metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "got %v", err)
	assert.Equal(t, `resourceclaims.resource.k8s.io "two" is forbidden: exceeded quota: dra, requested: `+
		`gpu.example.com.deviceclass.resource.k8s.io/devices=2,requests.deviceclass.resource.kubernetes.io/gpu.example.com=2,requests.example.com/gpu=2, `+
		`used: gpu.example.com.deviceclass.resource.k8s.io/devices=3,requests.deviceclass.resource.kubernetes.io/gpu.example.com=3,requests.example.com/gpu=3, `+
		`limited: gpu.example.com.deviceclass.resource.k8s.io/devices=4,requests.deviceclass.resource.kubernetes.io/gpu.example.com=4,requests.example.com/gpu=4`, err.Error())

	require.NoError(t, claims.Delete(t.Context(), "either", metav1.DeleteOptions{}))
	used = map[corev1.ResourceName]string{"count/resourceclaims.resource.k8s.io": "1", "gpu.example.com.deviceclass.resource.k8s.io/devices": "1",
		"requests.deviceclass.resource.kubernetes.io/gpu.example.com": "1", "requests.example.com/gpu": "1"}
	assertUsed(t, used, quotaStatus(t, srv, c, "default", "dra").Used)
	_, err = claims.Create(t.Context(), deviceClaim("two", gpus("gpu", 2)), metav1.CreateOptions{})
	require.NoError(t, err)
}
