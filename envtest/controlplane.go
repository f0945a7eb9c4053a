package envtest

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"
)

// describeControlPlane fills in ControlPlane's API server with the running
// server's connection details, as envtest's Start leaves them, so that
// suites reading them, or provisioning users through the control plane
// (testEnv.ControlPlane.AddUser(...) then KubeConfig(), as
// controller-runtime's scratch-env example does), work unchanged: its
// URL, SecurePort and SecureServing (address, port, the CA), an Authn that
// provisions users as Environment.AddUser does, and a CertDir where
// AuthenticatedUser.Kubectl writes its kubeconfig (removed by Stop). The
// APIServer a suite made before Start (its Configure flags) is kept. Its
// Etcd is an etcd that never started (no URL, no data directory), so that
// suites setting its StopTimeout or reading its DataDir to clean up after
// envtest do not dereference nil.
func (te *Environment) describeControlPlane() error {
	u, err := url.Parse(te.Server.URL())
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return fmt.Errorf("the server's port: %w", err)
	}
	dir, err := os.MkdirTemp("", "envtest-controlplane-")
	if err != nil {
		return err
	}
	if te.ControlPlane.Etcd == nil {
		te.ControlPlane.Etcd = &Etcd{}
	}
	api := te.ControlPlane.GetAPIServer()
	api.URL, api.SecurePort, api.CertDir = u, port, dir
	api.SecureServing.ListenAddr = ListenAddr{Address: u.Hostname(), Port: u.Port()}
	api.SecureServing.CA = te.Server.CACert()
	api.SecureServing.Authn = serverAuthn{te}
	return nil
}

// forgetControlPlane undoes what describeControlPlane allocated, as
// envtest's Stop removes the CertDir it made: the CA and Authn stay (a
// user provisioned before reads the CA; AddUser now fails, the server
// being gone). The address and port stay when the suite chose them (a
// restart serves there again, as envtest's); those Start chose are
// forgotten, so that a restart picks a free port again.
func (te *Environment) forgetControlPlane() error {
	api := te.ControlPlane.APIServer
	if api == nil || api.CertDir == "" {
		return nil
	}
	err := os.RemoveAll(api.CertDir)
	api.CertDir = ""
	if !te.suiteChoseAddress {
		api.URL, api.SecurePort, api.SecureServing.ListenAddr = nil, 0, ListenAddr{}
	}
	return err
}

// listenOn writes into port and bind (unless set: the server options
// choose first) the port and loopback address a suite chose on the
// control plane's API server before Start, as envtest's Start serves on
// them. An address that is not a loopback IP is not served on (kubeembed
// listens on loopback only), and the server's default is used.
func (te *Environment) listenOn(port *int, bind *string) error {
	api := te.ControlPlane.APIServer
	if api == nil {
		return nil
	}
	addr := api.SecureServing.ListenAddr
	switch {
	case *port != 0:
	case addr.Port != "":
		p, err := strconv.Atoi(addr.Port)
		if err != nil {
			return fmt.Errorf("ControlPlane.APIServer.SecureServing.Port %q: %w", addr.Port, err)
		}
		*port, te.suiteChoseAddress = p, true
	case api.SecurePort != 0:
		*port, te.suiteChoseAddress = api.SecurePort, true
	}
	if ip := net.ParseIP(addr.Address); *bind == "" && ip != nil && ip.IsLoopback() {
		*bind, te.suiteChoseAddress = addr.Address, true
	}
	return nil
}

// serviceRangeFlag is the API server flag --service-cluster-ip-range a
// suite set through ControlPlane.GetAPIServer().Configure(), for
// Options.ServiceClusterIPRange (unless set: the server options choose
// first): the one flag of kube-apiserver's that suites set and then depend
// on (cluster IPs they give Services must be in it). A dual-stack or IPv6
// range, which kubeembed does not serve, leaves the default.
func (te *Environment) serviceRangeFlag(serviceRange *string) {
	api := te.ControlPlane.APIServer
	if api == nil || *serviceRange != "" {
		return
	}
	vals := api.Configure().Get("service-cluster-ip-range").Get(nil)
	for _, arg := range api.Args { // the deprecated way, "--flag=value"
		if v, ok := strings.CutPrefix(arg, "--service-cluster-ip-range="); ok && len(vals) == 0 {
			vals = []string{v}
		}
	}
	if len(vals) == 0 {
		return
	}
	if p, err := netip.ParsePrefix(vals[len(vals)-1]); err == nil && p.Addr().Is4() {
		*serviceRange = p.String()
	}
}

// serverAuthn is the control plane's Authn: users are provisioned by the
// Environment's server, as Environment.AddUser does.
type serverAuthn struct{ te *Environment }

// Configure implements Authn: there are no flags to write.
func (serverAuthn) Configure(string, *Arguments) error { return nil }

// Start implements Authn: the server authenticates its users already.
func (serverAuthn) Start() error { return nil }

// Stop implements Authn.
func (serverAuthn) Stop() error { return nil }

// AddUser implements Authn.
func (a serverAuthn) AddUser(u User, baseCfg *rest.Config) (*rest.Config, error) {
	if a.te.Server == nil {
		return nil, errors.New("AddUser: the environment's server is stopped")
	}
	user, err := a.te.AddUser(u, baseCfg)
	if err != nil {
		return nil, err
	}
	return user.Config(), nil
}
