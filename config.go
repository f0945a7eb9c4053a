package apiserver

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"go.uber.org/zap"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/utils/clock"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/controlplane"
	"github.com/kubeembed/apiserver/internal/manifests"
	"github.com/kubeembed/apiserver/providers"
	"github.com/kubeembed/apiserver/storage"
	"github.com/kubeembed/apiserver/storage/memory"
	"github.com/kubeembed/apiserver/timing"
)

// Options configures a Server. The zero value gives a server on a random
// loopback port with in-memory storage and the built-in API groups. New
// copies Options and never writes to it.
type Options struct {
	// Logger receives the server's logs, and those of the Kubernetes
	// libraries that log through a context. Default: no logging.
	Logger *zap.Logger

	// BindAddress is the IP address to listen on. Default "127.0.0.1".
	BindAddress string
	// Port is the TCP port to listen on. Default 0: a free port chosen by the
	// kernel, so that servers never race for ports.
	Port int

	// ServiceClusterIPRange is the range Services' cluster IPs come from, as
	// kube-apiserver's --service-cluster-ip-range: an IPv4 CIDR, with a
	// prefix of 8 to 30 bits, whose first address is the default/kubernetes
	// Service's (the "kubernetes" ServiceCIDR holds it). IPv6 and dual-stack
	// ranges are not served. Default: kube-apiserver's, "10.0.0.0/24".
	ServiceClusterIPRange string

	// Storage is the storage backend. Default: a new memory.Backend owned by
	// the server and closed by Close. A Storage passed here is not closed.
	// storage/etcd is the other backend: objects outlive the server.
	Storage storage.Backend

	// CertDir keeps the server's CA, front-proxy CA and service-account
	// signing key (kube-apiserver's --cert-dir): made and written there by
	// the first server, read by the next, so that kubeconfigs and tokens of
	// a server on persistent storage stay valid when it restarts. Default
	// none: new keys for every server.
	CertDir string

	// Providers are API groups served in addition to the built-in ones. A
	// provider for a group that is already served is an error.
	Providers []providers.Provider

	// CRDs are installed, Established and served before Start returns.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// CRDPaths are files or directories of YAML or JSON CRDs (multi-document,
	// as controller-gen writes them) installed like CRDs.
	CRDPaths []string
	// RBACPaths are files or directories of YAML or JSON RBAC manifests
	// (Roles, ClusterRoles, RoleBindings, ClusterRoleBindings and
	// ServiceAccounts, as controller-gen and kubebuilder's config/rbac hold
	// them; kustomization files are skipped), created with the namespaces
	// they name before Start returns, after the CRDs. Run the controller
	// under test as its service account (Server.RESTConfigForServiceAccount)
	// and it has exactly the permissions the project ships. Default none.
	RBACPaths []string

	// AdminToken is the bearer token of an admin in system:masters. Default:
	// a random token, kept in CertDir (admin.token) when it is set, so that
	// a kubeconfig of the server works with the next one.
	AdminToken string

	// AuditPolicy or AuditPolicyFile (YAML or JSON, kube-apiserver's
	// --audit-policy-file) is the audit policy: which requests are audited,
	// at which level. Without one nothing is audited, as on kube-apiserver.
	AuditPolicy     *auditv1.Policy
	AuditPolicyFile string
	// AuditLogPath receives audit.k8s.io/v1 events as JSON lines
	// (kube-apiserver's --audit-log-path; "-" is standard output); the file
	// is appended to and closed by Close.
	AuditLogPath string
	// AuditEvents, if set, receives each audit event as it is written.
	AuditEvents func(*auditv1.Event)

	// DisablePriorityAndFairness turns API Priority and Fairness off, as
	// kube-apiserver's --enable-priority-and-fairness=false: requests are
	// then limited only by the max-in-flight filter, and the bootstrap
	// FlowSchemas and PriorityLevelConfigurations are not created. Default:
	// on, as on a cluster; off, a server starts ~25 ms sooner and a create is
	// ~8% faster (BENCHMARKS.md).
	DisablePriorityAndFairness bool

	// Profile chooses what runs besides the API: the default controllers
	// and admission plugins of a cluster (ProfileCluster, the default) or
	// of envtest's control plane (ProfileEnvtest).
	Profile Profile

	// Controllers are the control loops the server runs, named as
	// kube-controller-manager's --controllers reads them: "*" is every
	// controller, "name" turns one on, "-name" one off. Default (nil): the
	// profile's: "*", all of controllers.All(), for ProfileCluster; none
	// for ProfileEnvtest. {"*", "-namespace"} keeps terminating namespaces
	// for a test's own finalizer logic; an empty list runs none.
	Controllers []controllers.Name

	// Nodes are the simulated nodes registered before Start returns: a
	// Node object each (annotated controllers.SimulatedAnnotation), kept
	// Ready with its Lease by the simulated kubelet (controllers.Kubelet),
	// which runs the pods bound to it as a kubelet reports them, with no
	// container runtime. Default (nil): the profile's: one node, "node-0",
	// for ProfileCluster; none for ProfileEnvtest. An empty list registers
	// none; controllers.Nodes(3) gives three of the defaults. Server.Nodes
	// adds and changes nodes later.
	Nodes []controllers.Node

	// Clock is the clock of the server's controllers and simulated
	// processes: the kubelet's restart back-off, probe delays and grace
	// periods, the node lifecycle's grace period, evictions'
	// tolerationSeconds. A test that must not wait for them passes a fake
	// clock (k8s.io/utils/clock/testing) and steps it. It does not move the
	// API machinery's own timestamps (creationTimestamp,
	// deletionTimestamp, managed fields), which are the machine's. Default:
	// the real clock.
	Clock clock.WithTickerAndDelayedExecution

	// KeepKlogLogger leaves klog's process-wide logger alone. By default the
	// first New of a process points it at a logger that prints only errors
	// to stderr: the Kubernetes libraries log through klog where they have
	// no contextual logger, and their info logs would flood test output.
	// Set it when the program configures klog itself.
	KeepKlogLogger bool

	// Timing slows the server's storage to another server's timing:
	// timing.Etcd() for kube-apiserver on etcd's, timing.Shake(seed) for
	// seeded random delays that expose a controller's races. The answers
	// and the watch guarantees are the same; only when writes commit and
	// events arrive moves. A Seed of 0 is picked at New, logged at Start
	// and reported by Server.Timing. Default: none (the zero Profile), and
	// then the storage is not wrapped at all.
	Timing timing.Profile
}

