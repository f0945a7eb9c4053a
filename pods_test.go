package apiserver_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

func TestPods(t *testing.T) {
	t.Parallel()
	srv := apiservertest.Start(t)
	pods := clientset(t, srv).CoreV1().Pods("default")
	ctx := t.Context()

	pod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}}},
		}}
	}
	p, err := pods.Create(ctx, pod("scheduled", "node-1"), metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, corev1.PodPending, p.Status.Phase)
	assert.Equal(t, corev1.PodQOSGuaranteed, p.Status.QOSClass, "requests default to limits")
	assert.Equal(t, resource.MustParse("100m"), p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU])
	assert.Equal(t, corev1.PullIfNotPresent, p.Spec.Containers[0].ImagePullPolicy)
	assert.EqualValues(t, 30, *p.Spec.TerminationGracePeriodSeconds)

	// Only images (and a few other fields) may change.
	p.Spec.Containers[0].Image = "registry.example/app:v2"
	p, err = pods.Update(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	// An update that leaves out what admission set at create (priority,
	// preemption policy, default tolerations) has it set again, as
	// kube-apiserver's Priority and DefaultTolerationSeconds plugins do.
	p.Spec.Priority, p.Spec.PreemptionPolicy, p.Spec.Tolerations = nil, nil, nil
	p.Spec.Containers[0].Image = "registry.example/app:v3"
	p, err = pods.Update(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NotNil(t, p.Spec.Priority)
	assert.Equal(t, int32(0), *p.Spec.Priority)
	assert.Len(t, p.Spec.Tolerations, 2)
	p.Spec.Containers[0].Name = "renamed"
	_, err = pods.Update(ctx, p, metav1.UpdateOptions{})
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	// The message ends with the diff of the spec, as kube-apiserver's.
	assert.Contains(t, err.Error(), "pod updates may not change fields other than")
	assert.Contains(t, err.Error(), "-   \"Name\": \"app\",\n+   \"Name\": \"renamed\",")

	// The kubelet's view arrives through /status.
	p, err = pods.Get(ctx, "scheduled", metav1.GetOptions{})
	require.NoError(t, err)
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP = "10.244.0.7"
	_, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	running, err := pods.List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Running,spec.nodeName=node-1"})
	require.NoError(t, err)
	require.Len(t, running.Items, 1)

	// A pod on a node is deleted gracefully and waits for its kubelet; an
	// unscheduled one goes at once.
	require.NoError(t, pods.Delete(ctx, "scheduled", metav1.DeleteOptions{}))
	p, err = pods.Get(ctx, "scheduled", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, p.DeletionTimestamp)
	assert.EqualValues(t, 30, *p.DeletionGracePeriodSeconds)
	zero := int64(0)
	require.NoError(t, pods.Delete(ctx, "scheduled", metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	_, err = pods.Get(ctx, "scheduled", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "%v", err)

	pending := pod("pending", "")
	pending.Spec.SchedulerName = "no-such-scheduler" // stays unscheduled
	_, err = pods.Create(ctx, pending, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, pods.Delete(ctx, "pending", metav1.DeleteOptions{}))
	_, err = pods.Get(ctx, "pending", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "%v", err)

	bad := pod("bad", "")
	bad.Spec.Containers = append(bad.Spec.Containers, bad.Spec.Containers[0])
	_, err = pods.Create(ctx, bad, metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	assert.Contains(t, err.Error(), `spec.containers[1].name: Duplicate value: "app"`)
}

// pods/binding (what a scheduler posts), pods/eviction (honouring pod
// disruption budgets), pods/ephemeralcontainers and pods/resize.
func TestPodSubresources(t *testing.T) {
	t.Parallel()
	// The test binds pods itself and writes its budget's status: no
	// scheduler may bind them first, no disruption controller rewrite it.
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{
		Controllers: []controllers.Name{"*", "-" + controllers.Scheduler, "-" + controllers.Disruption}}))
	c := clientset(t, srv)
	ctx := t.Context()
	newPod := func(name string) *corev1.Pod {
		p, err := c.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		return p
	}

	newPod("a")
	err := c.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	p, err := c.CoreV1().Pods("default").Get(ctx, "a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "node-1", p.Spec.NodeName)
	require.NotEmpty(t, p.Status.Conditions)
	assert.Equal(t, corev1.PodScheduled, p.Status.Conditions[0].Type)
	err = c.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Target: corev1.ObjectReference{Kind: "Node", Name: "node-2"}}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsConflict(err), "already bound: %v", err)

	// A running pod covered by a budget that allows no disruption cannot be
	// evicted (429); once the budget allows one, it can.
	p.Status.Phase = corev1.PodRunning
	_, err = c.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	pdb, err := c.PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The status is the disruption controller's job; a budget it has not
	// seen yet answers 429 with Retry-After: 10, which client-go waits out.
	pdb.Status.ObservedGeneration = pdb.Generation
	pdb, err = c.PolicyV1().PodDisruptionBudgets("default").UpdateStatus(ctx, pdb, metav1.UpdateOptions{})
	require.NoError(t, err)
	evict := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default"}}
	err = c.PolicyV1().Evictions("default").Evict(ctx, evict)
	require.True(t, apierrors.IsTooManyRequests(err), "%v", err)
	assert.Contains(t, err.Error(), "Cannot evict pod as it would violate the pod's disruption budget")
	pdb.Status.DisruptionsAllowed = 1
	_, err = c.PolicyV1().PodDisruptionBudgets("default").UpdateStatus(ctx, pdb, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, c.PolicyV1().Evictions("default").Evict(ctx, evict))
	pdb, err = c.PolicyV1().PodDisruptionBudgets("default").Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Zero(t, pdb.Status.DisruptionsAllowed, "the eviction took the budget's disruption")
	assert.Contains(t, pdb.Status.DisruptedPods, "a")
	p, err = c.CoreV1().Pods("default").Get(ctx, "a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotNil(t, p.DeletionTimestamp, "a bound pod is deleted gracefully")

	// Ephemeral containers are added through their subresource only.
	b := newPod("b")
	b.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}}
	b, err = c.CoreV1().Pods("default").UpdateEphemeralContainers(ctx, "b", b, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Len(t, b.Spec.EphemeralContainers, 1)
	b.Spec.EphemeralContainers = nil
	_, err = c.CoreV1().Pods("default").UpdateEphemeralContainers(ctx, "b", b, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "removing one: %v", err)

	// Resize changes resources, and only them.
	b, err = c.CoreV1().Pods("default").Get(ctx, "b", metav1.GetOptions{})
	require.NoError(t, err)
	b.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("200m")
	b.Spec.Containers[0].Image = "nginx:2"
	r, err := c.CoreV1().Pods("default").UpdateResize(ctx, "b", b, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "200m", r.Spec.Containers[0].Resources.Requests.Cpu().String())
	assert.Equal(t, "nginx", r.Spec.Containers[0].Image, "resize changes resources only")
}

// A gated pod's update may remove gates (not add them) and add to its node
// selector (not change it), as kube-apiserver allows before scheduling.
func TestGatedPodUpdates(t *testing.T) {
	t.Parallel()
	// The pod must stay unbound once its gates are gone: no scheduler.
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Controllers: []controllers.Name{"*", "-" + controllers.Scheduler}}))
	pods := clientset(t, srv).CoreV1().Pods("default")
	p, err := pods.Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: corev1.PodSpec{
		SchedulingGates: []corev1.PodSchedulingGate{{Name: "one"}, {Name: "two"}}, NodeSelector: map[string]string{"disk": "ssd"},
		Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	update := specUpdater(t, pods, &p)
	err = update(func(s *corev1.PodSpec) {
		s.SchedulingGates = append(s.SchedulingGates, corev1.PodSchedulingGate{Name: "three"})
	})
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	assert.Contains(t, err.Error(), "spec.schedulingGates[2].name: Forbidden: only deletion is allowed, but found new scheduling gate 'three'")
	err = update(func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"disk": "hdd"} })
	require.True(t, apierrors.IsInvalid(err), "%v", err)
	assert.Contains(t, err.Error(), "only additions to spec.nodeSelector are allowed (no mutations or deletions)")

	require.NoError(t, update(func(s *corev1.PodSpec) { s.SchedulingGates = s.SchedulingGates[1:]; s.NodeSelector["zone"] = "z1" }))
	assert.Equal(t, []corev1.PodSchedulingGate{{Name: "two"}}, p.Spec.SchedulingGates)
	assert.Equal(t, map[string]string{"disk": "ssd", "zone": "z1"}, p.Spec.NodeSelector)

	require.NoError(t, update(func(s *corev1.PodSpec) { s.SchedulingGates = nil }))
	err = update(func(s *corev1.PodSpec) { s.NodeSelector["rack"] = "r1" })
	assert.True(t, apierrors.IsInvalid(err), "no longer gated: %v", err)
}

