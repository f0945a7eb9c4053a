package apiserver_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The tests of this file compare the cells of Tables with what
// kube-apiserver v1.37's printers (pkg/printers/internalversion) print for
// the same objects.

// names are the NAME cells of rows, in order.
func names(rows []map[string]any) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r["Name"].(string))
	}
	return out
}

// A list marks its effective default class, the one marked default that
// was created last (of those created in the same second, the first by
// name); getting one class does not mark it.
func TestPrintersMoreStorageClass(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	classes := c.StorageV1().StorageClasses()
	for _, sc := range []struct {
		name, annotation string
	}{
		{"zz-beta", "storageclass.beta.kubernetes.io/is-default-class"},
		{"mm-ga", "storageclass.kubernetes.io/is-default-class"}, // created later or in the same second
		{"aa-plain", ""},
	} {
		obj := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: sc.name}, Provisioner: "example.com/disk"}
		if sc.annotation != "" {
			obj.Annotations = map[string]string{sc.annotation: "true"}
		}
		_, err := classes.Create(t.Context(), obj, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	assert.Equal(t, []string{"aa-plain", "mm-ga (default)", "zz-beta"}, names(tableCells(t, c, "/apis/storage.k8s.io/v1/storageclasses")))
	assert.Equal(t, "mm-ga", tableCell(t, c, "/apis/storage.k8s.io/v1/storageclasses/mm-ga", "Name"), "one class is not marked")

	require.NoError(t, classes.Delete(t.Context(), "mm-ga", metav1.DeleteOptions{}))
	assert.Equal(t, []string{"aa-plain", "zz-beta (default)"}, names(tableCells(t, c, "/apis/storage.k8s.io/v1/storageclasses")),
		"the beta annotation marks a default too")
}

// An ingress class marked default says so in its NAME, listed or not;
// PARAMETERS names the kind with its API group.
func TestPrintersMoreIngressClass(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	for _, ic := range []*networkingv1.IngressClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "nginx", Annotations: map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}},
			Spec: networkingv1.IngressClassSpec{Controller: "example.com/nginx", Parameters: &networkingv1.IngressClassParametersReference{
				APIGroup: ptr("k8s.example.com"), Kind: "IngressParameters", Name: "params"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Spec: networkingv1.IngressClassSpec{Controller: "example.com/plain",
			Parameters: &networkingv1.IngressClassParametersReference{Kind: "ConfigMap", Name: "cfg"}}},
	} {
		_, err := c.NetworkingV1().IngressClasses().Create(t.Context(), ic, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	rows := tableCells(t, c, "/apis/networking.k8s.io/v1/ingressclasses")
	require.Len(t, rows, 2)
	assert.Equal(t, "nginx (default)", rows[0]["Name"])
	assert.Equal(t, "IngressParameters.k8s.example.com/params", rows[0]["Parameters"])
	assert.Equal(t, "plain", rows[1]["Name"])
	assert.Equal(t, "ConfigMap/cfg", rows[1]["Parameters"])
	assert.Equal(t, "nginx (default)", tableCell(t, c, "/apis/networking.k8s.io/v1/ingressclasses/nginx", "Name"))
}

// HOSTS shows three hosts and counts every further rule; ADDRESS is the
// sorted set of the load balancer's IPs and host names.
func TestPrintersMoreIngress(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	ingresses := c.NetworkingV1().Ingresses("default")
	backend := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}
	http := &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr(networkingv1.PathTypePrefix), Backend: backend}}}
	rule := func(host string) networkingv1.IngressRule {
		return networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: http}}
	}
	many := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "many"}, Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{
		rule("a.example.com"), rule(""), rule("b.example.com"), rule("c.example.com"), rule("d.example.com")}}}
	many, err := ingresses.Create(t.Context(), many, metav1.CreateOptions{})
	require.NoError(t, err)
	many.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{
		{IP: "10.0.0.2"}, {Hostname: "lb.example.com"}, {IP: "10.0.0.1"}, {IP: "10.0.0.2"}}
	_, err = ingresses.UpdateStatus(t.Context(), many, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = ingresses.Create(t.Context(), &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "three"}, Spec: networkingv1.IngressSpec{
		Rules: []networkingv1.IngressRule{rule("a.example.com"), rule("b.example.com"), rule("c.example.com")}}}, metav1.CreateOptions{})
	require.NoError(t, err)

	row := tableCells(t, c, "/apis/networking.k8s.io/v1/namespaces/default/ingresses/many")[0]
	assert.Equal(t, "a.example.com,b.example.com,c.example.com + 2 more...", row["Hosts"])
	assert.Equal(t, "10.0.0.1,10.0.0.2,lb.example.com", row["Address"])
	assert.Equal(t, "a.example.com,b.example.com,c.example.com",
		tableCell(t, c, "/apis/networking.k8s.io/v1/namespaces/default/ingresses/three", "Hosts"))
}

