package envtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/timing"
)

// The environment variables envtest reads, read the same way here.
const (
	envUseExistingCluster = "USE_EXISTING_CLUSTER"
	envStartTimeout       = "KUBEBUILDER_CONTROLPLANE_START_TIMEOUT"
	envAttachOutput       = "KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT"

	defaultStartTimeout = 20 * time.Second
)

// StartTimeout and StopTimeout are envtest's constants (seconds).
const (
	StartTimeout = crenvtest.StartTimeout
	StopTimeout  = crenvtest.StopTimeout
)

// The types envtest re-exports from its control plane, the very same types
// here, so code that passes them around compiles unchanged. The control
// plane's processes are never started; Start fills in its APIServer's
// connection details and user provisioning (see Environment.ControlPlane).
type (
	ControlPlane  = crenvtest.ControlPlane
	APIServer     = crenvtest.APIServer
	Etcd          = crenvtest.Etcd
	User          = crenvtest.User
	ListenAddr    = crenvtest.ListenAddr
	SecureServing = crenvtest.SecureServing
	Authn         = crenvtest.Authn
	Arguments     = crenvtest.Arguments
	Arg           = crenvtest.Arg
)

var (
	// EmptyArguments is envtest's.
	EmptyArguments = crenvtest.EmptyArguments
	// DefaultKubeAPIServerFlags is envtest's (accepted and ignored: there is
	// no kube-apiserver process to pass flags to).
	//
	// Deprecated: envtest deprecates it too.
	DefaultKubeAPIServerFlags = crenvtest.DefaultKubeAPIServerFlags //nolint:staticcheck
	// DefaultBinaryAssetsIndexURL is envtest's (unused: nothing is
	// downloaded).
	DefaultBinaryAssetsIndexURL = crenvtest.DefaultBinaryAssetsIndexURL
)

// SetupEnvtestDefaultBinaryAssetsDirectory is envtest's: where
// setup-envtest keeps binaries. The drop-in needs none; suites that set
// BinaryAssetsDirectory from it keep compiling.
func SetupEnvtestDefaultBinaryAssetsDirectory() (string, error) {
	return crenvtest.SetupEnvtestDefaultBinaryAssetsDirectory()
}

// Environment is envtest's test environment: Start brings up an API server
// (kubeembed's, in process, unless UseExistingCluster) and installs the
// CRDs and webhooks; Stop takes it down. The fields are envtest's, with
// envtest's documentation; the ones about binaries and processes are
// accepted and ignored, and the last four are kubeembed's own.
type Environment struct {
	// ControlPlane starts no processes, and the flags set on it are not
	// read but --service-cluster-ip-range (an IPv4 range). A port (and
	// loopback address) set on its APIServer before Start is served on;
	// after Start its APIServer describes the server (URL, SecurePort,
	// SecureServing's address, port and CA, CertDir), and its AddUser
	// provisions users as Environment.AddUser does.
	ControlPlane ControlPlane

	// Scheme decides which CRDs get a conversion webhook: those whose
	// types in it implement Hub and Convertible. Default scheme.Scheme.
	Scheme *runtime.Scheme

	// Config talks to the API server: set by Start (the user "admin" in
	// system:masters, by client certificate, as envtest's; served in
	// process unless NetworkClients), or given with UseExistingCluster.
	Config *rest.Config

	// KubeConfig is a kubeconfig equivalent to Config, set by Start if
	// empty.
	KubeConfig []byte

	// CRDInstallOptions are the options for installing CRDs.
	CRDInstallOptions CRDInstallOptions

	// WebhookInstallOptions are the options for installing webhooks.
	WebhookInstallOptions WebhookInstallOptions

	// ErrorIfCRDPathMissing makes a missing CRD path an error of Start.
	ErrorIfCRDPathMissing bool

	// CRDs are installed, merged (by name) with CRDInstallOptions.CRDs.
	CRDs []*apiextensionsv1.CustomResourceDefinition

	// CRDDirectoryPaths are directories or files of CRDs to install,
	// merged with CRDInstallOptions.Paths.
	CRDDirectoryPaths []string

	// DownloadBinaryAssets, DownloadBinaryAssetsVersion,
	// DownloadBinaryAssetsIndexURL and BinaryAssetsDirectory are accepted
	// and ignored: there are no binaries.
	DownloadBinaryAssets         bool
	DownloadBinaryAssetsVersion  string
	DownloadBinaryAssetsIndexURL string
	BinaryAssetsDirectory        string

	// UseExistingCluster uses the cluster of Config, or of the kubeconfig
	// controller-runtime finds (--kubeconfig, KUBECONFIG, in-cluster,
	// ~/.kube/config), instead of starting a server. Default: the
	// environment variable USE_EXISTING_CLUSTER is "true".
	UseExistingCluster *bool

	// ControlPlaneStartTimeout bounds Start's server start (default
	// KUBEBUILDER_CONTROLPLANE_START_TIMEOUT, or 20 s);
	// ControlPlaneStopTimeout is accepted (Stop closes the server, which
	// bounds itself).
	ControlPlaneStartTimeout time.Duration
	ControlPlaneStopTimeout  time.Duration

	// AttachControlPlaneOutput (or
	// KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT=true) writes the server's log
	// to standard error, unless ServerOptions has a Logger.
	AttachControlPlaneOutput bool

	// Controllers are kubeembed's controllers to run, as
	// apiserver.Options.Controllers reads them. Default none, as envtest;
	// {"*"} runs them all: default service accounts, garbage collection,
	// namespace deletion, ...
	Controllers []controllers.Name

	// ServerOptions are the server's other options (Logger, audit,
	// RBACPaths, Timing, ...). Start sets its Profile
	// (apiserver.ProfileEnvtest), Controllers and CRDs. Without a Timing,
	// KUBEEMBED_TIMING chooses one (timing.Parse: "etcd", "shake",
	// "shake:SEED"), and Start prints it with its seed to standard error.
	ServerOptions apiserver.Options

	// NetworkClients makes Config and AddUser's configurations go over
	// the network (TLS to the server's loopback listener) as envtest's do.
	// By default they are in process (apiserver.Server.InProcess): the
	// same TLS fields, client certificate and answers, without TCP or TLS
	// for each request; exec, attach and port-forward still go over the
	// network, and a kubeconfig made from them (KubeConfig) is a network
	// one. A baseConfig of AddUser with its own Transport stays as it is.
	NetworkClients bool

	// Server is the running server, set by Start (nil with
	// UseExistingCluster): WaitIdle, faults, recording, snapshots.
	Server *apiserver.Server

	// suiteChoseAddress: ControlPlane's address or port were the suite's.
	suiteChoseAddress bool
}

