package csrsigning

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// The API refuses expirationSeconds under 600, but the signer clamps them
// as upstream does in case one comes through.
func TestDuration(t *testing.T) {
	t.Parallel()
	assert.Equal(t, MaxDuration, duration(nil, MaxDuration))
	assert.Equal(t, MinDuration, duration(ptr.To[int32](1), MaxDuration))
	assert.Equal(t, 11*time.Minute, duration(ptr.To[int32](660), MaxDuration))
	assert.Equal(t, MaxDuration, duration(ptr.To[int32](1<<30), MaxDuration))
}

// Usages map as upstream's policy maps them: synonyms, deduplicated
// extended usages in numeric order, and every unknown one named.
func TestKeyUsages(t *testing.T) {
	t.Parallel()
	ku, ext, err := keyUsages([]certificatesv1.KeyUsage{"ocsp signing", "crl sign", "s/mime", "email protection", "content commitment", "signing"})
	require.NoError(t, err)
	assert.Equal(t, x509.KeyUsageCRLSign|x509.KeyUsageContentCommitment|x509.KeyUsageDigitalSignature, ku)
	assert.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageEmailProtection, x509.ExtKeyUsageOCSPSigning}, ext)
	_, ext, err = keyUsages([]certificatesv1.KeyUsage{"digital signature"})
	require.NoError(t, err)
	assert.Nil(t, ext)
	_, _, err = keyUsages([]certificatesv1.KeyUsage{"client auth", "nope", "never"})
	assert.EqualError(t, err, `unrecognized usage values: ["nope" "never"]`)
}

// testCA is a CA that expires at notAfter.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, notAfter time.Time) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, NotBefore: notAfter.Add(-48 * time.Hour),
		NotAfter: notAfter, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (ca *testCA) Sign(tmpl *x509.Certificate, pub crypto.PublicKey) ([]byte, []byte, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ca.pem, nil
}

func testRequest(t *testing.T) *x509.CertificateRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "alice"}}, key)
	require.NoError(t, err)
	req, err := x509.ParseCertificateRequest(der)
	require.NoError(t, err)
	return req
}

// A certificate never outlives its CA, and an expired CA signs nothing,
// with upstream's messages.
func TestSignCappedByCA(t *testing.T) {
	t.Parallel()
	now := time.Now().Truncate(time.Second)
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}

	c := &Controller{ca: newTestCA(t, now.Add(time.Hour)), clock: clocktesting.NewFakeClock(now)}
	certPEM, err := c.sign(testRequest(t), usages, nil)
	require.NoError(t, err)
	block, _ := pem.Decode(certPEM)
	require.NotNil(t, block)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	assert.True(t, cert.NotAfter.Equal(now.Add(time.Hour)), "capped at the CA's expiry: %v", cert.NotAfter)
	assert.True(t, cert.NotBefore.Equal(now.Add(-5*time.Minute)))

	expired := now.Add(-time.Minute)
	c.ca = newTestCA(t, expired)
	_, err = c.sign(testRequest(t), usages, nil)
	assert.EqualError(t, err, "refusing to sign a certificate that expired in the past: NotAfter="+expired.UTC().String())
	long := now.Add(-10 * time.Minute)
	c.ca = newTestCA(t, long)
	_, err = c.sign(testRequest(t), usages, nil)
	assert.EqualError(t, err, "the signer has expired: NotAfter="+long.UTC().String())
}
