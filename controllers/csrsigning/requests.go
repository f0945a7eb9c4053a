package csrsigning

// What the kubernetes.io signers of kube-controller-manager's own accept
// (k8s.io/kubernetes/pkg/controller/certificates/signer): the kubelet
// signers' checks are the approver's too, in internal/certificates.

import (
	"crypto/x509"
	"fmt"

	certificatesv1 "k8s.io/api/certificates/v1"
)

// validateAPIServerClient is the kubernetes.io/kube-apiserver-client
// signer's check: any subject, client auth with at most digital signature
// and key encipherment besides.
func validateAPIServerClient(_ *x509.CertificateRequest, usages []certificatesv1.KeyUsage) error {
	clientAuth := false
	for _, u := range usages {
		switch u {
		case certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment:
		case certificatesv1.UsageClientAuth:
			clientAuth = true
		default:
			return fmt.Errorf("invalid usage for client certificate: %s", u)
		}
	}
	if !clientAuth {
		return fmt.Errorf("missing required usage for client certificate: %s", certificatesv1.UsageClientAuth)
	}
	return nil
}

// validateLegacyUnknown accepts anything: kubernetes.io/legacy-unknown
// keeps certificates/v1beta1's behaviour.
func validateLegacyUnknown(*x509.CertificateRequest, []certificatesv1.KeyUsage) error { return nil }
