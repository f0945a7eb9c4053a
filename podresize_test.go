package apiserver_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// resources is requests and limits of cpu and memory ("" for none).
func resources(cpuReq, cpuLim, memReq, memLim string) corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	for _, x := range []struct {
		list corev1.ResourceList
		name corev1.ResourceName
		q    string
	}{{r.Requests, corev1.ResourceCPU, cpuReq}, {r.Limits, corev1.ResourceCPU, cpuLim},
		{r.Requests, corev1.ResourceMemory, memReq}, {r.Limits, corev1.ResourceMemory, memLim}} {
		if x.q != "" {
			x.list[x.name] = resource.MustParse(x.q)
		}
	}
	if len(r.Limits) == 0 {
		r.Limits = nil // as decoded
	}
	return r
}

func createPod(t *testing.T, c kubernetes.Interface, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	p.Namespace = "default"
	created, err := c.CoreV1().Pods("default").Create(t.Context(), p, metav1.CreateOptions{})
	require.NoError(t, err)
	return created
}

// pods/resize writes pod-level resources and init containers' too, as
// kube-apiserver v1.37 (PodLevelResources, InPlacePodLevelResourcesVerticalScaling
// and InPlacePodVerticalScalingInitContainers on): before, a pod-level
// resize was answered 200 and dropped, and a sidecar's was too.
func TestResizeWritesPodLevelAndInitContainers(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	limits := resources("", "1", "", "1Gi")
	p := createPod(t, c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: corev1.PodSpec{
		Resources:      &limits,
		InitContainers: []corev1.Container{{Name: "side", Image: "envoy", RestartPolicy: ptr(corev1.ContainerRestartPolicyAlways), Resources: resources("100m", "", "", "")}},
		Containers:     []corev1.Container{{Name: "app", Image: "nginx", Resources: resources("200m", "", "", "")}}}})
	// Created: the pod-level requests default to what the containers
	// request (cpu), else to the pod-level limits (memory), and they
	// decide the class.
	assert.Equal(t, resources("300m", "1", "1Gi", "1Gi"), *p.Spec.Resources)
	assert.Equal(t, corev1.PodQOSBurstable, p.Status.QOSClass)

	p.Spec.Resources = ptr(resources("500m", "2", "1Gi", "1Gi"))
	p.Spec.InitContainers[0].Resources = resources("300m", "", "", "")
	r, err := c.CoreV1().Pods("default").UpdateResize(t.Context(), "a", p, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, resources("500m", "2", "1Gi", "1Gi"), *r.Spec.Resources)
	assert.Equal(t, resources("300m", "", "", ""), r.Spec.InitContainers[0].Resources)
	assert.Equal(t, int64(2), r.Generation)

	// A client that drops the pod-level resources keeps them.
	r.Spec.Resources = nil
	r, err = c.CoreV1().Pods("default").UpdateResize(t.Context(), "a", r, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, resources("500m", "2", "1Gi", "1Gi"), *r.Spec.Resources)
	assert.Equal(t, int64(2), r.Generation)
}

