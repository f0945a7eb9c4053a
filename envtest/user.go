package envtest

import (
	"fmt"
	"net/url"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// AuthenticatedUser is a user provisioned by Environment.AddUser.
type AuthenticatedUser struct {
	cfg *rest.Config
}

// Config returns the user's client configuration.
func (u *AuthenticatedUser) Config() *rest.Config { return u.cfg }

// KubeConfig returns a kubeconfig equivalent to Config, for kubectl or
// other clients.
func (u AuthenticatedUser) KubeConfig() ([]byte, error) { return kubeConfigFromREST(u.cfg) }

// kubeConfigFromREST writes cfg as a kubeconfig whose cluster, user and
// context are named "envtest", as envtest names them.
func kubeConfigFromREST(cfg *rest.Config) ([]byte, error) {
	const name = "envtest"
	base, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("unable to interpret config's host value as a URL: %w", err)
	}
	scheme := "https"
	if !rest.IsConfigTransportTLS(*cfg) {
		scheme = "http"
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   (&url.URL{Scheme: scheme, Host: base.Host, Path: cfg.APIPath}).String(),
		CertificateAuthorityData: cfg.CAData,
	}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData,
		Token: cfg.BearerToken, Username: cfg.Username, Password: cfg.Password}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	return clientcmd.Write(*kc)
}