// Profile names a set of defaults for what a server runs besides the API.
type Profile string

const (
	// ProfileCluster behaves as a cluster's control plane: kube-apiserver
	// with its default admission plugins, and the loops of
	// kube-controller-manager that kubeembed has (controllers.All): every
	// new namespace gets its "default" ServiceAccount, owners' dependents
	// are collected, deleted namespaces are emptied and go.
	ProfileCluster Profile = "cluster"
	// ProfileEnvtest behaves as the control plane of controller-runtime's
	// envtest: kube-apiserver with the ServiceAccount admission plugin
	// disabled (pods need no service account and get no token volume), and
	// no controllers: no "default" ServiceAccount, no garbage collection,
	// deleted namespaces stay Terminating. Suites written for envtest
	// depend on it (one that lists service accounts and expects only its
	// own, for one); the envtest drop-in module uses it.
	ProfileEnvtest Profile = "envtest"
)

// Profiles are the profiles a server can run.
func Profiles() []Profile { return []Profile{ProfileCluster, ProfileEnvtest} }

// completedOptions is Options with every default filled in and every CRD
// file read: New builds only from it, so the compiler proves that defaults
// were applied.
type completedOptions struct {
	log  *zap.Logger
	host string
	port int
	// storage is Options.Storage or a memory backend the server owns.
	storage     storage.Backend
	ownsStorage bool
	// providers are the built-in providers, then Options.Providers.
	providers []providers.Provider
	// openAPIKey names them, for the OpenAPI caches.
	openAPIKey string
	crds       []*apiextensionsv1.CustomResourceDefinition
	rbac       []*unstructured.Unstructured
	token      string
	certDir    string
	keepKlog   bool
	// priorityAndFairness is on unless disabled.
	priorityAndFairness bool
	audit               auditConfig
	// controllers are the controllers to run, in start order.
	controllers []controllers.Name
	// serviceAccountAdmission is the ServiceAccount admission plugin: on
	// for ProfileCluster.
	serviceAccountAdmission bool
	nodes                   []controllers.Node
	clock                   clock.WithTickerAndDelayedExecution
	// serviceRange is Options.ServiceClusterIPRange (zero: the default).
	serviceRange netip.Prefix
	// timing is Options.Timing with its seed picked.
	timing timing.Profile
}

