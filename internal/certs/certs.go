// Package certs issues the TLS material of in-process servers: a
// certificate authority per server, which signs its serving certificate
// and the client certificates that authenticate users to it, all ECDSA. RSA key generation dominated server
// start-up in a prototype; a P-256 key takes microseconds.
package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"

	asn1util "k8s.io/apimachinery/pkg/apis/asn1"
)

// CA is a certificate authority.
type CA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	CertPEM []byte
}

// NewCA returns a new self-signed CA valid for ten years.
func NewCA(commonName string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("sign CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Leaf is a certificate and key in PEM.
type Leaf struct {
	CertPEM, KeyPEM []byte
	// NotAfter is when the certificate expires.
	NotAfter time.Time
}

// Serving issues a serving certificate for hosts (IPs or DNS names), valid
// for a year.
func (ca *CA) Serving(hosts ...string) (Leaf, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kubeembed"},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return ca.issue(tmpl)
}

func (ca *CA) issue(tmpl *x509.Certificate) (Leaf, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Leaf{}, fmt.Errorf("generate key: %w", err)
	}
	now := time.Now()
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.Add(365 * 24 * time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return Leaf{}, fmt.Errorf("sign certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Leaf{}, err
	}
	return Leaf{
		CertPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:   pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		NotAfter: tmpl.NotAfter,
	}, nil
}

// Sign signs a certificate of template (its validity and serial as given;
// a zero serial gets a random one) for pub, as a cluster signer signs an
// approved CertificateSigningRequest, and returns it and the CA's
// certificate PEM-encoded.
func (ca *CA) Sign(template *x509.Certificate, pub crypto.PublicKey) (certPEM, caPEM []byte, err error) {
	tmpl := *template
	if tmpl.SerialNumber == nil {
		tmpl.SerialNumber = serial()
	}
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, ca.cert, pub, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign certificate: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ca.CertPEM, nil
}

// Client issues a client certificate for a user: the common name is the
// name, the organizations the groups, and the UID (when given) the subject
// attribute kube-apiserver reads it from (k8s.io/apimachinery/pkg/apis/asn1).
func (ca *CA) Client(name, uid string, groups []string) (Leaf, error) {
	subject := pkix.Name{CommonName: name, Organization: groups}
	if uid != "" {
		subject.ExtraNames = []pkix.AttributeTypeAndValue{{Type: asn1util.X509UID(), Value: uid}}
	}
	return ca.issue(&x509.Certificate{
		Subject:     subject,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// Cert is the CA's certificate; callers must not change it.
func (ca *CA) Cert() *x509.Certificate { return ca.cert }

// Pool returns a pool holding the CA's certificate.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		// crypto/rand does not fail on supported platforms.
		panic(err)
	}
	return n
}
