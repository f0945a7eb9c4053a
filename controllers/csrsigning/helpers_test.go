package csrsigning_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// start starts a server running the three certificate controllers (and
// no nodes) on clk (nil: the real clock), with an admin client.
func start(t *testing.T, clk *clocktesting.FakeClock) (*apiserver.Server, kubernetes.Interface) {
	t.Helper()
	opts := apiserver.Options{
		Controllers: []controllers.Name{controllers.CSRSigning, controllers.CSRApproving, controllers.CSRCleaner},
		Nodes:       []controllers.Node{},
	}
	if clk != nil {
		opts.Clock = clk
	}
	srv := apiservertest.Start(t, apiservertest.WithOptions(opts))
	c, err := srv.Clientset()
	require.NoError(t, err)
	return srv, c
}

// request returns a PEM certificate request for tmpl and its P-256 key.
func request(t *testing.T, tmpl x509.CertificateRequest) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.CreateCertificateRequest(rand.Reader, &tmpl, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), key
}

// subject is a request for the common name cn in organizations orgs.
func subject(cn string, orgs ...string) x509.CertificateRequest {
	return x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: orgs}}
}

// create creates the request name of req for signer with usages.
func create(t *testing.T, c kubernetes.Interface, name, signer string, req []byte, expirationSeconds *int32,
	usages ...certificatesv1.KeyUsage) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	csr, err := c.CertificatesV1().CertificateSigningRequests().Create(t.Context(), &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: req, SignerName: signer, Usages: usages,
			ExpirationSeconds: expirationSeconds},
	}, metav1.CreateOptions{})
	require.NoError(t, err, name)
	return csr
}

// decide approves (or denies) the request name as kubectl certificate
// approve (deny) does.
func decide(t *testing.T, c kubernetes.Interface, name string, approve bool) {
	t.Helper()
	csr, err := c.CertificatesV1().CertificateSigningRequests().Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	cond := certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue,
		Reason: "KubectlApprove", Message: "This CSR was approved by kubectl certificate approve.", LastUpdateTime: metav1.Now()}
	if !approve {
		cond.Type, cond.Reason, cond.Message = certificatesv1.CertificateDenied, "KubectlDeny", "This CSR was denied by kubectl certificate deny."
	}
	csr.Status.Conditions = append(csr.Status.Conditions, cond)
	_, err = c.CertificatesV1().CertificateSigningRequests().UpdateApproval(t.Context(), name, csr, metav1.UpdateOptions{})
	require.NoError(t, err, name)
}

// get returns the request name.
func get(t *testing.T, c kubernetes.Interface, name string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	csr, err := c.CertificatesV1().CertificateSigningRequests().Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err, name)
	return csr
}

// issued returns the certificate issued to the request name, which must be
// one PEM CERTIFICATE block and nothing else.
func issued(t *testing.T, c kubernetes.Interface, name string) *x509.Certificate {
	t.Helper()
	csr := get(t, c, name)
	require.NotEmpty(t, csr.Status.Certificate, "%s: no certificate; conditions %+v", name, csr.Status.Conditions)
	block, rest := pem.Decode(csr.Status.Certificate)
	require.NotNil(t, block)
	require.Equal(t, "CERTIFICATE", block.Type)
	require.Empty(t, rest, "a single certificate, no chain")
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return cert
}

// verify checks that the server's CA signed cert for usage.
func verify(t *testing.T, srv *apiserver.Server, cert *x509.Certificate, usage x509.ExtKeyUsage) {
	t.Helper()
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(srv.CACert()))
	_, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}, CurrentTime: time.Now()})
	require.NoError(t, err)
}

// whoami authenticates to srv with the certificate issued to the request
// name and key, and returns who the server says it is.
func whoami(t *testing.T, srv *apiserver.Server, c kubernetes.Interface, name string, key *ecdsa.PrivateKey) authenticationv1.UserInfo {
	t.Helper()
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	cfg := rest.AnonymousClientConfig(srv.RESTConfig())
	cfg.CertData, cfg.KeyData = get(t, c, name).Status.Certificate, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	user, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	review, err := user.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	return review.Status.UserInfo
}

// fingerprint is cert's SHA-256 in hex, as the server names the
// credential.
func fingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	return hex.EncodeToString(sum[:])
}
