package controlplane

// Authentication of the server (authz.go authorizes).

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authentication/request/websocket"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	tokencache "k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	tokenunion "k8s.io/apiserver/pkg/authentication/token/union"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"

	"github.com/kubeembed/apiserver/internal/satoken"
)

// AdminUser is the user name of the admin token's identity.
const AdminUser = "kubeembed-admin"

// tokenSuccessCacheTTL is how long kube-apiserver remembers a token that
// authenticated (its TokenSuccessCacheTTL's default; failures, with its
// TokenFailureCacheTTL of 0, are not remembered).
const tokenSuccessCacheTTL = 10 * time.Second

// tokenAuthenticator authenticates bearer tokens only, the requests' (in
// the Authorization header, or a WebSocket's protocol) and TokenReview's:
// the admin token, and the service account tokens of issuer, whose bound
// objects it looks up through inf. As kube-apiserver's, a token that
// authenticated is remembered for tokenSuccessCacheTTL: a token of a
// service account, pod or secret deleted since still authenticates until
// then, on both servers.
func tokenAuthenticator(adminToken string, issuer *satoken.Issuer, inf *informerSet) authenticator.Request {
	// Audience agnostic, as kube-apiserver's --token-auth-file: the admin
	// token is for the server's API audiences only.
	admin := authenticator.WrapAudienceAgnosticToken(issuer.Audiences(), tokenfile.New(map[string]*user.DefaultInfo{
		adminToken: {Name: AdminUser, UID: AdminUser, Groups: []string{user.SystemPrivilegedGroup, user.AllAuthenticated}},
	}))
	// Service accounts from the shared informer's cache, then live (a token
	// issued for an account created a moment ago); pods, secrets and nodes
	// live.
	bound := boundObjects{accounts: inf.kube.Core().V1().ServiceAccounts().Lister(), client: inf.client}
	// Everyone authenticated is in system:authenticated, as kube-apiserver's
	// authenticators are wrapped (TokenReview's answers show it).
	tokens := tokencache.New(tokenunion.New(admin, issuer.Authenticator(bound)), true, tokenSuccessCacheTTL, 0)
	return group.NewAuthenticatedGroupAdder(union.New(bearertoken.New(tokens), websocket.NewProtocolAuthenticator(tokens)))
}

type boundObjects struct {
	accounts corev1listers.ServiceAccountLister
	client   kubernetes.Interface
}

func (b boundObjects) ServiceAccount(ctx context.Context, ns, name string) (*corev1.ServiceAccount, error) {
	if sa, err := b.accounts.ServiceAccounts(ns).Get(name); err == nil {
		return sa, nil
	}
	return b.client.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
}

func (b boundObjects) Pod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	return b.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
}

func (b boundObjects) Secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	return b.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
}

func (b boundObjects) Node(ctx context.Context, name string) (*corev1.Node, error) {
	return b.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

// requestAuthenticator authenticates client certificates the server's CA signed
// (common name the user, organizations the groups), or else bearer tokens,
// and everyone else as system:anonymous, then denied by authorization, as
// kube-apiserver does by default. A request whose credentials all fail is
// rejected (401), not downgraded to anonymous: a certificate of another
// server's CA too, unless a token of the request authenticates (the
// credentials are a union, as kube-apiserver's).
func requestAuthenticator(keys Keys, tokens authenticator.Request) authenticator.Request {
	credentials := group.NewAuthenticatedGroupAdder(union.New(certAuthenticator(keys), tokens))
	return union.NewFailOnError(credentials, anonymous.NewAuthenticator(nil))
}

// certAuthenticator authenticates client certificates: the front proxy's
// headers first, as kube-apiserver, then the server CA's; a certificate
// either of them verifies is enough.
func certAuthenticator(keys Keys) *verifiedCerts {
	opts := x509request.DefaultVerifyOptions()
	opts.Roots = keys.CA.Pool()
	return newVerifiedCerts(union.New(keys.FrontProxy.authenticator(), x509request.New(opts, x509request.CommonNameUserConversion)),
		keys.FrontProxy.verifyOptions(), keys.CA.Cert())
}
