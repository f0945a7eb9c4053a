package fuzz_test

import (
	"crypto/ed25519"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"sigs.k8s.io/yaml"
)

// seedFields are the fields of each kind's seed besides apiVersion, kind
// and metadata.name "seed" (a metadata here replaces that one), keyed by
// apiVersion and kind: a valid object where it is cheap to write. A kind
// without an entry gets the bare object, and the kinds of seedObjects
// get those. SEED_CERT and SEED_CSR stand for a certificate and a
// certificate request (seedPEM).
var seedFields = map[string]string{
	"v1 Binding":   `target: {kind: Node, name: seed}`,
	"v1 Endpoints": `subsets: [{addresses: [{ip: 10.1.2.3}], ports: [{name: http, port: 8080, protocol: TCP}]}]`,
	"v1 Event": `{involvedObject: {apiVersion: v1, kind: Pod, namespace: fuzz, name: seed}, reason: Seeded,
		message: a seed, type: Normal, source: {component: fuzz}, count: 1,
		firstTimestamp: "2026-01-01T00:00:00Z", lastTimestamp: "2026-01-01T00:00:00Z"}`,
	"v1 LimitRange": `spec: {limits: [{type: Container, default: {cpu: 200m}, defaultRequest: {cpu: 100m},
		max: {memory: 1Gi}, maxLimitRequestRatio: {cpu: "4"}}, {type: PersistentVolumeClaim, min: {storage: 1Mi}}]}`,
	"v1 Namespace": `metadata: {name: seed, labels: {team: a}}`,
	"v1 Node":      `spec: {podCIDR: 10.244.0.0/24, podCIDRs: [10.244.0.0/24], taints: [{key: k, value: v, effect: NoSchedule}]}`,
	"v1 PersistentVolume": `spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], hostPath: {path: /tmp/seed},
		persistentVolumeReclaimPolicy: Retain, storageClassName: seed, volumeMode: Filesystem}`,
	"v1 PersistentVolumeClaim": `spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}},
		storageClassName: seed, selector: {matchLabels: {app: seed}}}`,
	"v1 PodTemplate": `template: {metadata: {labels: {app: seed}}, spec: {containers: [{name: app, image: nginx}]}}`,
	"v1 ReplicationController": `spec: {replicas: 1, selector: {app: seed},
		template: {metadata: {labels: {app: seed}}, spec: {containers: [{name: app, image: nginx}]}}}`,
	"v1 ResourceQuota": `spec: {hard: {pods: "10", requests.cpu: "4", count/configmaps: "5"},
		scopeSelector: {matchExpressions: [{scopeName: PriorityClass, operator: In, values: [high]}]}}`,
	"v1 ServiceAccount": `{secrets: [{name: seed}], imagePullSecrets: [{name: seed}], automountServiceAccountToken: false}`,

	"apiregistration.k8s.io/v1 APIService": `{metadata: {name: v1.seed.fuzz.kubeembed.io},
		spec: {group: seed.fuzz.kubeembed.io, version: v1, groupPriorityMinimum: 100, versionPriority: 10,
		service: {namespace: fuzz, name: seed, port: 443}, insecureSkipTLSVerify: true}}`,

	"apps/v1 ControllerRevision": `{revision: 1, data: {spec: {template: {metadata: {labels: {app: seed}}}}}}`,
	"apps/v1 DaemonSet": `spec: {selector: {matchLabels: {app: seed}}, updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 1}},
		template: {metadata: {labels: {app: seed}}, spec: {containers: [{name: app, image: nginx}]}}}`,
	"apps/v1 ReplicaSet": `spec: {replicas: 1, selector: {matchLabels: {app: seed}},
		template: {metadata: {labels: {app: seed}}, spec: {containers: [{name: app, image: nginx}]}}}`,
	"apps/v1 StatefulSet": `spec: {serviceName: seed, replicas: 1, podManagementPolicy: Parallel, selector: {matchLabels: {app: seed}},
		template: {metadata: {labels: {app: seed}}, spec: {containers: [{name: app, image: nginx,
		volumeMounts: [{name: data, mountPath: /data}]}]}},
		volumeClaimTemplates: [{metadata: {name: data}, spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}]}`,

	"events.k8s.io/v1 Event": `{eventTime: "2026-01-01T00:00:00.000000Z", reportingController: example.com/fuzz,
		reportingInstance: fuzz-1, action: Seed, reason: Seeded, note: a seed, type: Normal,
		regarding: {apiVersion: v1, kind: Pod, namespace: fuzz, name: seed}}`,

	"authentication.k8s.io/v1 SelfSubjectReview": `metadata: {}`,
	"authentication.k8s.io/v1 TokenReview":       `{metadata: {}, spec: {token: not-a-token, audiences: [api]}}`,
	"authorization.k8s.io/v1 LocalSubjectAccessReview": `{metadata: {}, spec: {user: alice, groups: [dev],
		resourceAttributes: {namespace: fuzz, verb: get, resource: pods, name: seed}}}`,
	"authorization.k8s.io/v1 SelfSubjectAccessReview": `{metadata: {}, spec: {resourceAttributes: {namespace: fuzz, verb: list, group: apps,
		resource: deployments, fieldSelector: {rawSelector: metadata.name=seed}, labelSelector: {rawSelector: app=seed}}}}`,
	"authorization.k8s.io/v1 SelfSubjectRulesReview": `{metadata: {}, spec: {namespace: fuzz}}`,
	"authorization.k8s.io/v1 SubjectAccessReview": `{metadata: {}, spec: {user: alice, groups: [dev], extra: {scopes: [a]},
		nonResourceAttributes: {path: /healthz, verb: get}}}`,

	"autoscaling/v1 HorizontalPodAutoscaler": `spec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: seed},
		minReplicas: 1, maxReplicas: 5, targetCPUUtilizationPercentage: 80}`,
	"autoscaling/v2 HorizontalPodAutoscaler": `spec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: seed},
		minReplicas: 1, maxReplicas: 5, metrics: [{type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}}],
		behavior: {scaleDown: {stabilizationWindowSeconds: 300, policies: [{type: Pods, value: 1, periodSeconds: 60}]}}}`,

	"batch/v1 CronJob": `spec: {schedule: "*/5 * * * *", timeZone: Etc/UTC, concurrencyPolicy: Forbid,
		jobTemplate: {spec: {template: {spec: {restartPolicy: Never, containers: [{name: app, image: busybox}]}}}}}`,
	"batch/v1 Job": `spec: {backoffLimit: 2, completions: 3, parallelism: 2, completionMode: Indexed,
		template: {spec: {restartPolicy: Never, containers: [{name: app, image: busybox}]}}}`,

	"certificates.k8s.io/v1 CertificateSigningRequest": `spec: {request: SEED_CSR, signerName: example.com/fuzz,
		usages: [digital signature, client auth], expirationSeconds: 3600}`,
	"certificates.k8s.io/v1 ClusterTrustBundle": `spec: {trustBundle: SEED_CERT}`,

	"networking.k8s.io/v1 IngressClass": `spec: {controller: example.com/fuzz}`,
	"networking.k8s.io/v1 Ingress": `spec: {ingressClassName: seed, tls: [{hosts: [seed.example.com], secretName: seed}],
		rules: [{host: seed.example.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: seed, port: {number: 80}}}}]}}]}`,
	"networking.k8s.io/v1 IPAddress": `{metadata: {name: 192.0.2.7},
		spec: {parentRef: {group: "", resource: services, namespace: fuzz, name: seed}}}`,
	"networking.k8s.io/v1 NetworkPolicy": `spec: {podSelector: {matchLabels: {app: seed}}, policyTypes: [Ingress],
		ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/8, except: [10.1.0.0/16]}}], ports: [{protocol: TCP, port: http}]}]}`,
	"networking.k8s.io/v1 ServiceCIDR": `spec: {cidrs: [10.255.0.0/24]}`,

	"policy/v1 PodDisruptionBudget": `spec: {minAvailable: 50%, selector: {matchLabels: {app: seed}}, unhealthyPodEvictionPolicy: AlwaysAllow}`,

	"rbac.authorization.k8s.io/v1 ClusterRoleBinding": `{roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view},
		subjects: [{kind: User, apiGroup: rbac.authorization.k8s.io, name: alice}, {kind: ServiceAccount, name: default, namespace: fuzz}]}`,
	"rbac.authorization.k8s.io/v1 ClusterRole": `rules: [{apiGroups: [""], resources: [pods], verbs: [get]},
		{nonResourceURLs: [/healthz], verbs: [get]}]`,
	"rbac.authorization.k8s.io/v1 RoleBinding": `{roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: seed},
		subjects: [{kind: Group, apiGroup: rbac.authorization.k8s.io, name: dev}]}`,

	"storage.k8s.io/v1 CSIDriver": `spec: {attachRequired: true, podInfoOnMount: false, volumeLifecycleModes: [Persistent],
		fsGroupPolicy: File, tokenRequests: [{audience: api, expirationSeconds: 3600}]}`,
	"storage.k8s.io/v1 CSINode": `spec: {drivers: [{name: csi.example.com, nodeID: seed, topologyKeys: [topology.example.com/zone],
		allocatable: {count: 10}}]}`,
	"storage.k8s.io/v1 CSIStorageCapacity": `{storageClassName: seed, capacity: 10Gi, maximumVolumeSize: 1Gi,
		nodeTopology: {matchLabels: {zone: a}}}`,
	"storage.k8s.io/v1 StorageClass": `{provisioner: example.com/fuzz, parameters: {type: ssd}, reclaimPolicy: Retain,
		volumeBindingMode: WaitForFirstConsumer, allowVolumeExpansion: true, mountOptions: [ro]}`,
	"storage.k8s.io/v1 VolumeAttachment":      `spec: {attacher: csi.example.com, nodeName: seed, source: {persistentVolumeName: seed}}`,
	"storage.k8s.io/v1 VolumeAttributesClass": `{driverName: csi.example.com, parameters: {iops: "100"}}`,

	"admissionregistration.k8s.io/v1 MutatingAdmissionPolicy": `spec: {failurePolicy: Fail, reinvocationPolicy: Never,
		matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]},
		matchConditions: [{name: seed, expression: "object.metadata.name == 'seed'"}],
		mutations: [{patchType: ApplyConfiguration,
		applyConfiguration: {expression: "Object{metadata: Object.metadata{labels: {'mutated': 'yes'}}}"}}]}`,
	"admissionregistration.k8s.io/v1 MutatingAdmissionPolicyBinding": `spec: {policyName: seed,
		matchResources: {namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: fuzz}}}}`,
	"admissionregistration.k8s.io/v1 MutatingWebhookConfiguration": `webhooks: [{name: seed.fuzz.kubeembed.io,
		clientConfig: {url: "https://127.0.0.1:1/mutate"}, failurePolicy: Fail, sideEffects: None,
		admissionReviewVersions: [v1], timeoutSeconds: 30, reinvocationPolicy: IfNeeded, matchPolicy: Equivalent,
		rules: [{apiGroups: ["*"], apiVersions: ["*"], operations: ["*"], resources: ["*/*"], scope: "*"}],
		matchConditions: [{name: not-leases, expression: "request.resource.resource != 'leases'"}]}]`,
	"admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy": `spec: {failurePolicy: Fail, paramKind: {apiVersion: v1, kind: ConfigMap},
		matchConstraints: {resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}]},
		variables: [{name: replicas, expression: object.spec.replicas}],
		validations: [{expression: "variables.replicas <= int(params.data.max)", messageExpression: "'too many: ' + string(variables.replicas)",
		reason: Invalid}], auditAnnotations: [{key: seed, valueExpression: "'replicas ' + string(variables.replicas)"}]}`,
	"admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding": `spec: {policyName: seed, validationActions: [Deny, Audit],
		paramRef: {name: seed, namespace: fuzz, parameterNotFoundAction: Deny}}`,
	"admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration": `webhooks: [{name: seed.fuzz.kubeembed.io,
		clientConfig: {service: {namespace: fuzz, name: seed, path: /validate, port: 443}}, failurePolicy: Fail,
		sideEffects: None, admissionReviewVersions: [v1, v1beta1], timeoutSeconds: 30,
		rules: [{apiGroups: ["*"], apiVersions: ["*"], operations: ["*"], resources: ["*/*"], scope: "*"}],
		namespaceSelector: {matchExpressions: [{key: team, operator: NotIn, values: [b]}]},
		matchConditions: [{name: not-leases, expression: "request.resource.resource != 'leases'"}]}]`,

	"scheduling.k8s.io/v1 PriorityClass": `{value: 1000, globalDefault: false, preemptionPolicy: Never, description: a seed}`,
	"coordination.k8s.io/v1 Lease": `spec: {holderIdentity: seed, leaseDurationSeconds: 15, leaseTransitions: 0,
		acquireTime: "2026-01-01T00:00:00.000000Z", renewTime: "2026-01-01T00:00:00.000000Z"}`,
	"node.k8s.io/v1 RuntimeClass": `{handler: runc, overhead: {podFixed: {cpu: 10m}},
		scheduling: {nodeSelector: {runtime: runc}, tolerations: [{key: k, operator: Exists}]}}`,
	"discovery.k8s.io/v1 EndpointSlice": `{addressType: IPv4,
		endpoints: [{addresses: [10.1.2.3], conditions: {ready: true}, hostname: seed, zone: a}],
		ports: [{name: http, port: 8080, protocol: TCP, appProtocol: http}]}`,

	"resource.k8s.io/v1 DeviceClass": `spec: {selectors: [{cel: {expression: "device.driver == 'gpu.example.com'"}}],
		config: [{opaque: {driver: gpu.example.com, parameters: {mode: fast}}}]}`,
	"resource.k8s.io/v1 DeviceTaintRule": `spec: {deviceSelector: {driver: gpu.example.com, pool: seed, device: d0},
		taint: {key: example.com/broken, value: "yes", effect: NoSchedule}}`,
	"resource.k8s.io/v1 ResourceClaim": `spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: seed,
		allocationMode: ExactCount, count: 1, selectors: [{cel: {expression: "device.attributes['gpu.example.com'].model == 'x'"}}]}}]}}`,
	"resource.k8s.io/v1 ResourceClaimTemplate": `spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: seed}}]}}}`,
	"resource.k8s.io/v1 ResourceSlice": `spec: {driver: gpu.example.com, pool: {name: seed, generation: 1, resourceSliceCount: 1},
		nodeName: seed, devices: [{name: d0, attributes: {model: {string: x}}, capacity: {memory: {value: 1Gi}}}]}`,

	"flowcontrol.apiserver.k8s.io/v1 FlowSchema": `spec: {priorityLevelConfiguration: {name: seed}, matchingPrecedence: 500,
		distinguisherMethod: {type: ByUser}, rules: [{subjects: [{kind: Group, group: {name: "system:authenticated"}}],
		resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"], namespaces: ["*"]}],
		nonResourceRules: [{verbs: [get], nonResourceURLs: [/healthz]}]}]}`,
	"flowcontrol.apiserver.k8s.io/v1 PriorityLevelConfiguration": `spec: {type: Limited, limited: {nominalConcurrencyShares: 5,
		lendablePercent: 10, borrowingLimitPercent: 50, limitResponse: {type: Queue, queuing: {queues: 16, handSize: 4, queueLengthLimit: 10}}}}`,

	"storagemigration.k8s.io/v1 StorageVersionMigration": `spec: {resource: {group: apps, resource: deployments}}`,
}

