package controlplane

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"

	"github.com/kubeembed/apiserver/internal/certs"
	"github.com/kubeembed/apiserver/internal/satoken"
)

// Keys are a server's keys: its CA (serving certificate, client
// certificates), the front proxy's, and the service account token issuer.
type Keys struct {
	CA         *certs.CA
	FrontProxy *FrontProxy
	Issuer     *satoken.Issuer
	// AdminToken is a token for the admin (apiserver.Options.AdminToken's
	// default), kept in certDir's admin.token: a kubeconfig written by one
	// server works with the next.
	AdminToken string
}

// LoadKeys makes the server's keys, or reads them from certDir where an
// earlier server kept them (kube-apiserver's --cert-dir): certificates it
// issued and tokens it signed stay valid. No certDir: new keys.
func LoadKeys(certDir string) (_ Keys, err error) {
	var k Keys
	if k.CA, err = certs.LoadOrNewCA(certDir, "ca", "kubeembed-ca"); err != nil {
		return Keys{}, err
	}
	if k.FrontProxy, err = newFrontProxy(certDir); err != nil {
		return Keys{}, err
	}
	if certDir == "" {
		k.AdminToken = NewToken()
		k.Issuer, err = satoken.New(satoken.DefaultIssuer)
		return k, err
	}
	if k.AdminToken, err = loadOrNewToken(filepath.Join(certDir, "admin.token")); err != nil {
		return Keys{}, err
	}
	key, err := certs.LoadOrNewKey(filepath.Join(certDir, "sa.key"))
	if err != nil {
		return Keys{}, err
	}
	k.Issuer, err = satoken.WithKey(satoken.DefaultIssuer, key)
	return k, err
}

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

// FrontProxy is the front-proxy CA and the aggregator's client certificate.
type FrontProxy struct {
	ca   *certs.CA
	leaf certs.Leaf
}

func newFrontProxy(certDir string) (*FrontProxy, error) {
	ca, err := certs.LoadOrNewCA(certDir, "front-proxy-ca", "front-proxy-ca")
	if err != nil {
		return nil, err
	}
	leaf, err := ca.Client(frontProxyClient, "", nil)
	if err != nil {
		return nil, err
	}
	return &FrontProxy{ca: ca, leaf: leaf}, nil
}

// inFiles calls read with files that hold the aggregator's client
// certificate and key, removed when read returns: kube-aggregator reads
// them from files only, once when it is built (its hook that would watch
// them for rotation has nothing to watch: createAggregator). Files that
// stayed for the server's life outlived every server a test process did
// not close (the pool's idle ones), one directory each in the machine's
// temporary directory.
func (fp *FrontProxy) inFiles(read func(certFile, keyFile string) error) error {
	dir, err := os.MkdirTemp("", "kubeembed-front-proxy-")
	if err != nil {
		return fmt.Errorf("front proxy certificate: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, fp.leaf.CertPEM, 0o600); err != nil {
		return fmt.Errorf("front proxy certificate: %w", err)
	}
	if err := os.WriteFile(keyFile, fp.leaf.KeyPEM, 0o600); err != nil {
		return fmt.Errorf("front proxy certificate: %w", err)
	}
	return read(certFile, keyFile)
}

// authenticator authenticates requests whose client certificate is the
// front proxy's by their request headers.
func (fp *FrontProxy) authenticator() authenticator.Request {
	opts := x509request.DefaultVerifyOptions()
	opts.Roots = fp.ca.Pool()
	list := func(v ...string) headerrequest.StringSliceProvider { return headerrequest.StaticStringSlice(v) }
	return headerrequest.NewDynamicVerifyOptionsSecure(func() (x509.VerifyOptions, bool) { return opts, true },
		list(frontProxyClient), list(remoteUser), list(), list(remoteGroup), list(remoteExtra))
}

// publishedInfo is what kube-apiserver publishes of its request-header
// authentication in extension-apiserver-authentication.
func (fp *FrontProxy) publishedInfo() map[string]string {
	return map[string]string{
		"requestheader-client-ca-file":       string(fp.ca.CertPEM),
		"requestheader-allowed-names":        `["` + frontProxyClient + `"]`,
		"requestheader-username-headers":     `["` + remoteUser + `"]`,
		"requestheader-group-headers":        `["` + remoteGroup + `"]`,
		"requestheader-extra-headers-prefix": `["` + remoteExtra + `"]`,
	}
}

// loadOrNewToken reads the token in file, or writes a new one there.
func loadOrNewToken(file string) (string, error) {
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		token := NewToken()
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			return "", err
		}
		return token, certs.WriteFile(file, []byte(token+"\n"), 0o600)
	}
	if err != nil {
		return "", err
	}
	token := strings.TrimSpace(string(data))
	if token == "" {
		return "", fmt.Errorf("%s: empty token", file)
	}
	return token, nil
}

// NewToken returns a random bearer token.
func NewToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // never fails
	return hex.EncodeToString(b)
}
