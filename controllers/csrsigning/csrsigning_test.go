package csrsigning_test

import (
	"crypto/x509"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver/controllers/csrsigning"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// An approved kube-apiserver-client request is signed by the server's CA
// with the usages asked for, valid for a year from 5 minutes ago, and the
// certificate authenticates its subject: common name the user,
// organizations the groups.
func TestSignKubeAPIServerClient(t *testing.T) {
	t.Parallel()
	srv, c := start(t, nil)
	req, key := request(t, subject("alice", "dev", "ops"))
	create(t, c, "alice", certificatesv1.KubeAPIServerClientSignerName, req, nil,
		certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth)
	decide(t, c, "alice", true)
	apiservertest.WaitIdle(t, srv)

	cert := issued(t, c, "alice")
	verify(t, srv, cert, x509.ExtKeyUsageClientAuth)
	assert.Equal(t, "alice", cert.Subject.CommonName)
	assert.Equal(t, []string{"dev", "ops"}, cert.Subject.Organization)
	assert.Equal(t, x509.KeyUsageDigitalSignature|x509.KeyUsageKeyEncipherment, cert.KeyUsage)
	assert.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, cert.ExtKeyUsage)
	assert.True(t, cert.BasicConstraintsValid)
	assert.False(t, cert.IsCA)
	assert.Equal(t, csrsigning.MaxDuration, cert.NotAfter.Sub(cert.NotBefore))
	assert.WithinDuration(t, time.Now().Add(-5*time.Minute), cert.NotBefore, time.Minute)

	got := whoami(t, srv, c, "alice", key)
	assert.Equal(t, "alice", got.Username)
	assert.Equal(t, []string{"dev", "ops", "system:authenticated"}, got.Groups)
	assert.Equal(t, []string{"X509SHA256=" + fingerprint(cert)}, []string(got.Extra["authentication.kubernetes.io/credential-id"]),
		"authenticated by this certificate")

}

// A kube-apiserver-client-kubelet request for a node is signed once
// approved, and authenticates the node. The admin who asks may create
// nodeclient requests (system:masters), so the approver approves it, as on
// a cluster.
func TestSignKubeletClient(t *testing.T) {
	t.Parallel()
	srv, c := start(t, nil)
	req, key := request(t, subject("system:node:n1", "system:nodes"))
	create(t, c, "n1", certificatesv1.KubeAPIServerClientKubeletSignerName, req, nil,
		certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth)
	apiservertest.WaitIdle(t, srv)

	conditions := get(t, c, "n1").Status.Conditions
	require.Len(t, conditions, 1)
	assert.Equal(t, "AutoApproved", conditions[0].Reason)
	cert := issued(t, c, "n1")
	verify(t, srv, cert, x509.ExtKeyUsageClientAuth)
	assert.Equal(t, x509.KeyUsageDigitalSignature, cert.KeyUsage)
	got := whoami(t, srv, c, "n1", key)
	assert.Equal(t, "system:node:n1", got.Username)
	assert.Equal(t, []string{"system:nodes", "system:authenticated"}, got.Groups)
}

// An approved kubelet-serving request is signed for server auth with the
// request's DNS and IP names.
func TestSignKubeletServing(t *testing.T) {
	t.Parallel()
	srv, c := start(t, nil)
	tmpl := subject("system:node:n1", "system:nodes")
	tmpl.DNSNames, tmpl.IPAddresses = []string{"n1.example.com"}, []net.IP{net.ParseIP("10.0.0.1")}
	req, _ := request(t, tmpl)
	create(t, c, "n1-serving", certificatesv1.KubeletServingSignerName, req, nil,
		certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth)
	decide(t, c, "n1-serving", true)
	apiservertest.WaitIdle(t, srv)

	cert := issued(t, c, "n1-serving")
	verify(t, srv, cert, x509.ExtKeyUsageServerAuth)
	assert.Equal(t, []string{"n1.example.com"}, cert.DNSNames)
	require.Len(t, cert.IPAddresses, 1)
	assert.True(t, cert.IPAddresses[0].Equal(net.ParseIP("10.0.0.1")))
	assert.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, cert.ExtKeyUsage)
	assert.NoError(t, cert.VerifyHostname("n1.example.com"))
}