// everyKindSeeds are a seed per kind of FuzzCreateEveryKind, in its
// order: JSON, YAML and protobuf (nil for a kind seedScheme does not
// know), as FuzzCreate's seeds are.
func everyKindSeeds(f *testing.F, fx *fixture, kinds []creatable) [][][]byte {
	f.Helper()
	scheme := seedScheme(f)
	pb := protobuf.NewSerializer(scheme, scheme)
	rich := map[string]runtime.Object{}
	for _, obj := range seedObjects(f) {
		gvk := obj.GetObjectKind().GroupVersionKind()
		rich[gvk.GroupVersion().String()+" "+gvk.Kind] = obj
	}
	cert, csr := seedPEM(f)
	unused := map[string]bool{}
	for key := range seedFields {
		unused[key] = true
	}
	var seeds [][][]byte
	for _, k := range kinds {
		key := k.gvk.GroupVersion().String() + " " + k.gvk.Kind
		delete(unused, key)
		obj := rich[key]
		fields := strings.NewReplacer("SEED_CERT", cert, "SEED_CSR", csr).Replace(seedFields[key])
		js := seedJSON(f, key, obj, fields)
		if obj == nil {
			if typed, err := scheme.New(k.gvk); err == nil {
				if err := yaml.UnmarshalStrict(js, typed); err != nil {
					f.Fatalf("seed of %s: %v", key, err)
				}
				obj = typed
			}
		}
		seeds = append(seeds, encodeSeed(f, pb, js, obj))
		requireSeedAccepted(f, fx, k, js)
	}
	for key := range unused {
		f.Fatalf("seedFields[%q]: no such kind in discovery", key)
	}
	return seeds
}

