package csrsigning

// Signing, as kube-controller-manager's signer and its
// PermissiveSigningPolicy (k8s.io/kubernetes/pkg/controller/certificates/
// authority) sign: the request's subject and names, the requested usages,
// no extensions, not a CA, backdated, for the requested duration within
// bounds and never past the CA.

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/util/certificate/csr"
)

const (
	// MaxDuration is the longest a certificate is valid:
	// kube-controller-manager's --cluster-signing-duration default. A
	// request's spec.expirationSeconds may ask for less.
	MaxDuration = 365 * 24 * time.Hour
	// MinDuration is the shortest: twice the backdating, so that a
	// certificate is valid for a while once issued.
	MinDuration = 10 * time.Minute
	// backdate is how long before signing a certificate becomes valid,
	// for clocks that lag the signer's.
	backdate = 5 * time.Minute
	// short is the validity under which the backdating is added to the
	// end too (5 minutes is roughly 1% of 8 hours).
	short = 8 * time.Hour
)

// duration is the validity of a certificate asked for with
// expirationSeconds: max when not asked, else the request within
// [MinDuration, max].
func duration(expirationSeconds *int32, max time.Duration) time.Duration {
	if expirationSeconds == nil {
		return max
	}
	switch d := csr.ExpirationSecondsToDuration(*expirationSeconds); {
	case d > max:
		return max
	case d < MinDuration:
		return MinDuration
	default:
		return d
	}
}

// validity is when a certificate signed at now for ttl is valid, before
// the signer's own expiry caps it.
func validity(now time.Time, ttl time.Duration) (notBefore, notAfter time.Time) {
	if ttl < short {
		return now.Add(-backdate), now.Add(ttl)
	}
	return now.Add(-backdate), now.Add(ttl - backdate)
}

// capped returns notAfter capped at the signer's expiry, or why a signer
// that has expired signs nothing.
func capped(now, notBefore, notAfter, signerNotAfter time.Time) (time.Time, error) {
	if !notAfter.Before(signerNotAfter) {
		notAfter = signerNotAfter
	}
	if !notBefore.Before(signerNotAfter) {
		return notAfter, fmt.Errorf("the signer has expired: NotAfter=%v", signerNotAfter)
	}
	if !now.Before(signerNotAfter) {
		return notAfter, fmt.Errorf("refusing to sign a certificate that expired in the past: NotAfter=%v", signerNotAfter)
	}
	return notAfter, nil
}

// sign issues the certificate req asks for, valid from the controller's
// clock, and returns it PEM-encoded (one CERTIFICATE block, no chain).
func (c *Controller) sign(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage, expirationSeconds *int32) ([]byte, error) {
	tmpl, err := template(req, usages)
	if err != nil {
		return nil, err
	}
	now, ttl := c.clock.Now(), duration(expirationSeconds, MaxDuration)
	// The CA's expiry is known from what the signer returns: sign, then
	// check, and sign again, capped, the rare certificate that would
	// outlive the CA.
	tmpl.NotBefore, tmpl.NotAfter = validity(now, ttl)
	certPEM, caPEM, err := c.ca.Sign(tmpl, req.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("failed to sign certificate: %w", err)
	}
	caNotAfter, err := notAfter(caPEM)
	if err != nil {
		return nil, err
	}
	end, err := capped(now, tmpl.NotBefore, tmpl.NotAfter, caNotAfter)
	if err != nil {
		return nil, err
	}
	if end.Equal(tmpl.NotAfter) {
		return certPEM, nil
	}
	tmpl.NotAfter = end
	if certPEM, _, err = c.ca.Sign(tmpl, req.PublicKey); err != nil {
		return nil, fmt.Errorf("failed to sign certificate: %w", err)
	}
	return certPEM, nil
}

// template is the certificate req asks for, without its validity: its
// subject and alternative names, the usages asked for, a random 128-bit
// serial, no extensions, not a CA.
func template(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) (*x509.Certificate, error) {
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("unable to verify certificate request signature: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("unable to generate a serial number for %s: %w", req.Subject.CommonName, err)
	}
	keyUsage, extKeyUsage, err := keyUsages(usages)
	if err != nil {
		return nil, err
	}
	return &x509.Certificate{
		SerialNumber: serial, Subject: req.Subject,
		DNSNames: req.DNSNames, IPAddresses: req.IPAddresses, EmailAddresses: req.EmailAddresses, URIs: req.URIs,
		KeyUsage: keyUsage, ExtKeyUsage: extKeyUsage,
		BasicConstraintsValid: true, IsCA: false,
	}, nil
}

