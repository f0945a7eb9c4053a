package apiserver

import (
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"

	"github.com/kubeembed/apiserver/internal/certs"
)

// The front proxy: the aggregator calls an aggregated API server with a
// client certificate of the front-proxy CA and the user in request headers,
// as kube-apiserver does with --proxy-client-cert-file and
// --requestheader-*; the aggregated server trusts those headers from a
// certificate of that CA (it reads the CA and the header names from
// kube-system/extension-apiserver-authentication), and so does this server.
const (
	frontProxyClient = "front-proxy-client"
	remoteUser       = "X-Remote-User"
	remoteGroup      = "X-Remote-Group"
	remoteExtra      = "X-Remote-Extra-"
)

// frontProxy is the front-proxy CA and the aggregator's client certificate,
// in files (the aggregator reads it from files only), removed by Close.
type frontProxy struct {
	ca                *certs.CA
	dir               string
	certFile, keyFile string
}

func newFrontProxy(certDir string) (*frontProxy, error) {
	ca, err := certs.LoadOrNewCA(certDir, "front-proxy-ca", "front-proxy-ca")
	if err != nil {
		return nil, err
	}
	leaf, err := ca.Client(frontProxyClient, "", nil)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kubeembed-front-proxy-")
	if err != nil {
		return nil, fmt.Errorf("front proxy certificate: %w", err)
	}
	fp := &frontProxy{ca: ca, dir: dir, certFile: filepath.Join(dir, "tls.crt"), keyFile: filepath.Join(dir, "tls.key")}
	if err := os.WriteFile(fp.certFile, leaf.CertPEM, 0o600); err != nil {
		fp.remove()
		return nil, fmt.Errorf("front proxy certificate: %w", err)
	}
	if err := os.WriteFile(fp.keyFile, leaf.KeyPEM, 0o600); err != nil {
		fp.remove()
		return nil, fmt.Errorf("front proxy certificate: %w", err)
	}
	return fp, nil
}

func (fp *frontProxy) remove() {
	if fp != nil {
		_ = os.RemoveAll(fp.dir)
	}
}

// authenticator authenticates requests whose client certificate is the
// front proxy's by their request headers.
func (fp *frontProxy) authenticator() authenticator.Request {
	opts := x509request.DefaultVerifyOptions()
	opts.Roots = fp.ca.Pool()
	list := func(v ...string) headerrequest.StringSliceProvider { return headerrequest.StaticStringSlice(v) }
	return headerrequest.NewDynamicVerifyOptionsSecure(func() (x509.VerifyOptions, bool) { return opts, true },
		list(frontProxyClient), list(remoteUser), list(), list(remoteGroup), list(remoteExtra))
}

// publishedInfo is what kube-apiserver publishes of its request-header
// authentication in extension-apiserver-authentication.
func (fp *frontProxy) publishedInfo() map[string]string {
	return map[string]string{
		"requestheader-client-ca-file":       string(fp.ca.CertPEM),
		"requestheader-allowed-names":        `["` + frontProxyClient + `"]`,
		"requestheader-username-headers":     `["` + remoteUser + `"]`,
		"requestheader-group-headers":        `["` + remoteGroup + `"]`,
		"requestheader-extra-headers-prefix": `["` + remoteExtra + `"]`,
	}
}
