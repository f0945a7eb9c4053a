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
	"sync"
	"time"

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
	defer func() {
		if err != nil {
			k.Remove()
		}
	}()
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

// Remove removes the files the keys were written to for the aggregator
// (the front proxy's client certificate); safe on zero Keys.
func (k Keys) Remove() { k.FrontProxy.remove() }

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

// FrontProxy is the front-proxy CA and the aggregator's client certificate,
// in files (the aggregator reads it from files only), removed by Close.
type FrontProxy struct {
	ca                *certs.CA
	dir               string
	certFile, keyFile string
	// unlock releases the directory's lock (sweepFrontProxyDirs).
	unlock func()
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
	sweepOnce.Do(func() { sweepFrontProxyDirs(os.TempDir()) })
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", frontProxyDirPrefix, os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("front proxy certificate: %w", err)
	}
	fp := &FrontProxy{ca: ca, dir: dir, certFile: filepath.Join(dir, "tls.crt"), keyFile: filepath.Join(dir, "tls.key")}
	if fp.unlock, err = lockDir(dir); err != nil {
		fp.remove()
		return nil, fmt.Errorf("front proxy certificate: %w", err)
	}
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

// frontProxyDirPrefix names the front proxy's directories in the temporary
// directory, followed by the process's ID (for whoever looks): kube-aggregator
// reads the certificate from files, and watches them for the server's life.
// The server holds a lock on its directory while it runs.
const frontProxyDirPrefix = "kubeembed-front-proxy-"

var sweepOnce sync.Once

// sweepFrontProxyDirs removes the front-proxy directories in dir that no
// process holds. Close removes a server's directory, but a process does
// not close every server before it exits (apiservertest's pool keeps idle
// servers to the end, test binaries get killed), so each run left one or
// two behind (hundreds on a CI machine). The first server of a process
// sweeps up after the processes before it. A lock, not the process ID,
// tells a living server's directory: a process of another PID namespace
// (a container sharing /tmp) is alive though no process here has its ID.
// Directories younger than a minute are left alone: their server may not
// hold its lock yet.
func sweepFrontProxyDirs(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), frontProxyDirPrefix)
		_, _, dashed := strings.Cut(rest, "-")
		info, err := e.Info()
		if !ok || !dashed || !e.IsDir() || err != nil || time.Since(info.ModTime()) < time.Minute {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if release, ok := unlocked(path); ok {
			_ = os.RemoveAll(path)
			release()
		}
	}
}

func (fp *FrontProxy) remove() {
	if fp != nil {
		_ = os.RemoveAll(fp.dir)
		if fp.unlock != nil {
			fp.unlock()
		}
	}
}

// authenticator authenticates requests whose client certificate is the
// front proxy's by their request headers.
func (fp *FrontProxy) authenticator() authenticator.Request {
	opts := fp.verifyOptions()
	list := func(v ...string) headerrequest.StringSliceProvider { return headerrequest.StaticStringSlice(v) }
	return headerrequest.NewDynamicVerifyOptionsSecure(func() (x509.VerifyOptions, bool) { return opts, true },
		list(frontProxyClient), list(remoteUser), list(), list(remoteGroup), list(remoteExtra))
}

// verifyOptions verify client certificates the front proxy's CA signed.
func (fp *FrontProxy) verifyOptions() x509.VerifyOptions {
	opts := x509request.DefaultVerifyOptions()
	opts.Roots = fp.ca.Pool()
	return opts
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