// STATUS takes Complete, then Failed, then deletion, then Suspended,
// FailureTarget and SuccessCriteriaMet.
func TestPrintersMoreJob(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	jobs := c.BatchV1().Jobs("default")
	cond := func(t batchv1.JobConditionType) batchv1.JobCondition {
		return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: "Test"}
	}
	now := metav1.Now()
	for _, tc := range []struct {
		name, status string
		deleted      bool
		conditions   []batchv1.JobCondition
	}{
		{name: "suspended-deleted", status: "Terminating", deleted: true, conditions: []batchv1.JobCondition{cond(batchv1.JobSuspended)}},
		{name: "complete-deleted", status: "Complete", deleted: true,
			conditions: []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet), cond(batchv1.JobComplete)}},
		{name: "failure-target", status: "FailureTarget", conditions: []batchv1.JobCondition{cond(batchv1.JobFailureTarget)}},
		{name: "running", status: "Running"},
	} {
		job, err := jobs.Create(t.Context(), &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: tc.name, Finalizers: []string{"example.com/hold"}},
			Spec: batchv1.JobSpec{Template: jobTemplate()}}, metav1.CreateOptions{})
		require.NoError(t, err)
		job.Status.Conditions, job.Status.StartTime = tc.conditions, &now
		_, err = jobs.UpdateStatus(t.Context(), job, metav1.UpdateOptions{})
		require.NoError(t, err)
		if tc.deleted {
			require.NoError(t, jobs.Delete(t.Context(), tc.name, metav1.DeleteOptions{}))
		}
		assert.Equal(t, tc.status, tableCell(t, c, "/apis/batch/v1/namespaces/default/jobs/"+tc.name, "Status"), tc.name)
	}
}

// CONTROLLER is "kind.group/name", lowercased.
func TestPrintersMoreControllerRevision(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	for _, r := range []struct{ name, apiVersion, kind, want string }{
		{"web-1", "apps/v1", "StatefulSet", "statefulset.apps/web"},
		{"rc-1", "v1", "ReplicationController", "replicationcontroller/web"},
	} {
		_, err := c.AppsV1().ControllerRevisions("default").Create(t.Context(), &appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{Name: r.name, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: r.apiVersion, Kind: r.kind, Name: "web", UID: "0b6b4f4e-1d6c-4c4c-9f3a-2f2b1f2e5a01", Controller: ptr(true)}}},
			Data: runtime.RawExtension{Raw: []byte(`{}`)}, Revision: 1,
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		assert.Equal(t, r.want, tableCell(t, c, "/apis/apps/v1/namespaces/default/controllerrevisions/"+r.name, "Controller"))
	}
}

