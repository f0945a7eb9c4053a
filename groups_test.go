package apiserver_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// groupCase is one group's check: an object is created, read back with the
// defaults a 1.37.2 server gives it (as measured by parity/), and an
// invalid one is refused with the field path kube-apiserver reports.
type groupCase struct {
	name       string
	gvr        schema.GroupVersionResource
	namespaced bool
	// object is created; "{{csr}}" in it stands for a base64 PEM
	// certificate request.
	object string
	// want holds fields (top-level keys) the read-back object must have
	// exactly.
	want         string
	invalid      string
	invalidField string
}

// groupCases cover the groups added for kube-apiserver 1.37's default set.
var groupCases = []groupCase{
	{name: "storageclass", gvr: schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses"},
		object:  `{apiVersion: storage.k8s.io/v1, kind: StorageClass, metadata: {name: fast}, provisioner: example.com/disk}`,
		want:    `{provisioner: example.com/disk, reclaimPolicy: Delete, volumeBindingMode: Immediate}`,
		invalid: `{apiVersion: storage.k8s.io/v1, kind: StorageClass, metadata: {name: bad}, provisioner: ""}`, invalidField: "provisioner"},
	{name: "csidriver", gvr: schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "csidrivers"},
		object: `{apiVersion: storage.k8s.io/v1, kind: CSIDriver, metadata: {name: disk.example.com}, spec: {}}`,
		want: `{spec: {attachRequired: true, podInfoOnMount: false, volumeLifecycleModes: [Persistent], storageCapacity: false,
			fsGroupPolicy: ReadWriteOnceWithFSType, requiresRepublish: false, seLinuxMount: false, preventPodSchedulingIfMissing: false}}`},
	{name: "volumeattachment", gvr: schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "volumeattachments"},
		object:  `{apiVersion: storage.k8s.io/v1, kind: VolumeAttachment, metadata: {name: va}, spec: {attacher: disk.example.com, nodeName: node-1, source: {persistentVolumeName: pv}}}`,
		want:    `{status: {attached: false}}`,
		invalid: `{apiVersion: storage.k8s.io/v1, kind: VolumeAttachment, metadata: {name: bad}, spec: {attacher: example.com/disk, nodeName: node-1, source: {persistentVolumeName: pv}}}`, invalidField: "spec.attacher"},
	{name: "endpointslice", gvr: schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}, namespaced: true,
		object:  `{apiVersion: discovery.k8s.io/v1, kind: EndpointSlice, metadata: {name: web}, addressType: IPv4, endpoints: [{addresses: [10.1.2.3]}], ports: [{port: 80}]}`,
		want:    `{endpoints: [{addresses: [10.1.2.3], conditions: {}}], ports: [{name: "", port: 80, protocol: TCP}]}`,
		invalid: `{apiVersion: discovery.k8s.io/v1, kind: EndpointSlice, metadata: {name: bad}, addressType: IPv4, endpoints: [{addresses: [not-an-ip]}]}`, invalidField: "endpoints[0].addresses[0]"},
	{name: "webhook", gvr: schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"},
		object: `{apiVersion: admissionregistration.k8s.io/v1, kind: ValidatingWebhookConfiguration, metadata: {name: hook},
			webhooks: [{name: v.example.com, clientConfig: {service: {namespace: default, name: svc}}, sideEffects: None, admissionReviewVersions: [v1],
			rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]}]}`,
		want: `{webhooks: [{name: v.example.com, clientConfig: {service: {namespace: default, name: svc, port: 443}}, sideEffects: None,
			admissionReviewVersions: [v1], failurePolicy: Fail, matchPolicy: Equivalent, namespaceSelector: {}, objectSelector: {}, timeoutSeconds: 10,
			rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods], scope: "*"}]}]}`,
		invalid: `{apiVersion: admissionregistration.k8s.io/v1, kind: ValidatingWebhookConfiguration, metadata: {name: bad},
			webhooks: [{name: short, clientConfig: {url: "https://example.com"}, sideEffects: None, admissionReviewVersions: [v1]}]}`, invalidField: "webhooks[0].name"},
	{name: "validatingadmissionpolicy", gvr: schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"},
		object: `{apiVersion: admissionregistration.k8s.io/v1, kind: ValidatingAdmissionPolicy, metadata: {name: p},
			spec: {matchConstraints: {resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]}, validations: [{expression: "true"}]}}`,
		want: `{spec: {failurePolicy: Fail, validations: [{expression: "true"}], matchConstraints: {matchPolicy: Equivalent, namespaceSelector: {}, objectSelector: {},
			resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments], scope: "*"}]}}, status: {}}`},
	{name: "runtimeclass", gvr: schema.GroupVersionResource{Group: "node.k8s.io", Version: "v1", Resource: "runtimeclasses"},
		object:  `{apiVersion: node.k8s.io/v1, kind: RuntimeClass, metadata: {name: gvisor}, handler: runsc}`,
		want:    `{handler: runsc}`,
		invalid: `{apiVersion: node.k8s.io/v1, kind: RuntimeClass, metadata: {name: bad}, handler: Not_A_Label}`, invalidField: "handler"},
	{name: "prioritylevel", gvr: schema.GroupVersionResource{Group: "flowcontrol.apiserver.k8s.io", Version: "v1", Resource: "prioritylevelconfigurations"},
		object: `{apiVersion: flowcontrol.apiserver.k8s.io/v1, kind: PriorityLevelConfiguration, metadata: {name: pl}, spec: {type: Limited, limited: {limitResponse: {type: Queue, queuing: {}}}}}`,
		want: `{spec: {type: Limited, limited: {nominalConcurrencyShares: 30, lendablePercent: 0,
			limitResponse: {type: Queue, queuing: {queues: 64, handSize: 8, queueLengthLimit: 50}}}}, status: {}}`},
	{name: "resourceclaim", gvr: schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaims"}, namespaced: true,
		object:  `{apiVersion: resource.k8s.io/v1, kind: ResourceClaim, metadata: {name: gpu}, spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu}}]}}}`,
		want:    `{spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu, allocationMode: ExactCount, count: 1}}]}}, status: {}}`,
		invalid: `{apiVersion: resource.k8s.io/v1, kind: ResourceClaim, metadata: {name: bad}, spec: {devices: {requests: [{name: gpu}]}}}`, invalidField: "spec.devices.requests[0]"},
	{name: "hpa", gvr: schema.GroupVersionResource{Group: "autoscaling", Version: "v2", Resource: "horizontalpodautoscalers"}, namespaced: true,
		object: `{apiVersion: autoscaling/v2, kind: HorizontalPodAutoscaler, metadata: {name: web}, spec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}, maxReplicas: 3}}`,
		want: `{spec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}, minReplicas: 1, maxReplicas: 3,
			metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}}]}, status: {currentMetrics: null, desiredReplicas: 0}}`,
		invalid: `{apiVersion: autoscaling/v2, kind: HorizontalPodAutoscaler, metadata: {name: bad}, spec: {scaleTargetRef: {kind: Deployment, name: web}, minReplicas: 5, maxReplicas: 2}}`, invalidField: "spec.maxReplicas"},
	{name: "replicationcontroller", gvr: schema.GroupVersionResource{Version: "v1", Resource: "replicationcontrollers"}, namespaced: true,
		object: `{apiVersion: v1, kind: ReplicationController, metadata: {name: rc}, spec: {template: {metadata: {labels: {app: rc}}, spec: {containers: [{name: c, image: nginx}]}}}}`,
		want:   `{status: {replicas: 0}}`},
	{name: "csr", gvr: schema.GroupVersionResource{Group: "certificates.k8s.io", Version: "v1", Resource: "certificatesigningrequests"},
		object:  `{apiVersion: certificates.k8s.io/v1, kind: CertificateSigningRequest, metadata: {name: csr}, spec: {signerName: example.com/s, usages: [digital signature], request: "{{csr}}"}}`,
		want:    `{status: {}}`,
		invalid: `{apiVersion: certificates.k8s.io/v1, kind: CertificateSigningRequest, metadata: {name: csr}, spec: {signerName: example.com/s, usages: [digital signature], request: aGVsbG8=}}`, invalidField: "spec.request"},
}