// kube-controller-manager runs a kubernetes.io/legacy-unknown signer that
// signs anything, but certificates/v1 refuses to create such requests, as
// kube-apiserver does; a server that accepts one has it signed.
func TestSignLegacyUnknown(t *testing.T) {
	t.Parallel()
	srv, c := start(t, nil)
	tmpl := subject("anything", "any-org")
	tmpl.URIs = []*url.URL{{Scheme: "spiffe", Host: "example.com", Path: "/a"}}
	req, _ := request(t, tmpl)
	_, err := c.CertificatesV1().CertificateSigningRequests().Create(t.Context(), &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "legacy"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: req, SignerName: "kubernetes.io/legacy-unknown",
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageServerAuth, certificatesv1.UsageCodeSigning, certificatesv1.UsageClientAuth}},
	}, metav1.CreateOptions{})
	if apierrors.IsInvalid(err) {
		assert.ErrorContains(t, err, "the legacy signerName is not allowed via this API version")
		t.Log("refused, as kube-apiserver refuses it")
		return
	}
	require.NoError(t, err)
	decide(t, c, "legacy", true)
	apiservertest.WaitIdle(t, srv)
	cert := issued(t, c, "legacy")
	assert.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageCodeSigning}, cert.ExtKeyUsage,
		"in numeric order")
	require.Len(t, cert.URIs, 1)
	assert.Equal(t, "spiffe://example.com/a", cert.URIs[0].String())
}

// A request its signer refuses gets upstream's Failed condition, with the
// refusal as message and the controller's clock as update time, and no
// certificate.
func TestSignerValidationFailure(t *testing.T) {
	t.Parallel()
	now := time.Now().Truncate(time.Second)
	srv, c := start(t, clocktesting.NewFakeClock(now))
	node := subject("system:node:n1", "system:nodes")
	withDNS, servingCN := node, subject("n1", "system:nodes")
	withDNS.DNSNames, servingCN.DNSNames = []string{"n1.example.com"}, []string{"n1.example.com"}
	withEmail := withDNS
	withEmail.EmailAddresses = []string{"n1@example.com"}
	client := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	serving := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	cases := []struct {
		name, signer string
		tmpl         x509.CertificateRequest
		usages       []certificatesv1.KeyUsage
		want         string
	}{
		{"client-no-client-auth", certificatesv1.KubeAPIServerClientSignerName, subject("alice"),
			[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature}, "missing required usage for client certificate: client auth"},
		{"client-server-auth", certificatesv1.KubeAPIServerClientSignerName, subject("alice"),
			[]certificatesv1.KeyUsage{certificatesv1.UsageClientAuth, certificatesv1.UsageServerAuth}, "invalid usage for client certificate: server auth"},
		{"kubelet-client-cn", certificatesv1.KubeAPIServerClientKubeletSignerName, subject("alice", "system:nodes"), client,
			"subject common name does not begin with system:node:"},
		{"kubelet-client-org", certificatesv1.KubeAPIServerClientKubeletSignerName, subject("system:node:n1", "system:nodes", "extra"), client,
			"subject organization is not system:nodes"},
		{"kubelet-client-dns", certificatesv1.KubeAPIServerClientKubeletSignerName, withDNS, client, "DNS subjectAltNames are not allowed"},
		{"kubelet-client-usages", certificatesv1.KubeAPIServerClientKubeletSignerName, node,
			[]certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}, "usages did not match [client auth digital signature key encipherment]"},
		{"kubelet-serving-no-names", certificatesv1.KubeletServingSignerName, node, serving, "DNS or IP subjectAltName is required"},
		{"kubelet-serving-email", certificatesv1.KubeletServingSignerName, withEmail, serving, "Email subjectAltNames are not allowed"},
		{"kubelet-serving-usages", certificatesv1.KubeletServingSignerName, withDNS, client,
			"usages did not match [digital signature key encipherment server auth]"},
		{"kubelet-serving-cn", certificatesv1.KubeletServingSignerName, servingCN, serving, "subject common name does not begin with system:node:"},
	}
	for _, tc := range cases {
		req, _ := request(t, tc.tmpl)
		create(t, c, tc.name, tc.signer, req, nil, tc.usages...)
		decide(t, c, tc.name, true)
	}
	apiservertest.WaitIdle(t, srv)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			csr := get(t, c, tc.name)
			assert.Empty(t, csr.Status.Certificate)
			require.Len(t, csr.Status.Conditions, 2)
			want := certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue,
				Reason: "SignerValidationFailure", Message: tc.want, LastUpdateTime: metav1.NewTime(now)}
			assert.Empty(t, cmp.Diff(want, csr.Status.Conditions[1],
				cmpopts.IgnoreFields(certificatesv1.CertificateSigningRequestCondition{}, "LastTransitionTime")))
		})
	}
}