// TARGETS prints every kind of metric with the status metric at its
// index, the first two of them, in both served versions.
func TestPrintersMoreHPA(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	q := resource.MustParse
	hpas := c.AutoscalingV2().HorizontalPodAutoscalers("default")
	for _, tc := range []struct {
		name, want string
		metrics    []autoscalingv2.MetricSpec
		current    []autoscalingv2.MetricStatus
	}{
		{name: "cpu-pods", want: "cpu: 30%/50%, 500m/1k",
			metrics: []autoscalingv2.MetricSpec{resourceMetric("cpu", autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr[int32](50)}),
				{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "packets"},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr(q("1k"))}}}},
			current: []autoscalingv2.MetricStatus{
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{Name: "cpu",
					Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr[int32](30), AverageValue: ptr(q("150m"))}}},
				{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricStatus{Metric: autoscalingv2.MetricIdentifier{Name: "packets"},
					Current: autoscalingv2.MetricValueStatus{AverageValue: ptr(q("500m"))}}}}},
		{name: "object-external", want: "5/10, <unknown>/30 (avg)",
			metrics: []autoscalingv2.MetricSpec{objectMetric(autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: ptr(q("10"))}),
				externalMetric(autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr(q("30"))})},
			current: []autoscalingv2.MetricStatus{{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricStatus{
				DescribedObject: objectMetric(autoscalingv2.MetricTarget{}).Object.DescribedObject, Metric: autoscalingv2.MetricIdentifier{Name: "requests"},
				Current: autoscalingv2.MetricValueStatus{Value: ptr(q("5"))}}}}},
		{name: "more", want: "memory: <unknown>/100Mi, cpu: <unknown>/200m + 1 more...",
			metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ContainerResourceMetricSourceType, ContainerResource: &autoscalingv2.ContainerResourceMetricSource{
				Name: "memory", Container: "app", Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr(q("100Mi"))}}},
				resourceMetric("cpu", autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr(q("200m"))}),
				externalMetric(autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: ptr(q("7"))})}},
	} {
		hpa, err := hpas.Create(t.Context(), &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: tc.name},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 3, Metrics: tc.metrics,
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		hpa.Status.CurrentMetrics = tc.current
		_, err = hpas.UpdateStatus(t.Context(), hpa, metav1.UpdateOptions{})
		require.NoError(t, err)
		for _, v := range []string{"v1", "v2"} {
			got := tableCell(t, c, "/apis/autoscaling/"+v+"/namespaces/default/horizontalpodautoscalers/"+tc.name, "Targets")
			assert.Equal(t, tc.want, got, "%s in autoscaling/%s", tc.name, v)
		}
	}
}

func resourceMetric(name corev1.ResourceName, target autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: name, Target: target}}
}

func objectMetric(target autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
		DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Name: "main"},
		Metric:          autoscalingv2.MetricIdentifier{Name: "requests"}, Target: target}}
}

func externalMetric(target autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: "queue"}, Target: target}}
}

// A list of flow schemas prints by matching precedence, then name; the
// numbers of priority levels are numbers.
func TestPrintersMoreFlowSchema(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	fc := c.FlowcontrolV1()
	queued := &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "queued"}, Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
		Type: flowcontrolv1.PriorityLevelEnablementLimited, Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: ptr[int32](10),
			LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue,
				Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 16, HandSize: 4, QueueLengthLimit: 20}}}}}
	rejecting := &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "rejecting"}, Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
		Type: flowcontrolv1.PriorityLevelEnablementLimited, Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
			LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}}}}
	for _, pl := range []*flowcontrolv1.PriorityLevelConfiguration{queued, rejecting} {
		_, err := fc.PriorityLevelConfigurations().Create(t.Context(), pl, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for _, fs := range []struct {
		name       string
		precedence int32
	}{{"a-fs", 500}, {"b-fs", 500}, {"c-fs", 100}} {
		_, err := fc.FlowSchemas().Create(t.Context(), &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: fs.name},
			Spec: flowcontrolv1.FlowSchemaSpec{PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "queued"},
				MatchingPrecedence: fs.precedence}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	rows := tableCells(t, c, "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas")
	assert.True(t, slices.IsSortedFunc(rows, func(a, b map[string]any) int {
		if pa, pb := a["MatchingPrecedence"].(float64), b["MatchingPrecedence"].(float64); pa != pb {
			return int(pa - pb)
		}
		return compareNames(a, b)
	}), "rows by precedence, then name: %v", names(rows))
	ours := slices.DeleteFunc(names(rows), func(n string) bool { return !slices.Contains([]string{"a-fs", "b-fs", "c-fs"}, n) })
	assert.Equal(t, []string{"c-fs", "a-fs", "b-fs"}, ours)

	row := tableCells(t, c, "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations/queued")[0]
	assert.Equal(t, []any{float64(10), float64(16), float64(4), float64(20)},
		[]any{row["NominalConcurrencyShares"], row["Queues"], row["HandSize"], row["QueueLengthLimit"]})
	row = tableCells(t, c, "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations/rejecting")[0]
	assert.Equal(t, []any{float64(30), "<none>", "<none>", "<none>"},
		[]any{row["NominalConcurrencyShares"], row["Queues"], row["HandSize"], row["QueueLengthLimit"]})
}

func compareNames(a, b map[string]any) int {
	switch an, bn := a["Name"].(string), b["Name"].(string); {
	case an < bn:
		return -1
	case an > bn:
		return 1
	}
	return 0
}

// CONDITION is Denied, Approved or Pending, then Failed, then Issued; no
// other condition type.
func TestPrintersMoreCSR(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	csrs := c.CertificatesV1().CertificateSigningRequests()
	csr, err := csrs.Create(t.Context(), newCSR(t, "alice", "example.com/signer"), metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "Pending", tableCell(t, c, "/apis/certificates.k8s.io/v1/certificatesigningrequests/alice", "Condition"))

	csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Test"}}
	csr, err = csrs.UpdateApproval(t.Context(), "alice", csr, metav1.UpdateOptions{})
	require.NoError(t, err)
	csr.Status.Conditions = append(csr.Status.Conditions,
		certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue, Reason: "Test"},
		certificatesv1.CertificateSigningRequestCondition{Type: "Checked", Status: corev1.ConditionTrue, Reason: "Test"})
	csr.Status.Certificate = selfSignedPEM(t)
	_, err = csrs.UpdateStatus(t.Context(), csr, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "Approved,Failed,Issued", tableCell(t, c, "/apis/certificates.k8s.io/v1/certificatesigningrequests/alice", "Condition"))
}

