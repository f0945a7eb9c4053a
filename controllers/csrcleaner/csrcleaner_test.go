package csrcleaner_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// create creates the request name for signer with usage, valid for
// expirationSeconds if set, and approves or denies it (with the update time
// kubectl gives) as decision says: "" leaves it pending.
func create(t *testing.T, c kubernetes.Interface, name, signer string, usage certificatesv1.KeyUsage, expirationSeconds *int32,
	decision certificatesv1.RequestConditionType) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: name}}, key)
	require.NoError(t, err)
	csr, err := c.CertificatesV1().CertificateSigningRequests().Create(t.Context(), &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: signer, ExpirationSeconds: expirationSeconds,
			Usages:  []certificatesv1.KeyUsage{usage},
			Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})},
	}, metav1.CreateOptions{})
	require.NoError(t, err, name)
	if decision == "" {
		return
	}
	csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: decision, Status: corev1.ConditionTrue,
		Reason: "Test", LastUpdateTime: metav1.Now()}}
	_, err = c.CertificatesV1().CertificateSigningRequests().UpdateApproval(t.Context(), name, csr, metav1.UpdateOptions{})
	require.NoError(t, err, name)
}

// names lists the requests left.
func names(t *testing.T, c kubernetes.Interface) []string {
	t.Helper()
	list, err := c.CertificatesV1().CertificateSigningRequests().List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	var out []string
	for _, csr := range list.Items {
		out = append(out, csr.Name)
	}
	slices.Sort(out)
	return out
}

// The cleaner passes when it starts and every hour of its clock, and
// deletes issued requests approved over an hour ago, denied and failed ones
// over an hour ago, those whose certificate has expired, and pending or
// approved but unissued ones after 24 hours.
func TestCleaner(t *testing.T) {
	t.Parallel()
	// Whole seconds, as the API keeps times: the server's (creation,
	// approval) are then never before the clock's start.
	clk := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{
		Controllers: []controllers.Name{controllers.CSRSigning, controllers.CSRApproving, controllers.CSRCleaner},
		Nodes:       []controllers.Node{}, Clock: clk,
	}))
	c, err := srv.Clientset()
	require.NoError(t, err)
	const client, auth = certificatesv1.KubeAPIServerClientSignerName, certificatesv1.UsageClientAuth
	create(t, c, "pending", client, auth, nil, "")
	create(t, c, "denied", client, auth, nil, certificatesv1.CertificateDenied)
	create(t, c, "issued", client, auth, nil, certificatesv1.CertificateApproved)
	create(t, c, "unissued", "example.com/nobody", auth, nil, certificatesv1.CertificateApproved)
	// Failed by the signer (no client auth usage) at the clock's time.
	create(t, c, "failed", client, certificatesv1.UsageDigitalSignature, nil, certificatesv1.CertificateApproved)
	// Valid for 10 minutes from the clock's now, approved with no time,
	// so that only its expiry counts.
	create(t, c, "expiring", client, auth, ptr.To[int32](600), "")
	csr, err := c.CertificatesV1().CertificateSigningRequests().Get(t.Context(), "expiring", metav1.GetOptions{})
	require.NoError(t, err)
	csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved,
		Status: corev1.ConditionTrue, Reason: "Test"}}
	_, err = c.CertificatesV1().CertificateSigningRequests().UpdateApproval(t.Context(), "expiring", csr, metav1.UpdateOptions{})
	require.NoError(t, err)
	apiservertest.WaitIdle(t, srv)
	all := []string{"denied", "expiring", "failed", "issued", "pending", "unissued"}
	require.Equal(t, all, names(t, c), "young requests are kept")

	clk.Step(time.Hour)
	apiservertest.WaitIdle(t, srv)
	assert.Equal(t, []string{"denied", "failed", "issued", "pending", "unissued"}, names(t, c),
		"an hour on, the expired certificate's request is gone; the others are an hour old, not more")

	clk.Step(time.Minute)
	apiservertest.WaitIdle(t, srv)
	assert.Equal(t, []string{"denied", "failed", "issued", "pending", "unissued"}, names(t, c), "no pass until the next hour")

	clk.Step(time.Hour)
	apiservertest.WaitIdle(t, srv)
	assert.Equal(t, []string{"pending", "unissued"}, names(t, c), "issued, denied and failed are cleaned after an hour")

	clk.Step(21 * time.Hour)
	apiservertest.WaitIdle(t, srv)
	assert.Equal(t, []string{"pending", "unissued"}, names(t, c), "pending and unissued are kept for 24 hours")

	clk.Step(time.Hour)
	apiservertest.WaitIdle(t, srv)
	assert.Empty(t, names(t, c), "after 24 hours")
}