// complete validates o, reporting every problem at once, and fills in its
// defaults. The memory backend it may create is closed by whoever fails
// after it.
func (o Options) complete() (completedOptions, error) {
	crds, err := o.validate()
	if err != nil {
		return completedOptions{}, err
	}
	audit, err := newAudit(auditOptions{Policy: o.AuditPolicy, PolicyFile: o.AuditPolicyFile, LogPath: o.AuditLogPath, Events: o.AuditEvents})
	if err != nil {
		return completedOptions{}, err
	}
	rbac, err := manifests.RBAC(o.RBACPaths)
	if err != nil {
		return completedOptions{}, err
	}
	c := completedOptions{
		rbac: rbac,
		log:  o.Logger, host: o.BindAddress, port: o.Port, storage: o.Storage,
		providers:  append(controlplane.BuiltinProviders(), o.Providers...),
		openAPIKey: controlplane.OpenAPIKey(o.Providers),
		crds:       crds, token: o.AdminToken, certDir: o.CertDir, keepKlog: o.KeepKlogLogger,
		priorityAndFairness: !o.DisablePriorityAndFairness,
		audit:               audit,
	}
	c.controllers, _ = controllers.Enabled(o.controllers()) // validated
	c.serviceAccountAdmission = o.Profile != ProfileEnvtest
	c.nodes, c.clock = o.nodes(), o.Clock
	c.serviceRange, _ = serviceRange(o.ServiceClusterIPRange) // validated
	if o.Timing.Enabled() {
		c.timing = o.Timing.Seeded()
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.log == nil {
		c.log = zap.NewNop()
	}
	if c.host == "" {
		c.host = "127.0.0.1"
	}
	if c.storage == nil {
		c.storage, c.ownsStorage = memory.NewBackend(memory.Options{}), true
	}
	return c, nil
}

// nodes is Options.Nodes, or the profile's default.
func (o Options) nodes() []controllers.Node {
	switch {
	case o.Nodes != nil:
		return slices.Clone(o.Nodes)
	case o.Profile == ProfileEnvtest:
		return nil
	default:
		return controllers.Nodes(1)
	}
}

// controllers is Options.Controllers, or the profile's default.
func (o Options) controllers() []controllers.Name {
	switch {
	case o.Controllers != nil:
		return o.Controllers
	case o.Profile == ProfileEnvtest:
		return []controllers.Name{}
	default:
		return []controllers.Name{"*"}
	}
}

func (o Options) validate() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var errs []error
	if o.Port < 0 || o.Port > 65535 {
		errs = append(errs, fmt.Errorf("options: Port %d is not a TCP port (0-65535)", o.Port))
	}
	if o.BindAddress != "" && net.ParseIP(o.BindAddress) == nil {
		errs = append(errs, fmt.Errorf("options: BindAddress %q is not an IP address", o.BindAddress))
	}
	seen := map[string]bool{}
	for _, p := range controlplane.BuiltinProviders() {
		seen[p.GroupName()] = true
	}
	for i, p := range o.Providers {
		if p == nil {
			errs = append(errs, fmt.Errorf("options: Providers[%d] is nil", i))
			continue
		}
		if seen[p.GroupName()] {
			errs = append(errs, fmt.Errorf("options: Providers[%d] serves group %q, which is already served", i, p.GroupName()))
		}
		seen[p.GroupName()] = true
	}
	crds, err := manifests.CRDs(o.CRDs, o.CRDPaths)
	if err != nil {
		errs = append(errs, err)
	}
	if o.Profile != "" && !slices.Contains(Profiles(), o.Profile) {
		errs = append(errs, fmt.Errorf("options: Profile %q is not a profile (known: %v)", o.Profile, Profiles()))
	}
	if _, err := controllers.Enabled(o.controllers()); err != nil {
		errs = append(errs, fmt.Errorf("options: Controllers: %w", err))
	}
	errs = append(errs, validateNodes(o.Nodes)...)
	if _, err := serviceRange(o.ServiceClusterIPRange); err != nil {
		errs = append(errs, fmt.Errorf("options: ServiceClusterIPRange %q: %w", o.ServiceClusterIPRange, err))
	}
	if err := o.Timing.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("options: Timing: %w", err))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return crds, nil
}

// serviceRange parses a service cluster IP range; "" is the default (the
// zero Prefix).
func serviceRange(s string) (netip.Prefix, error) {
	if s == "" {
		return netip.Prefix{}, nil
	}
	p, err := netip.ParsePrefix(s)
	switch {
	case strings.Contains(s, ","):
		return p, errors.New("a list of ranges (dual-stack): kubeembed serves one IPv4 range")
	case err != nil:
		return p, fmt.Errorf("not a CIDR: %w", err)
	case !p.Addr().Is4():
		return p, errors.New("not an IPv4 range: kubeembed serves one IPv4 range")
	case p.Bits() < 8 || p.Bits() > 30:
		return p, fmt.Errorf("a prefix of %d bits: the range must have 8 to 30", p.Bits())
	}
	return p.Masked(), nil
}

// validateNodes reports every node without a valid, unique name.
func validateNodes(nodes []controllers.Node) []error {
	var errs []error
	seen := map[string]bool{}
	for i, n := range nodes {
		for _, msg := range validation.IsDNS1123Subdomain(n.Name) {
			errs = append(errs, fmt.Errorf("options: Nodes[%d]: name %q: %s", i, n.Name, msg))
		}
		if seen[n.Name] {
			errs = append(errs, fmt.Errorf("options: Nodes[%d]: name %q is given more than once", i, n.Name))
		}
		seen[n.Name] = true
	}
	return errs
}