// Start starts the API server, or connects to the existing cluster, then
// installs the CRDs and the webhooks, and returns the admin's
// configuration (also in Config).
func (te *Environment) Start() (*rest.Config, error) {
	if te.Scheme == nil {
		te.Scheme = scheme.Scheme
	}
	if te.useExistingCluster() {
		return te.startExisting()
	}
	// The webhook server's certificate first: the CRDs' conversion
	// webhooks point at it.
	if err := te.WebhookInstallOptions.PrepWithoutInstalling(); err != nil {
		return nil, err
	}
	crds, err := te.crdsToInstall()
	if err != nil {
		return nil, fmt.Errorf("unable to install CRDs onto control plane: %w", err)
	}
	if err := te.startServer(crds); err != nil {
		return nil, fmt.Errorf("unable to start control plane itself: %w", err)
	}
	te.CRDs = crds
	return te.finishStart()
}

// crdsToInstall merges the Environment's CRDs into CRDInstallOptions, as
// envtest does, reads the files and points convertible CRDs at the
// webhook server.
func (te *Environment) crdsToInstall() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	te.mergeCRDOptions()
	options := te.CRDInstallOptions
	defaultCRDOptions(&options)
	if err := ReadCRDFiles(&options); err != nil {
		return nil, fmt.Errorf("unable to read CRD files: %w", err)
	}
	if err := modifyConversionWebhooks(options.CRDs, options.Scheme, options.WebhookOptions); err != nil {
		return nil, err
	}
	return options.CRDs, nil
}

func (te *Environment) mergeCRDOptions() {
	if te.CRDInstallOptions.Scheme == nil {
		te.CRDInstallOptions.Scheme = te.Scheme
	}
	te.CRDInstallOptions.CRDs = mergeCRDs(te.CRDInstallOptions.CRDs, te.CRDs)
	te.CRDInstallOptions.Paths = mergePaths(te.CRDInstallOptions.Paths, te.CRDDirectoryPaths)
	te.CRDInstallOptions.ErrorIfPathMissing = te.ErrorIfCRDPathMissing
	te.CRDInstallOptions.WebhookOptions = te.WebhookInstallOptions
}