// A claim's STATE starts with "deleted"; a slice without a node has an
// empty NODE; a taint rule's TIMEADDED is an age.
func TestPrintersMoreResource(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	r := c.ResourceV1()
	spec := resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
		{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com"}}}}}
	for _, name := range []string{"allocated", "pending"} {
		claim, err := r.ResourceClaims("default").Create(t.Context(), &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{"example.com/hold"}}, Spec: spec}, metav1.CreateOptions{})
		require.NoError(t, err)
		if name == "allocated" {
			claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
				{Request: "gpu", Driver: "gpu.example.com", Pool: "pool", Device: "gpu-0"}}}}
			claim.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "0b6b4f4e-1d6c-4c4c-9f3a-2f2b1f2e5a02"}}
			_, err = r.ResourceClaims("default").UpdateStatus(t.Context(), claim, metav1.UpdateOptions{})
			require.NoError(t, err)
		}
		require.NoError(t, r.ResourceClaims("default").Delete(t.Context(), name, metav1.DeleteOptions{}))
	}
	assert.Equal(t, "deleted,allocated,reserved", tableCell(t, c, "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/allocated", "State"))
	assert.Equal(t, "deleted", tableCell(t, c, "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/pending", "State"))

	_, err := r.ResourceSlices().Create(t.Context(), &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "everywhere"},
		Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", AllNodes: ptr(true),
			Pool: resourcev1.ResourcePool{Name: "pool", ResourceSliceCount: 1}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "", tableCell(t, c, "/apis/resource.k8s.io/v1/resourceslices/everywhere", "Node"))

	added := metav1.NewTime(time.Now().Add(-72*time.Hour - 30*time.Minute).Truncate(time.Second)) // "3d" for half an hour either way
	_, err = r.DeviceTaintRules().Create(t.Context(), &resourcev1.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "broken"},
		Spec: resourcev1.DeviceTaintRuleSpec{Taint: resourcev1.DeviceTaint{Key: "example.com/broken", Effect: resourcev1.DeviceTaintEffectNoSchedule,
			TimeAdded: &added}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "3d", tableCell(t, c, "/apis/resource.k8s.io/v1/devicetaintrules/broken", "TimeAdded"))
}