// notAfter is the expiry of the first certificate in caPEM.
func notAfter(caPEM []byte) (time.Time, error) {
	block, _ := pem.Decode(caPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return time.Time{}, errors.New("the signer returned no CA certificate")
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return time.Time{}, fmt.Errorf("parse the signer's CA certificate: %w", err)
	}
	return ca.NotAfter, nil
}

// keyUsages translates usages to the certificate's key usage and its
// extended key usages (deduplicated, in numeric order, as upstream's).
func keyUsages(usages []certificatesv1.KeyUsage) (x509.KeyUsage, []x509.ExtKeyUsage, error) {
	var ku x509.KeyUsage
	var unrecognized []certificatesv1.KeyUsage
	seen := map[x509.ExtKeyUsage]bool{}
	for _, u := range usages {
		if k, ok := keyUsage(u); ok {
			ku |= k
		} else if e, ok := extKeyUsage(u); ok {
			seen[e] = true
		} else {
			unrecognized = append(unrecognized, u)
		}
	}
	if len(unrecognized) > 0 {
		return 0, nil, fmt.Errorf("unrecognized usage values: %q", unrecognized)
	}
	return ku, slices.Sorted(maps.Keys(seen)), nil
}

func keyUsage(u certificatesv1.KeyUsage) (x509.KeyUsage, bool) {
	switch u {
	case certificatesv1.UsageSigning, certificatesv1.UsageDigitalSignature:
		return x509.KeyUsageDigitalSignature, true
	case certificatesv1.UsageContentCommitment:
		return x509.KeyUsageContentCommitment, true
	case certificatesv1.UsageKeyEncipherment:
		return x509.KeyUsageKeyEncipherment, true
	case certificatesv1.UsageKeyAgreement:
		return x509.KeyUsageKeyAgreement, true
	case certificatesv1.UsageDataEncipherment:
		return x509.KeyUsageDataEncipherment, true
	case certificatesv1.UsageCertSign:
		return x509.KeyUsageCertSign, true
	case certificatesv1.UsageCRLSign:
		return x509.KeyUsageCRLSign, true
	case certificatesv1.UsageEncipherOnly:
		return x509.KeyUsageEncipherOnly, true
	case certificatesv1.UsageDecipherOnly:
		return x509.KeyUsageDecipherOnly, true
	}
	return 0, false
}

func extKeyUsage(u certificatesv1.KeyUsage) (x509.ExtKeyUsage, bool) {
	switch u {
	case certificatesv1.UsageAny:
		return x509.ExtKeyUsageAny, true
	case certificatesv1.UsageServerAuth:
		return x509.ExtKeyUsageServerAuth, true
	case certificatesv1.UsageClientAuth:
		return x509.ExtKeyUsageClientAuth, true
	case certificatesv1.UsageCodeSigning:
		return x509.ExtKeyUsageCodeSigning, true
	case certificatesv1.UsageEmailProtection, certificatesv1.UsageSMIME:
		return x509.ExtKeyUsageEmailProtection, true
	case certificatesv1.UsageIPsecEndSystem:
		return x509.ExtKeyUsageIPSECEndSystem, true
	case certificatesv1.UsageIPsecTunnel:
		return x509.ExtKeyUsageIPSECTunnel, true
	case certificatesv1.UsageIPsecUser:
		return x509.ExtKeyUsageIPSECUser, true
	case certificatesv1.UsageTimestamping:
		return x509.ExtKeyUsageTimeStamping, true
	case certificatesv1.UsageOCSPSigning:
		return x509.ExtKeyUsageOCSPSigning, true
	case certificatesv1.UsageMicrosoftSGC:
		return x509.ExtKeyUsageMicrosoftServerGatedCrypto, true
	case certificatesv1.UsageNetscapeSGC:
		return x509.ExtKeyUsageNetscapeServerGatedCrypto, true
	}
	return 0, false
}