// Fields of features off in v1.37 are dropped on create, as
// kube-apiserver's DropDisabledPodFields drops them: a volume mount's
// bindMountOptions (VolumeBindMountOptions, alpha).
func TestPodDisabledFieldsDropped(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	p, err := c.CoreV1().Pods("default").Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		Containers: []corev1.Container{{Name: "app", Image: "nginx",
			VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data", BindMountOptions: []string{"noexec"}}}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Nil(t, p.Spec.Containers[0].VolumeMounts[0].BindMountOptions)
}

// A pod update may not add or remove containers, and may set or lower
// activeDeadlineSeconds, never raise or unset it: kube-apiserver's
// messages.
func TestPodUpdateContainersAndDeadline(t *testing.T) {
	t.Parallel()
	pods := quietServer(t).CoreV1().Pods("default")
	p, err := pods.Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	update := specUpdater(t, pods, &p)
	err = update(func(s *corev1.PodSpec) {
		s.Containers = append(s.Containers, corev1.Container{Name: "b", Image: "busybox"})
	})
	assert.EqualError(t, err, `Pod "p" is invalid: spec.containers: Forbidden: pod updates may not add or remove containers`)
	require.NoError(t, update(func(s *corev1.PodSpec) { s.ActiveDeadlineSeconds = ptr[int64](60) }))
	err = update(func(s *corev1.PodSpec) { s.ActiveDeadlineSeconds = ptr[int64](120) })
	assert.EqualError(t, err, `Pod "p" is invalid: spec.activeDeadlineSeconds: Invalid value: 120: must be less than or equal to previous value`)
	err = update(func(s *corev1.PodSpec) { s.ActiveDeadlineSeconds = nil })
	assert.EqualError(t, err, `Pod "p" is invalid: spec.activeDeadlineSeconds: Invalid value: null: must not update from a positive integer to nil value`)
	require.NoError(t, update(func(s *corev1.PodSpec) { s.ActiveDeadlineSeconds = ptr[int64](30) }))
}

// specUpdater returns a function that updates *p's spec as mutate says and
// keeps the updated pod in *p when the update succeeds.
func specUpdater(t *testing.T, pods corev1client.PodInterface, p **corev1.Pod) func(mutate func(*corev1.PodSpec)) error {
	return func(mutate func(*corev1.PodSpec)) error {
		q := (*p).DeepCopy()
		mutate(&q.Spec)
		u, err := pods.Update(t.Context(), q, metav1.UpdateOptions{})
		if err == nil {
			*p = u
		}
		return err
	}
}

// A pod in a user namespace may not share the host's network, PID or IPC
// namespace (UserNamespacesHostNetworkSupport is off in v1.37).
func TestPodHostUsersAndHostNamespaces(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	_, err := c.CoreV1().Pods("default").Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{
		HostUsers: ptr(false), HostNetwork: true, HostPID: true,
		Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}, metav1.CreateOptions{})
	assert.EqualError(t, err, "Pod \"p\" is invalid: [spec.hostNetwork: Forbidden: when `hostUsers` is false, spec.HostPID: Forbidden: when `hostUsers` is false]")
}

// activeDeadlineSeconds is 1 to MaxInt32 on create; an update that unsets
// it is refused with what else the update does wrong.
func TestPodActiveDeadlineRange(t *testing.T) {
	t.Parallel()
	pods := quietServer(t).CoreV1().Pods("default")
	_, err := pods.Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "zero"}, Spec: corev1.PodSpec{
		ActiveDeadlineSeconds: ptr[int64](0), Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}, metav1.CreateOptions{})
	assert.EqualError(t, err, `Pod "zero" is invalid: spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive`)
	p, err := pods.Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{
		ActiveDeadlineSeconds: ptr[int64](60), Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	err = specUpdater(t, pods, &p)(func(s *corev1.PodSpec) { s.ActiveDeadlineSeconds, s.Hostname = nil, "other" })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.activeDeadlineSeconds: Invalid value: null: must not update from a positive integer to nil value")
	assert.Contains(t, err.Error(), "spec: Forbidden: pod updates may not change fields other than")
}