// seedJSON is the JSON of a seed: obj's, or the bare object of key with
// fields (YAML) over it.
func seedJSON(f *testing.F, key string, obj runtime.Object, fields string) []byte {
	f.Helper()
	if obj != nil {
		js, err := json.Marshal(obj)
		if err != nil {
			f.Fatalf("seed of %s: %v", key, err)
		}
		return js
	}
	apiVersion, kind, _ := strings.Cut(key, " ")
	m := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": "seed"}}
	var extra map[string]any
	if err := yaml.Unmarshal([]byte(fields), &extra); err != nil {
		f.Fatalf("seedFields[%q]: %v", key, err)
	}
	for name, v := range extra {
		m[name] = v
	}
	js, err := json.Marshal(m) // sorts the keys: the seed is the same each run
	if err != nil {
		f.Fatalf("seed of %s: %v", key, err)
	}
	return js
}

// requireSeedAccepted fails unless the server accepts the seed js (a
// Strict dry run), so that each kind's seed reaches past validation, and
// a seed an upgrade makes invalid shows here. Bindings name a pod, and
// the fixture has none: theirs reaches the pod's lookup.
func requireSeedAccepted(f *testing.F, fx *fixture, k creatable, js []byte) {
	f.Helper()
	a := fx.post(f, k.path, modeStrict|modeDryRun, js)
	want := http.StatusCreated
	if k.gvk.Kind == "Binding" {
		want = http.StatusNotFound
	}
	if a.code != want && !(want == http.StatusCreated && a.code == http.StatusOK) {
		f.Fatalf("seed of %v: %s: %d (want %d) %s", k.gvk, a.what, a.code, want, a.body)
	}
}

// seedPEM is a self-signed certificate (PEM) and a certificate request
// (base64 of its PEM), as YAML strings, the same each run: Ed25519
// signatures are deterministic.
func seedPEM(f *testing.F) (cert, csr string) {
	f.Helper()
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	name := pkix.Name{CommonName: "seed", Organization: []string{"fuzz"}}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	der, err := x509.CreateCertificate(nil, &x509.Certificate{SerialNumber: big.NewInt(1), Subject: name,
		NotBefore: start, NotAfter: start.AddDate(10, 0, 0), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}, &x509.Certificate{Subject: name}, key.Public(), key)
	if err != nil {
		f.Fatalf("seed certificate: %v", err)
	}
	req, err := x509.CreateCertificateRequest(nil, &x509.CertificateRequest{Subject: name}, key)
	if err != nil {
		f.Fatalf("seed certificate request: %v", err)
	}
	quoted, err := json.Marshal(string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	if err != nil {
		f.Fatalf("seed certificate: %v", err)
	}
	return string(quoted), base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: req}))
}