// PARAMREF is the param's name, else its selector as Go prints it, else
// <unset>.
func TestPrintersMoreAdmissionPolicyBinding(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	a := c.AdmissionregistrationV1()
	byLabels := &admissionv1.ParamRef{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
		ParameterNotFoundAction: ptr(admissionv1.DenyAction)}
	byExpression := &admissionv1.ParamRef{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}, ParameterNotFoundAction: ptr(admissionv1.AllowAction)}
	_, err := a.ValidatingAdmissionPolicyBindings().Create(t.Context(), &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "by-labels"}, Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "p",
			ParamRef: byLabels, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = a.MutatingAdmissionPolicyBindings().Create(t.Context(), &admissionv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "by-expression"}, Spec: admissionv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "p",
			ParamRef: byExpression}}, metav1.CreateOptions{})
	require.NoError(t, err)

	assert.Equal(t, "&LabelSelector{MatchLabels:map[string]string{env: prod,},MatchExpressions:[]LabelSelectorRequirement{},}",
		tableCell(t, c, "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/by-labels", "ParamRef"))
	assert.Equal(t, "&LabelSelector{MatchLabels:map[string]string{},MatchExpressions:[]LabelSelectorRequirement{LabelSelectorRequirement{Key:tier,Operator:In,Values:[a b],},},}",
		tableCell(t, c, "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings/by-expression", "ParamRef"))
}

// PARENTREF is "resource.group[/namespace]/name", lowercased.
func TestPrintersMoreIPAddress(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	for _, ip := range []struct {
		name string
		ref  networkingv1.ParentReference
		want string
	}{
		{"192.168.7.1", networkingv1.ParentReference{Group: "gateway.networking.k8s.io", Resource: "Gateways", Namespace: "ns", Name: "gw"},
			"gateways.gateway.networking.k8s.io/ns/gw"},
		{"2001:db8::7", networkingv1.ParentReference{Resource: "services", Name: "dns"}, "services/dns"},
	} {
		_, err := c.NetworkingV1().IPAddresses().Create(t.Context(), &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: ip.name},
			Spec: networkingv1.IPAddressSpec{ParentRef: &ip.ref}}, metav1.CreateOptions{})
		require.NoError(t, err)
		assert.Equal(t, ip.want, tableCell(t, c, "/apis/networking.k8s.io/v1/ipaddresses/"+ip.name, "ParentRef"))
	}
}

// STATUS is the last true condition of Running, Failed and Succeeded.
func TestPrintersMoreStorageVersionMigration(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	migrations := c.StoragemigrationV1().StorageVersionMigrations()
	cond := func(t string) metav1.Condition {
		return metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.Now()}
	}
	for _, tc := range []struct {
		name, want string
		conditions []metav1.Condition
	}{
		{"done", "Succeeded", []metav1.Condition{cond("Running"), cond("Succeeded"), cond("Checked")}},
		{"other", "Unknown", []metav1.Condition{cond("Checked")}},
	} {
		m, err := migrations.Create(t.Context(), &storagemigrationv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: tc.name},
			Spec: storagemigrationv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Group: "apps", Resource: "deployments"}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		m.Status.Conditions = tc.conditions
		_, err = migrations.UpdateStatus(t.Context(), m, metav1.UpdateOptions{})
		require.NoError(t, err)
		assert.Equal(t, tc.want, tableCell(t, c, "/apis/storagemigration.k8s.io/v1/storageversionmigrations/"+tc.name, "Status"), tc.name)
	}
}

// /scale prints a Scale: NAME (without the name format), DESIRED,
// AVAILABLE and AGE.
func TestPrintersMoreScale(t *testing.T) {
	t.Parallel()
	c := quietServer(t)
	labels := map[string]string{"app": "web"}
	d, err := c.AppsV1().Deployments("default").Create(t.Context(), &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	d.Status.Replicas = 2
	_, err = c.AppsV1().Deployments("default").UpdateStatus(t.Context(), d, metav1.UpdateOptions{})
	require.NoError(t, err)

	tab := table(t, c, "/apis/apps/v1/namespaces/default/deployments/web/scale")
	var columns []string
	for _, col := range tab.ColumnDefinitions {
		columns = append(columns, col.Name+":"+col.Type+":"+col.Format)
	}
	assert.Equal(t, []string{"Name:string:", "Desired:integer:", "Available:integer:", "Age:string:"}, columns)
	require.Len(t, tab.Rows, 1)
	assert.Equal(t, []any{"web", float64(3), float64(2)}, tab.Rows[0].Cells[:3])
}