// A container's resources are validated as kube-apiserver v1.37 validates
// them: names, quantities, requests against limits, hugepages, claims.
func TestContainerResourcesValidated(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	q := resource.MustParse
	for _, tc := range []struct {
		name   string
		res    corev1.ResourceRequirements
		claims []corev1.PodResourceClaim
		want   []string
	}{
		{"negative", corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("-1")}},
			nil, []string{`spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0`}},
		{"extended-not-whole", corev1.ResourceRequirements{Limits: corev1.ResourceList{"example.com/gpu": q("500m")}},
			nil, []string{`spec.containers[0].resources.limits[example.com/gpu]: Invalid value: "500m": must be an integer`}},
		{"extended-without-limit", corev1.ResourceRequirements{Requests: corev1.ResourceList{"example.com/gpu": q("1")}},
			nil, []string{`spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources`}},
		{"extended-below-limit", corev1.ResourceRequirements{Requests: corev1.ResourceList{"example.com/gpu": q("1")},
			Limits: corev1.ResourceList{"example.com/gpu": q("2")}},
			nil, []string{`spec.containers[0].resources.requests: Invalid value: "1": must be equal to example.com/gpu limit of 2`}},
		{"hugepages-part-page", corev1.ResourceRequirements{Limits: corev1.ResourceList{"hugepages-2Mi": q("3Mi"), corev1.ResourceMemory: q("1Gi")}},
			nil, []string{`spec.containers[0].resources.limits[hugepages-2Mi]: Invalid value: "3Mi": 3Mi is not positive integer multiple of hugepages-2Mi`}},
		{"hugepages-alone", corev1.ResourceRequirements{Limits: corev1.ResourceList{"hugepages-2Mi": q("4Mi")}},
			nil, []string{`spec.containers[0].resources: Forbidden: HugePages require cpu or memory`}},
		{"names", corev1.ResourceRequirements{Limits: corev1.ResourceList{"pods": q("1"), "foo": q("1"), "kubernetes.io/x": q("1"), "example.com/": q("1")}},
			nil, []string{
				`spec.containers[0].resources.limits[example.com/]: Invalid value: "example.com/": name part must be non-empty`,
				`spec.containers[0].resources.limits[foo]: Invalid value: "foo": must be a standard resource type or fully qualified`,
				`spec.containers[0].resources.limits[foo]: Invalid value: "foo": must be a standard resource for containers`,
				`spec.containers[0].resources.limits[pods]: Invalid value: "pods": must be a standard resource for containers`}},
		{"claims", corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}, {Name: "gpu"}, {Name: ""}, {Name: "other", Request: "Bad_Request"}}},
			[]corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr("gpu-claim")}}, []string{
				`spec.containers[0].resources.claims[1]: Duplicate value: "gpu"`,
				`spec.containers[0].resources.claims[2]: Required value`,
				`spec.containers[0].resources.claims[3].request: Invalid value: "Bad_Request": a lowercase RFC 1123 label`,
				`spec.containers[0].resources.claims[3]: Not found: "other": must be one of the names in pod.spec.resourceClaims: gpu`}},
	} {
		_, err := c.CoreV1().Pods("default").Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tc.name},
			Spec: corev1.PodSpec{ResourceClaims: tc.claims, Containers: []corev1.Container{{Name: "app", Image: "nginx", Resources: tc.res}}}},
			metav1.CreateOptions{})
		require.True(t, apierrors.IsInvalid(err), "%s: %v", tc.name, err)
		for _, want := range tc.want {
			assert.Contains(t, err.Error(), want, tc.name)
		}
	}
	_, err := c.CoreV1().Pods("default").Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fine"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"example.com/gpu": q("2"), "hugepages-2Mi": q("4Mi"), corev1.ResourceCPU: q("100m")},
			Limits:   corev1.ResourceList{"example.com/gpu": q("2"), "hugepages-2Mi": q("4Mi")}}}}}}, metav1.CreateOptions{})
	assert.NoError(t, err)
}

