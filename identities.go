package apiserver

// Identities: client configurations for any user, and for service accounts.

import (
	"context"
	"errors"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// RESTConfigFor returns a client configuration authenticated as u by a
// client certificate of the server's CA, as kube-apiserver reads one: the
// common name is the user, the organizations its groups, and u's UID the
// certificate's UID attribute. The server adds system:authenticated.
// What the user may do is what RBAC grants it (a user in system:masters
// may do anything). A certificate carries no extra fields: u with Extra is
// an error (impersonate such users from RESTConfig with
// rest.ImpersonationConfig). Another server's certificates are refused.
func (s *Server) RESTConfigFor(u user.Info) (*rest.Config, error) {
	if u == nil || u.GetName() == "" {
		return nil, errors.New("RESTConfigFor: the user needs a name")
	}
	if len(u.GetExtra()) > 0 {
		return nil, fmt.Errorf("RESTConfigFor %s: a client certificate cannot carry extra fields; impersonate the user instead", u.GetName())
	}
	leaf, err := s.keys.CA.Client(u.GetName(), u.GetUID(), u.GetGroups())
	if err != nil {
		return nil, fmt.Errorf("RESTConfigFor %s: %w", u.GetName(), err)
	}
	cfg := rest.AnonymousClientConfig(s.config)
	cfg.CertData, cfg.KeyData = leaf.CertPEM, leaf.KeyPEM
	return cfg, nil
}

// ClientsetFor returns a typed client authenticated as u (RESTConfigFor),
// served in process (InProcess).
func (s *Server) ClientsetFor(u user.Info) (kubernetes.Interface, error) {
	cfg, err := s.RESTConfigFor(u)
	if err != nil {
		return nil, err
	}
	if cfg, err = s.InProcess(cfg); err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// RESTConfigForServiceAccount returns a client configuration authenticated
// as the service account namespace/name (system:serviceaccount:<ns>:<name>,
// groups system:serviceaccounts and system:serviceaccounts:<ns>) with a
// bound token the server issues for an hour, as kubectl create token does.
// The account must exist; the token stops working when it is deleted.
func (s *Server) RESTConfigForServiceAccount(ctx context.Context, namespace, name string) (*rest.Config, error) {
	admin, err := s.Clientset()
	if err != nil {
		return nil, err
	}
	hour := int64(3600)
	tr, err := admin.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("RESTConfigForServiceAccount %s/%s: %w", namespace, name, err)
	}
	cfg := rest.AnonymousClientConfig(s.config)
	cfg.BearerToken = tr.Status.Token
	return cfg, nil
}
