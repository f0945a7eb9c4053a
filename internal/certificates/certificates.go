// Package certificates is what kube-controller-manager's certificate
// controllers share about a CertificateSigningRequest, as they share
// k8s.io/kubernetes/pkg/apis/certificates/helpers.go: parsing its request,
// and what the two kubelet signers accept. The signing controller
// (controllers/csrsigning) refuses what they do not accept; the approving
// controller (controllers/csrapproving) approves only kubelet client
// requests the signer would sign.
//
// The errors' texts are upstream's (the signer writes them as its Failed
// conditions' messages), and the checks run in upstream's order, so the
// first failure is the one reported.
package certificates

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// ParseCSR decodes a request's PEM CERTIFICATE REQUEST block
// (spec.request) and parses it.
func ParseCSR(pemBytes []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("PEM block type must be CERTIFICATE REQUEST")
	}
	return x509.ParseCertificateRequest(block.Bytes)
}

// ValidateKubeletServingCSR returns why the kubernetes.io/kubelet-serving
// signer refuses req with usages, or nil: the subject must be
// system:node:<name> in exactly system:nodes, with DNS or IP names only,
// for server auth.
func ValidateKubeletServingCSR(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	switch {
	case !slices.Equal(req.Subject.Organization, []string{"system:nodes"}):
		return errors.New("subject organization is not system:nodes")
	case len(req.DNSNames) == 0 && len(req.IPAddresses) == 0:
		return errors.New("DNS or IP subjectAltName is required")
	case len(req.EmailAddresses) > 0:
		return errors.New("Email subjectAltNames are not allowed")
	case len(req.URIs) > 0:
		return errors.New("URI subjectAltNames are not allowed")
	}
	if err := kubeletUsagesMatch(usages, certificatesv1.UsageServerAuth); err != nil {
		return err
	}
	if !strings.HasPrefix(req.Subject.CommonName, "system:node:") {
		return errors.New("subject common name does not begin with system:node:")
	}
	return nil
}

// ValidateKubeletClientCSR returns why the
// kubernetes.io/kube-apiserver-client-kubelet signer refuses req with
// usages, or nil: the subject must be system:node:<name> in exactly
// system:nodes, with no subject alternative names, for client auth. Which
// node asks is not checked: approving is the approver's business.
func ValidateKubeletClientCSR(req *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	switch {
	case !slices.Equal(req.Subject.Organization, []string{"system:nodes"}):
		return errors.New("subject organization is not system:nodes")
	case len(req.DNSNames) > 0:
		return errors.New("DNS subjectAltNames are not allowed")
	case len(req.EmailAddresses) > 0:
		return errors.New("Email subjectAltNames are not allowed")
	case len(req.IPAddresses) > 0:
		return errors.New("IP subjectAltNames are not allowed")
	case len(req.URIs) > 0:
		return errors.New("URI subjectAltNames are not allowed")
	case !strings.HasPrefix(req.Subject.CommonName, "system:node:"):
		return errors.New("subject common name does not begin with system:node:")
	}
	return kubeletUsagesMatch(usages, certificatesv1.UsageClientAuth)
}

// kubeletUsagesMatch returns nil if usages, as a set, is one a kubelet
// signer accepts for auth (server or client auth): with key encipherment
// (RSA keys) or without.
func kubeletUsagesMatch(usages []certificatesv1.KeyUsage, auth certificatesv1.KeyUsage) error {
	have := sets.New[string]()
	for _, u := range usages {
		have.Insert(string(u))
	}
	rsa := sets.New(string(certificatesv1.UsageDigitalSignature), string(certificatesv1.UsageKeyEncipherment), string(auth))
	noRSA := sets.New(string(certificatesv1.UsageDigitalSignature), string(auth))
	if !have.Equal(rsa) && !have.Equal(noRSA) {
		return fmt.Errorf("usages did not match %v", sets.List(rsa))
	}
	return nil
}