func TestBuiltinGroups(t *testing.T) {
	t.Parallel()
	// The defaults measured are the API's: no workload controller (the
	// ReplicationController manager, the HPA's) may write the status read
	// back, nor the policy status controller (a ValidatingAdmissionPolicy's
	// status.typeChecking, written as soon as it sees the policy: CI's
	// get came after it once requests got faster).
	running := append(slices.Clone(withoutWorkloads), "-"+controllers.ValidatingAdmissionPolicyStatus)
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Controllers: running}))
	dyn, err := srv.DynamicClient()
	require.NoError(t, err)
	for _, tc := range groupCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkGroupCase(t, dyn, tc)
		})
	}
}

func checkGroupCase(t *testing.T, dyn dynamic.Interface, tc groupCase) {
	tc.object = strings.ReplaceAll(tc.object, "{{csr}}", base64.StdEncoding.EncodeToString(certificateRequest(t)))
	client := dyn.Resource(tc.gvr)
	get := client.Get
	create := client.Create
	if tc.namespaced {
		get, create = client.Namespace("default").Get, client.Namespace("default").Create
	}
	if tc.want != "" {
		obj := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal([]byte(tc.object), &obj.Object))
		_, err := create(t.Context(), obj, metav1.CreateOptions{})
		require.NoError(t, err)
		got, err := get(t.Context(), obj.GetName(), metav1.GetOptions{})
		require.NoError(t, err)
		var want map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(tc.want), &want))
		for k, v := range want {
			if diff := cmp.Diff(normalizeNumbers(v), normalizeNumbers(got.Object[k])); diff != "" {
				t.Errorf("%s differs from kube-apiserver 1.37.2's (-want +got):\n%s", k, diff)
			}
		}
	}
	if tc.invalid != "" {
		bad := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal([]byte(tc.invalid), &bad.Object))
		_, err := create(t.Context(), bad, metav1.CreateOptions{})
		require.True(t, apierrors.IsInvalid(err), "want 422, got %v", err)
		var fields []string
		for _, c := range err.(apierrors.APIStatus).Status().Details.Causes {
			fields = append(fields, c.Field)
		}
		assert.Contains(t, fields, tc.invalidField)
	}
}

// certificateRequest returns a PEM certificate request of a new key.
func certificateRequest(t *testing.T) []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "test"}}, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// normalizeNumbers makes YAML's and JSON's numbers comparable.
func normalizeNumbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			out[k] = normalizeNumbers(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = normalizeNumbers(e)
		}
		return out
	case int64:
		return float64(v)
	case int:
		return float64(v)
	}
	return v
}