// Requests that are not approved, denied, or for a signer it does not run
// are left alone: no certificate, no condition added.
func TestLeftAlone(t *testing.T) {
	t.Parallel()
	srv, c := start(t, nil)
	req, _ := request(t, subject("alice"))
	create(t, c, "pending", certificatesv1.KubeAPIServerClientSignerName, req, nil, certificatesv1.UsageClientAuth)
	create(t, c, "denied", certificatesv1.KubeAPIServerClientSignerName, req, nil, certificatesv1.UsageClientAuth)
	decide(t, c, "denied", false)
	create(t, c, "other", "example.com/signer", req, nil, certificatesv1.UsageClientAuth)
	decide(t, c, "other", true)
	create(t, c, "other-kubernetes-io", "kubernetes.io/unknown", req, nil, certificatesv1.UsageServerAuth)
	decide(t, c, "other-kubernetes-io", true)
	apiservertest.WaitIdle(t, srv)
	for name, conditions := range map[string]int{"pending": 0, "denied": 1, "other": 1, "other-kubernetes-io": 1} {
		csr := get(t, c, name)
		assert.Empty(t, csr.Status.Certificate, name)
		assert.Len(t, csr.Status.Conditions, conditions, name)
	}
}

// A certificate is valid from 5 minutes before the controller's clock for
// spec.expirationSeconds, at most a year (the default), less the backdating
// from 8 hours up; the API refuses less than 10 minutes.
func TestExpirationSeconds(t *testing.T) {
	t.Parallel()
	now := time.Now().Truncate(time.Second)
	srv, c := start(t, clocktesting.NewFakeClock(now))
	year := csrsigning.MaxDuration
	want := map[string]time.Duration{"default": year - 5*time.Minute, "ten-minutes": 10 * time.Minute, "hour": time.Hour,
		"eight-hours": 8*time.Hour - 5*time.Minute, "two-years": year - 5*time.Minute}
	asked := map[string]*int32{"default": nil, "ten-minutes": ptr.To[int32](600), "hour": ptr.To[int32](3600),
		"eight-hours": ptr.To[int32](8 * 3600), "two-years": ptr.To[int32](2 * 365 * 24 * 3600)}
	req, _ := request(t, subject("alice"))
	for name, seconds := range asked {
		create(t, c, name, certificatesv1.KubeAPIServerClientSignerName, req, seconds, certificatesv1.UsageClientAuth)
		decide(t, c, name, true)
	}
	_, err := c.CertificatesV1().CertificateSigningRequests().Create(t.Context(), &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "too-short"},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: req, SignerName: certificatesv1.KubeAPIServerClientSignerName,
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}, ExpirationSeconds: ptr.To[int32](599)},
	}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsInvalid(err), "under 10 minutes: %v", err)
	apiservertest.WaitIdle(t, srv)
	for name, d := range want {
		cert := issued(t, c, name)
		assert.True(t, cert.NotBefore.Equal(now.Add(-5*time.Minute)), "%s: NotBefore %v", name, cert.NotBefore)
		assert.True(t, cert.NotAfter.Equal(now.Add(d)), "%s: NotAfter %v, want %v", name, cert.NotAfter, now.Add(d))
	}
}
