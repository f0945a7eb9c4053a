package apiserver

import (
	"path/filepath"

	"github.com/kubeembed/apiserver/internal/certs"
	"github.com/kubeembed/apiserver/internal/satoken"
)

// loadKeys makes the server's CA, front-proxy CA and service-account
// signing key, or reads them from Options.CertDir where an earlier server
// kept them: certificates it issued and tokens it signed stay valid.
func (s *Server) loadKeys() (err error) {
	dir := s.opts.certDir
	if s.ca, err = certs.LoadOrNewCA(dir, "ca", "kubeembed-ca"); err != nil {
		return err
	}
	if s.frontProxy, err = newFrontProxy(dir); err != nil {
		return err
	}
	if dir == "" {
		s.tokens, err = satoken.New(satoken.DefaultIssuer)
		return err
	}
	key, err := certs.LoadOrNewKey(filepath.Join(dir, "sa.key"))
	if err != nil {
		return err
	}
	s.tokens, err = satoken.WithKey(satoken.DefaultIssuer, key)
	return err
}