// startServer starts kubeembed with the CRDs installed (served before
// Start returns: no discovery polling, unlike InstallCRDs against another
// cluster) and sets Config to the admin envtest provisions.
func (te *Environment) startServer(crds []*apiextensionsv1.CustomResourceDefinition) (err error) {
	timeout, err := durationFromEnv(te.ControlPlaneStartTimeout, envStartTimeout, defaultStartTimeout)
	if err != nil {
		return fmt.Errorf("failed to default controlplane timeouts: %w", err)
	}
	opts := te.ServerOptions
	opts.Profile, opts.Controllers = apiserver.ProfileEnvtest, te.Controllers
	if err := te.listenOn(&opts.Port, &opts.BindAddress); err != nil {
		return err
	}
	te.serviceRangeFlag(&opts.ServiceClusterIPRange)
	opts.CRDs = append(append([]*apiextensionsv1.CustomResourceDefinition(nil), opts.CRDs...), crds...)
	if opts.Logger == nil && (te.AttachControlPlaneOutput || os.Getenv(envAttachOutput) == "true") {
		if opts.Logger, err = zap.NewDevelopment(); err != nil {
			return err
		}
	}
	fromEnv := false
	if !opts.Timing.Enabled() {
		if opts.Timing, fromEnv, err = timing.FromEnv(); err != nil {
			return err
		}
	}
	srv, err := apiserver.New(opts)
	if err != nil {
		return err
	}
	if fromEnv && srv.Timing().Enabled() {
		// The suite's output is where CI shows how to replay a failure.
		fmt.Fprintf(os.Stderr, "kubeembed envtest: storage timing %v; replay with %s=%v\n", srv.Timing(), timing.Env, srv.Timing())
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := srv.Start(ctx); err != nil {
		return errors.Join(err, srv.Close())
	}
	te.Server = srv
	if err := te.describeControlPlane(); err != nil {
		return err
	}
	admin, err := te.AddUser(User{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}},
		&rest.Config{QPS: 1000, Burst: 2000}) // envtest's: "gotta go fast during tests"
	if err != nil {
		return fmt.Errorf("unable to provision admin user: %w", err)
	}
	te.Config = admin.Config()
	return nil
}

// startExisting connects to the existing cluster and installs the CRDs
// and webhooks there, as envtest does.
func (te *Environment) startExisting() (*rest.Config, error) {
	if te.Config == nil {
		var err error
		if te.Config, err = config.GetConfig(); err != nil {
			return nil, fmt.Errorf("unable to get configuration for existing cluster: %w", err)
		}
	}
	if err := te.WebhookInstallOptions.PrepWithoutInstalling(); err != nil {
		return nil, err
	}
	te.mergeCRDOptions()
	crds, err := InstallCRDs(te.Config, te.CRDInstallOptions)
	if err != nil {
		return te.Config, fmt.Errorf("unable to install CRDs onto control plane: %w", err)
	}
	te.CRDs = crds
	return te.finishStart()
}

// finishStart fills in KubeConfig and installs the webhooks.
func (te *Environment) finishStart() (*rest.Config, error) {
	if len(te.KubeConfig) == 0 {
		var err error
		if te.KubeConfig, err = kubeConfigFromREST(te.Config); err != nil {
			return nil, fmt.Errorf("unable to set KubeConfig field: %w", err)
		}
	}
	if err := te.WebhookInstallOptions.Install(te.Config); err != nil {
		return nil, fmt.Errorf("unable to install webhooks onto control plane: %w", err)
	}
	return te.Config, nil
}

// Stop uninstalls the CRDs if CRDInstallOptions.CleanUpAfterUse, removes
// the webhook certificates, and closes the server (not an existing
// cluster). It is safe to call after a failed Start.
func (te *Environment) Stop() error {
	if te.CRDInstallOptions.CleanUpAfterUse && te.Config != nil {
		if err := UninstallCRDs(te.Config, te.CRDInstallOptions); err != nil {
			return err
		}
	}
	if err := te.WebhookInstallOptions.Cleanup(); err != nil {
		return err
	}
	if te.Server == nil {
		return nil
	}
	srv := te.Server
	te.Server = nil
	return errors.Join(srv.Close(), te.forgetControlPlane())
}

// AddUser provisions a user of the Environment's server: a client
// certificate with the user's name and groups, added to a copy of
// baseConfig (its QPS, timeouts...), served in process unless
// NetworkClients. It needs the Environment's own server, as envtest needs
// its own control plane.
func (te *Environment) AddUser(u User, baseConfig *rest.Config) (*AuthenticatedUser, error) {
	if te.Server == nil {
		return nil, errors.New("AddUser: the environment has no server of its own (not started, or UseExistingCluster)")
	}
	certCfg, err := te.Server.RESTConfigFor(&user.DefaultInfo{Name: u.Name, Groups: u.Groups})
	if err != nil {
		return nil, err
	}
	cfg := &rest.Config{}
	if baseConfig != nil {
		cfg = rest.CopyConfig(baseConfig)
	}
	cfg.Host, cfg.APIPath = certCfg.Host, certCfg.APIPath
	cfg.TLSClientConfig = certCfg.TLSClientConfig
	if !te.NetworkClients && cfg.Transport == nil {
		if cfg, err = te.Server.InProcess(cfg); err != nil {
			return nil, err
		}
	}
	return &AuthenticatedUser{cfg: cfg}, nil
}

func (te *Environment) useExistingCluster() bool {
	if te.UseExistingCluster == nil {
		return strings.EqualFold(os.Getenv(envUseExistingCluster), "true")
	}
	return *te.UseExistingCluster
}

// durationFromEnv is d, else the environment variable's duration, else
// def.
func durationFromEnv(d time.Duration, env string, def time.Duration) (time.Duration, error) {
	if d != 0 {
		return d, nil
	}
	if v := os.Getenv(env); v != "" {
		return time.ParseDuration(v)
	}
	return def, nil
}