// As kube-apiserver, a pod's identical validation errors are reported once,
// regular containers are validated before init containers and a duplicate
// name comes after a container's other errors.
func TestPodValidationErrorsOnceInOrder(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	q := resource.MustParse
	_, err := c.CoreV1().Pods("default").Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Spec: corev1.PodSpec{
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr("gpu-claim")}},
			InitContainers: []corev1.Container{{Name: "app", Image: "busybox", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceMemory: q("-1")}}}},
			Containers: []corev1.Container{{Name: "app", Image: "nginx", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{"example.com/a": q("1"), "example.com/b": q("1")},
				Claims:   []corev1.ResourceClaim{{Name: "gpu", Request: "one"}, {Name: "gpu", Request: "two"}, {Name: "gpu"}}}}}}},
		metav1.CreateOptions{})
	var status apierrors.APIStatus
	require.ErrorAs(t, err, &status)
	var got []string
	for _, cause := range status.Status().Details.Causes {
		got = append(got, cause.Field+": "+cause.Message)
	}
	assert.Equal(t, []string{
		"spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources",
		`spec.containers[0].resources.claims[2]: Duplicate value: "gpu"`,
		`spec.initContainers[0].resources.requests[memory]: Invalid value: "-1": must be greater than or equal to 0`,
		`spec.initContainers[0].name: Duplicate value: "app"`,
	}, got)
}

// An image with leading or trailing whitespace is refused in a Pod, not in
// a template, as kube-apiserver does; a blank one is required in both.
func TestImageWhitespace(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	_, err := c.CoreV1().Pods("default").Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: " nginx"}}}}, metav1.CreateOptions{})
	assert.ErrorContains(t, err, `spec.containers[0].image: Invalid value: " nginx": must not have leading or trailing whitespace`)
	_, err = c.CoreV1().PodTemplates("default").Create(t.Context(), &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "t"},
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: " "}}}}}, metav1.CreateOptions{})
	assert.NoError(t, err, "a template's image is only required")
	_, err = c.CoreV1().PodTemplates("default").Create(t.Context(), &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "empty"},
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}}, metav1.CreateOptions{})
	assert.ErrorContains(t, err, `template.spec.containers[0].image: Required value`)
}
