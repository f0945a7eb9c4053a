package certificates

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
)

func TestParseCSR(t *testing.T) {
	t.Parallel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "alice"}}, key)
	require.NoError(t, err)

	req, err := ParseCSR(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
	require.NoError(t, err)
	assert.Equal(t, "alice", req.Subject.CommonName)

	for name, in := range map[string][]byte{
		"not PEM":    []byte("hello"),
		"other type": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
	} {
		_, err := ParseCSR(in)
		assert.EqualError(t, err, "PEM block type must be CERTIFICATE REQUEST", name)
	}
	_, err = ParseCSR(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: []byte("junk")}))
	assert.Error(t, err, "a block that does not parse")
}

// The kubelet signers' checks, each refusal with upstream's message: the
// first failing check in upstream's order is the one reported.
func TestValidateKubeletCSRs(t *testing.T) {
	t.Parallel()
	node := func(mutate func(*x509.CertificateRequest)) *x509.CertificateRequest {
		req := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:n1", Organization: []string{"system:nodes"}}}
		if mutate != nil {
			mutate(req)
		}
		return req
	}
	withDNS := func(r *x509.CertificateRequest) { r.DNSNames = []string{"n1.example.com"} }
	usages := func(u ...certificatesv1.KeyUsage) []certificatesv1.KeyUsage { return u }
	client := usages(certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth)
	clientRSA := usages(certificatesv1.UsageKeyEncipherment, certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth)
	serving := usages(certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth)

	for _, tc := range []struct {
		name     string
		validate func(*x509.CertificateRequest, []certificatesv1.KeyUsage) error
		req      *x509.CertificateRequest
		usages   []certificatesv1.KeyUsage
		want     string // "" for accepted
	}{
		{"client", ValidateKubeletClientCSR, node(nil), client, ""},
		{"client with key encipherment", ValidateKubeletClientCSR, node(nil), clientRSA, ""},
		{"client organizations", ValidateKubeletClientCSR, node(func(r *x509.CertificateRequest) { r.Subject.Organization = append(r.Subject.Organization, "x") }),
			client, "subject organization is not system:nodes"},
		{"client DNS", ValidateKubeletClientCSR, node(withDNS), client, "DNS subjectAltNames are not allowed"},
		{"client email", ValidateKubeletClientCSR, node(func(r *x509.CertificateRequest) { r.EmailAddresses = []string{"n1@example.com"} }),
			client, "Email subjectAltNames are not allowed"},
		{"client IP", ValidateKubeletClientCSR, node(func(r *x509.CertificateRequest) { r.IPAddresses = []net.IP{net.IPv4(10, 0, 0, 1)} }),
			client, "IP subjectAltNames are not allowed"},
		{"client URI", ValidateKubeletClientCSR, node(func(r *x509.CertificateRequest) { r.URIs = []*url.URL{{Scheme: "spiffe", Host: "n1"}} }),
			client, "URI subjectAltNames are not allowed"},
		{"client common name", ValidateKubeletClientCSR, node(func(r *x509.CertificateRequest) { r.Subject.CommonName = "n1" }),
			client, "subject common name does not begin with system:node:"},
		{"client usages", ValidateKubeletClientCSR, node(nil), serving, "usages did not match [client auth digital signature key encipherment]"},

		{"serving", ValidateKubeletServingCSR, node(withDNS), serving, ""},
		{"serving IP only", ValidateKubeletServingCSR, node(func(r *x509.CertificateRequest) { r.IPAddresses = []net.IP{net.IPv4(10, 0, 0, 1)} }), serving, ""},
		{"serving no names", ValidateKubeletServingCSR, node(nil), serving, "DNS or IP subjectAltName is required"},
		{"serving usages before common name", ValidateKubeletServingCSR, node(func(r *x509.CertificateRequest) { withDNS(r); r.Subject.CommonName = "n1" }),
			client, "usages did not match [digital signature key encipherment server auth]"},
		{"serving common name", ValidateKubeletServingCSR, node(func(r *x509.CertificateRequest) { withDNS(r); r.Subject.CommonName = "n1" }),
			serving, "subject common name does not begin with system:node:"},
	} {
		err := tc.validate(tc.req, tc.usages)
		if tc.want == "" {
			assert.NoError(t, err, tc.name)
		} else {
			assert.EqualError(t, err, tc.want, tc.name)
		}
	}
}
