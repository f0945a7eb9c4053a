// Package envtest is a drop-in for controller-runtime's
// sigs.k8s.io/controller-runtime/pkg/envtest: the same Environment, the same
// CRD and webhook installation, the same behaviour, with kubeembed's
// in-process API server in place of the kube-apiserver and etcd processes.
// A suite switches by changing one import:
//
//	import "github.com/kubeembed/apiserver/envtest"
//
// and nothing else: no binaries to download, no KUBEBUILDER_ASSETS, a start
// in about 0.1 s instead of seconds.
//
// The server behaves as envtest's control plane by default
// (apiserver.ProfileEnvtest): kube-apiserver's admission plugins without
// ServiceAccount, no controllers, so no "default" ServiceAccount in new
// namespaces, no garbage collection, and deleted namespaces stay
// Terminating, as suites written for envtest expect. Set
// Environment.Controllers to run kubeembed's controllers (garbage
// collection, namespace deletion, ...), and use Environment.Server for the
// rest of kubeembed (WaitIdle, faults, recording).
//
// As envtest does, Start generates a serving certificate for the test's
// webhook server (WebhookInstallOptions.LocalServingCertDir), points the
// webhook configurations and the conversion of CRDs whose types in Scheme
// are convertible at https://LocalServingHost:LocalServingPort, and
// installs the CRDs and webhooks. UseExistingCluster (or
// USE_EXISTING_CLUSTER=true) uses the cluster of the kubeconfig instead,
// exactly as envtest does.
//
// docs/envtest.md lists every identifier of envtest: supported, accepted and
// ignored (the fields about binaries and processes), or not supported.
package envtest