// What kube-apiserver v1.37 refuses of a resize, with its messages.
func TestResizeRefusals(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	base := func(name string) *corev1.Pod {
		return createPod(t, c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "nginx", Resources: resources("100m", "200m", "64Mi", "128Mi")}}}})
	}
	for _, tc := range []struct {
		name   string
		change func(p *corev1.Pod)
		want   string
	}{
		{"request over limit", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1")
		},
			`Pod "request-over-limit" is invalid: spec.containers[0].resources.requests: Invalid value: "1": must be less than or equal to cpu limit of 200m`},
		{"limit removed", func(p *corev1.Pod) { delete(p.Spec.Containers[0].Resources.Limits, corev1.ResourceCPU) },
			`Pod "limit-removed" is invalid: spec.containers[0].resources.limits: Forbidden: resource limits cannot be removed`},
		{"other resource", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceEphemeralStorage] = resource.MustParse("1Gi")
		}, `Pod "other-resource" is invalid: spec: Forbidden: only cpu and memory resources are mutable`},
		{"class change", func(p *corev1.Pod) { p.Spec.Containers[0].Resources = resources("200m", "200m", "128Mi", "128Mi") },
			`Pod "class-change" is invalid: spec: Invalid value: "Burstable": Pod QOS Class may not change as a result of resizing`},
		{"renamed", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "other" },
			`Pod "renamed" is invalid: spec.containers[0].name: Forbidden: containers may not be renamed or reordered on resize`},
		{"resize policy", func(p *corev1.Pod) {
			p.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.RestartContainer}}
		}, `Pod "resize-policy" is invalid: spec: Forbidden: only cpu and memory resources are mutable`},
		{"pod-level added", func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")}}
		}, `Pod "pod-level-added" is invalid: [spec.resources.requests[ephemeral-storage]: Unsupported value: "ephemeral-storage": supported values: "cpu", "hugepages-", "memory", ` +
			`spec: Forbidden: only cpu and memory resources are mutable at pod-level]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := base(strings.ReplaceAll(tc.name, " ", "-"))
			tc.change(p)
			_, err := c.CoreV1().Pods("default").UpdateResize(t.Context(), p.Name, p, metav1.UpdateOptions{})
			require.True(t, apierrors.IsInvalid(err), "%v", err)
			assert.Equal(t, tc.want, err.Error())
		})
	}

	static := createPod(t, c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "static", Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "x"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx", Resources: resources("100m", "", "", "")}}}})
	static.Spec.Containers[0].Resources = resources("200m", "", "", "")
	_, err := c.CoreV1().Pods("default").UpdateResize(t.Context(), "static", static, metav1.UpdateOptions{})
	assert.EqualError(t, err, `Pod "static" is invalid: []: Forbidden: static pods cannot be resized`)
}

// NodeDeclaredFeatureValidator: a pod-level resize of a pod bound to a
// node that does not declare InPlacePodLevelResourcesVerticalScaling is
// refused, 403; one whose node declares it goes through.
func TestResizeNeedsTheNodesDeclaredFeature(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	for _, name := range []string{"bare", "able"} {
		_, err := c.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	able, err := c.CoreV1().Nodes().Get(t.Context(), "able", metav1.GetOptions{})
	require.NoError(t, err)
	able.Status.DeclaredFeatures = []string{"InPlacePodLevelResourcesVerticalScaling"}
	able.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	_, err = c.CoreV1().Nodes().UpdateStatus(t.Context(), able, metav1.UpdateOptions{})
	require.NoError(t, err)
	for _, node := range []string{"bare", "able"} {
		p := createPod(t, c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "on-" + node}, Spec: corev1.PodSpec{NodeName: node,
			Resources:  ptr(resources("100m", "1", "", "")),
			Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}})
		p.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("200m")
		_, err := c.CoreV1().Pods("default").UpdateResize(t.Context(), p.Name, p, metav1.UpdateOptions{})
		if node == "able" {
			assert.NoError(t, err)
			continue
		}
		require.True(t, apierrors.IsForbidden(err), "%v", err)
		assert.EqualError(t, err, `pods "on-bare" is forbidden: pod update requires features InPlacePodLevelResourcesVerticalScaling which are not available on node "bare"`)
	}
}

// Pod-level resources are validated as kube-apiserver v1.37 validates them,
// on create and on resize.
func TestPodLevelResourcesValidated(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	for _, tc := range []struct {
		name     string
		pod, ctr corev1.ResourceRequirements
		want     string
	}{
		{"under-containers", resources("100m", "", "", ""), resources("500m", "", "", ""),
			`spec.resources.requests[cpu]: Invalid value: "100m": must be greater than or equal to aggregate container requests of 500m`},
		{"over-limit", resources("2", "1", "", ""), resources("", "", "", ""),
			`spec.resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1`},
		{"container-over-pod", resources("1", "1", "", ""), resources("", "2", "", ""),
			`spec.resources.containers[0][cpu].limits: Invalid value: "2": must be less than or equal to pod limits of 1`},
		{"unsupported", corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")}},
			resources("", "", "", ""),
			`spec.resources.requests[ephemeral-storage]: Unsupported value: "ephemeral-storage": supported values: "cpu", "hugepages-", "memory"`},
	} {
		_, err := c.CoreV1().Pods("default").Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tc.name},
			Spec: corev1.PodSpec{Resources: &tc.pod, Containers: []corev1.Container{{Name: "app", Image: "nginx", Resources: tc.ctr}}}}, metav1.CreateOptions{})
		require.True(t, apierrors.IsInvalid(err), "%s: %v", tc.name, err)
		assert.Contains(t, err.Error(), tc.want, tc.name)
	}

	// A resize to below what the containers request is refused too; one
	// that sets empty pod-level resources changes nothing a resize may,
	// and one that changes a label keeps the old labels.
	p := createPod(t, c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"app": "a"}},
		Spec: corev1.PodSpec{Resources: ptr(resources("1", "", "", "")),
			Containers: []corev1.Container{{Name: "app", Image: "nginx", Resources: resources("500m", "", "", "")}}}})
	low := p.DeepCopy()
	low.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("100m")
	_, err := c.CoreV1().Pods("default").UpdateResize(t.Context(), "p", low, metav1.UpdateOptions{})
	assert.ErrorContains(t, err, "must be greater than or equal to aggregate container requests of 500m")

	plain := createPod(t, c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx", Resources: resources("100m", "", "", "")}}}})
	plain.Spec.Resources = &corev1.ResourceRequirements{}
	_, err = c.CoreV1().Pods("default").UpdateResize(t.Context(), "plain", plain, metav1.UpdateOptions{})
	assert.EqualError(t, err, `Pod "plain" is invalid: spec: Forbidden: only cpu and memory resources are mutable`)

	p.Labels["app"] = "b"
	p.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
	r, err := c.CoreV1().Pods("default").UpdateResize(t.Context(), "p", p, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "a", r.Labels["app"], "a resize changes no label")
	assert.Equal(t, "2", r.Spec.Resources.Requests.Cpu().String())
}

// A resize's writer owns what it changed, pod-level resources included:
// kube-apiserver's pods/resize storage filters no managed fields (its
// strategy's GetResetFieldsFilter is not on the storage the installer
// reads).
func TestResizeManagedFields(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	p := createPod(t, c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{
		Resources:  ptr(resources("1", "", "", "")),
		Containers: []corev1.Container{{Name: "app", Image: "nginx", Resources: resources("100m", "", "", "")}}}})
	p.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("2")
	p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("200m")
	r, err := c.CoreV1().Pods("default").UpdateResize(t.Context(), "p", p, metav1.UpdateOptions{FieldManager: "resizer"})
	require.NoError(t, err)
	var owned []string
	for _, m := range r.ManagedFields {
		if m.Manager == "resizer" {
			owned = append(owned, m.Subresource+" "+string(m.FieldsV1.Raw))
		}
	}
	assert.Equal(t, []string{`resize {"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{"f:resources":{"f:requests":{"f:cpu":{}}}}},` +
		`"f:resources":{"f:requests":{"f:cpu":{}}}}}`}, owned)
}
