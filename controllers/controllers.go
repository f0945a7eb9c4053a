// Package controllers names the control loops a kubeembed server runs in
// process, as kube-controller-manager runs them beside kube-apiserver, and
// holds what they are built from. Each lives in a package of its own
// (garbagecollector, namespace, rootcacert, ...); the server builds and
// starts them from post-start hooks named start-<controller>, fed by its
// shared informers over the in-process loopback. Choose them with
// apiserver.Options.Controllers.
package controllers

import (
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Name is a controller's name, kube-controller-manager's --controllers name.
type Name string

// The controllers a server can run.
const (
	// ServiceAccount gives every new namespace its "default"
	// ServiceAccount, as kube-controller-manager's serviceaccount
	// controller does. kubeembed does it as the namespace is created (in
	// the core group's storage), so that a test's first pod never races it:
	// it has no loop of its own.
	ServiceAccount Name = "serviceaccount"
	// GarbageCollector deletes dependents whose owners are gone and runs
	// foreground and orphan deletion.
	GarbageCollector Name = "garbagecollector"
	// Namespace deletes the content of a terminating namespace, then the
	// namespace.
	Namespace Name = "namespace"
	// RootCACertPublisher publishes the server's CA as the ConfigMap
	// kube-root-ca.crt in every namespace.
	RootCACertPublisher Name = "root-ca-cert-publisher"
	// ServiceAccountToken fills kubernetes.io/service-account-token Secrets
	// with a token, the CA and the namespace, and deletes those of
	// service accounts that are gone.
	ServiceAccountToken Name = "serviceaccount-token"
	// ResourceQuota keeps each ResourceQuota's status: its hard limits
	// and what its namespace uses of them.
	ResourceQuota Name = "resourcequota"
	// ClusterRoleAggregation gives ClusterRoles with an aggregationRule the
	// rules of the ClusterRoles they select (admin, edit, view).
	ClusterRoleAggregation Name = "clusterrole-aggregation"

	// Kubelet is the simulated kubelet of every simulated node
	// (Config.Nodes, and Node objects annotated SimulatedAnnotation): it
	// registers the node, keeps its status and Lease, and runs the pods
	// bound to it as a kubelet reports them, with no container runtime.
	// Not one of kube-controller-manager's: a cluster's kubelets.
	Kubelet Name = "kubelet"
	// Scheduler binds pods that name no node to a fitting one, as
	// kube-scheduler's default profile (default-scheduler). Not one of
	// kube-controller-manager's: the cluster's kube-scheduler.
	Scheduler Name = "scheduler"
	// NodeLifecycle marks nodes whose kubelet stopped reporting as
	// Unknown, taints not-ready and unreachable nodes, and marks their pods
	// not Ready.
	NodeLifecycle Name = "nodelifecycle"
	// TaintEviction deletes pods from nodes with NoExecute taints they do
	// not tolerate, after their tolerationSeconds.
	TaintEviction Name = "taint-eviction-controller"
	// PodGC deletes terminated pods over the threshold, and the pods of
	// nodes that are gone.
	PodGC Name = "podgc"
	// Deployment rolls Deployments out through their ReplicaSets.
	Deployment Name = "deployment"
	// ReplicaSet creates and deletes the pods of ReplicaSets, adopts and
	// releases them, and keeps their status.
	ReplicaSet Name = "replicaset"
	// ReplicationController does the same for ReplicationControllers.
	ReplicationController Name = "replicationcontroller"
	// Disruption keeps each PodDisruptionBudget's status (how many of its
	// pods are healthy, how many may be disrupted), which evictions read.
	Disruption Name = "disruption"
	// StatefulSet creates the pods of StatefulSets, one ordinal at a time
	// or in parallel, their claims, and rolls them out by revision.
	StatefulSet Name = "statefulset"
	// DaemonSet runs one pod of each DaemonSet on every node it fits,
	// and rolls them out.
	DaemonSet Name = "daemonset"
	// Job runs the pods of Jobs to completion, within their failure
	// policies, and marks them Complete or Failed.
	Job Name = "job"
	// CronJob creates Jobs on CronJobs' schedules, on the server's clock.
	CronJob Name = "cronjob"
	// TTLAfterFinished deletes finished Jobs once their
	// ttlSecondsAfterFinished passes.
	TTLAfterFinished Name = "ttl-after-finished"
	// HorizontalPodAutoscaling scales the targets of
	// HorizontalPodAutoscalers from their metrics.
	HorizontalPodAutoscaling Name = "horizontalpodautoscaling"
	// Endpoint keeps each Service's Endpoints (the v1 API, deprecated
	// but still kept by kube-controller-manager v1.37).
	Endpoint Name = "endpoint"
	// EndpointSlice keeps each Service's EndpointSlices: its ready,
	// serving and terminating pods.
	EndpointSlice Name = "endpointslice"
	// EndpointSliceMirroring mirrors the Endpoints of Services without a
	// selector into EndpointSlices.
	EndpointSliceMirroring Name = "endpointslicemirroring"
	// PersistentVolumeBinder binds claims to volumes and asks a
	// provisioner for new ones (kube-controller-manager's PV controller).
	PersistentVolumeBinder Name = "persistentvolume-binder"
	// VolumeProvisioner is the simulated provisioner of the default
	// StorageClass it creates ("standard"): it creates a volume for each
	// claim of that class. Not one of kube-controller-manager's: a
	// cluster's storage provisioner.
	VolumeProvisioner Name = "volume-provisioner"
	// PVCProtection removes the kubernetes.io/pvc-protection finalizer of
	// a deleted claim once no pod uses it.
	PVCProtection Name = "pvc-protection"
	// PVProtection removes the kubernetes.io/pv-protection finalizer of a
	// deleted volume once it is not bound.
	PVProtection Name = "pv-protection"
	// EphemeralVolume creates the claims of pods' generic ephemeral
	// volumes, owned by their pods.
	EphemeralVolume Name = "ephemeral-volume"
	// VolumeExpand records that a claim whose request grew waits for an
	// external controller to expand its volume.
	VolumeExpand Name = "persistentvolume-expander"
	// CSRSigning signs approved CertificateSigningRequests of the
	// kubernetes.io signers with the server's CA.
	CSRSigning Name = "csrsigning"
	// CSRApproving approves kubelets' client certificate requests.
	CSRApproving Name = "csrapproving"
	// CSRCleaner deletes old CertificateSigningRequests.
	CSRCleaner Name = "csrcleaner"
	// ValidatingAdmissionPolicyStatus type-checks the expressions of
	// ValidatingAdmissionPolicies against the kinds they match and writes
	// the warnings and the observed generation to their status. Its
	// --controllers name is the canonical one: it has no short alias.
	ValidatingAdmissionPolicyStatus Name = "validatingadmissionpolicy-status-controller"
)

// All are every controller, in the order they start.
func All() []Name {
	return []Name{ServiceAccount, GarbageCollector, Namespace, RootCACertPublisher, ServiceAccountToken, ResourceQuota, ClusterRoleAggregation,
		Kubelet, Scheduler, NodeLifecycle, TaintEviction, PodGC, Deployment, ReplicaSet, ReplicationController, StatefulSet, DaemonSet, Job, CronJob, TTLAfterFinished, HorizontalPodAutoscaling, Disruption, Endpoint, EndpointSlice, EndpointSliceMirroring,
		PersistentVolumeBinder, VolumeProvisioner, PVCProtection, PVProtection, EphemeralVolume, VolumeExpand, CSRSigning, CSRApproving, CSRCleaner,
		ValidatingAdmissionPolicyStatus}
}

// ControllerManager says whether n is one of kube-controller-manager's
// controllers: every one but the simulated kubelet, scheduler and volume
// provisioner, which stand for a cluster's other processes.
func (n Name) ControllerManager() bool {
	return n != Kubelet && n != Scheduler && n != VolumeProvisioner
}

// Enabled reads list as kube-controller-manager reads --controllers: "*"
// turns on every controller, "name" one, "-name" turns one off (the first
// of the two in list decides). It returns
// the controllers on, in All's order; unknown names are errors, all of them
// reported. An empty list turns none on.
func Enabled(list []Name) ([]Name, error) {
	var errs []error
	for _, n := range list {
		if n != "*" && !slices.Contains(All(), Name(strings.TrimPrefix(string(n), "-"))) {
			errs = append(errs, fmt.Errorf("unknown controller %q (known: %v)", n, All()))
		}
	}
	var on []Name
	for _, n := range All() {
		if enabled(n, list) {
			on = append(on, n)
		}
	}
	return on, errors.Join(errs...)
}

// enabled: the first of "name", "-name" in list decides, else "*".
func enabled(n Name, list []Name) bool {
	star := false
	for _, l := range list {
		switch l {
		case n:
			return true
		case "-" + n:
			return false
		case "*":
			star = true
		}
	}
	return star
}

// Controller is one control loop.
type Controller interface {
	// Run runs the controller until ctx ends, and returns once its
	// goroutines have.
	Run(ctx context.Context)
	// Idle returns nil when the controller has nothing to do now, given
	// the resourceVersion of the last write to each resource (it has
	// seen them all, its queues are empty); otherwise what it waits for.
	Idle(written map[schema.GroupResource]uint64) error
	// Finished counts the work items the controller has finished.
	Finished() uint64
}

// Starter is a controller that the server's Start waits for once it runs:
// the simulated kubelet, until the initial nodes are registered and Ready.
type Starter interface {
	WaitStarted(ctx context.Context) error
}

// Config is what controllers are built from: the server's loopback clients
// and shared informers.
type Config struct {
	// RESTConfig is the configuration of Client, for clients of another
	// kind or name (rest.CopyConfig it and set UserAgent: the field
	// manager of a write is its client's user agent up to the first "/":
	// "kubelet/v1.37.2" writes as kubelet, as on a cluster).
	RESTConfig *rest.Config
	Client     kubernetes.Interface
	Metadata   metadata.Interface
	Discovery  discovery.DiscoveryInterface
	// Informers is the server's shared informer factory; the server starts
	// it after the controllers are built.
	Informers informers.SharedInformerFactory
	// Monitors are the resources that can be listed, watched and deleted,
	// with a metadata informer for each.
	Monitors Monitors
	// Revisions is the revision of the server's last write. The simulated
	// kubelet, scheduler and provisioner, clients of the API only, accept
	// nil: run against another API server (parity runs them beside
	// kube-apiserver), whose writes they cannot count.
	Revisions Revisions
	// QueueMetrics receives the controllers' work queue metrics; nil for
	// none.
	QueueMetrics workqueue.MetricsProvider
	// RootCA is the PEM bundle published as kube-root-ca.crt.
	RootCA []byte
	// LegacyTokens signs the tokens of service account token Secrets.
	LegacyTokens LegacyTokenIssuer
	// Ready is closed once the server is ready (its bootstrap objects
	// exist), as kube-controller-manager starts once kube-apiserver is: a
	// controller that would otherwise redo its work for each bootstrap
	// object waits for it.
	Ready <-chan struct{}
	// Clock is the server's clock: the simulated kubelet's restarts and
	// grace periods, the node lifecycle's grace and the evictions'
	// tolerationSeconds wait on it (a test may move a fake one). Nil: the
	// real clock.
	Clock clock.WithTickerAndDelayedExecution
	// Nodes are the simulated nodes the kubelet registers at start.
	Nodes []Node
	// Signer signs certificates with the server's CA, for approved
	// CertificateSigningRequests; nil: none are signed.
	Signer CertificateSigner
}

// CertificateSigner signs certificates with a cluster CA.
type CertificateSigner interface {
	// Sign issues a certificate of template for pub, signed by the CA,
	// and returns it PEM-encoded with the CA's certificate.
	Sign(template *x509.Certificate, pub crypto.PublicKey) (certPEM, caPEM []byte, err error)
}

// LegacyTokenIssuer signs a secret-based service account token, which the
// server accepts while the secret holds it.
type LegacyTokenIssuer interface {
	IssueLegacyToken(sa *corev1.ServiceAccount, secretName string) (string, error)
}

// Monitors keep the resources served that can be listed, watched and
// deleted (built-in, custom and aggregated; preferred versions only) and a
// metadata-only informer for each.
type Monitors interface {
	// Subscribe calls f with the resources monitored now, then with those
	// added and removed as they change, in order, never concurrently. An
	// added resource's informer starts after f returns, so handlers f adds
	// see its initial list; a removed one's stops after. Controllers
	// subscribe when they are built, before the monitors start. f must not
	// call back into Monitors.
	Subscribe(f func(added, removed []Resource))
}

// Resource is a monitored resource.
type Resource struct {
	schema.GroupVersionResource
	Kind       string
	Namespaced bool
	// Informer lists and watches the resource's objects' metadata.
	Informer cache.SharedIndexInformer
}

// Revisions tells the revision of the server's last write, overall and to
// each resource.
type Revisions interface {
	Latest() uint64
	Snapshot() map[schema.GroupResource]uint64
}
