package apiserver_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcertificatesv1 "k8s.io/client-go/kubernetes/typed/certificates/v1"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// startCSRs starts a server with no controllers (none signs or approves
// behind the test's back) and returns its CSR client.
func startCSRs(t *testing.T) typedcertificatesv1.CertificateSigningRequestInterface {
	t.Helper()
	srv := apiservertest.Start(t, apiservertest.WithOptions(apiserver.Options{Controllers: []controllers.Name{}, Nodes: []controllers.Node{}}))
	return clientset(t, srv).CertificatesV1().CertificateSigningRequests()
}

// newCSR is a request of name for signer, for client auth, with a fresh
// P-256 key.
func newCSR(t *testing.T, name, signer string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: name}}, key)
	require.NoError(t, err)
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: signer, Usages: []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}},
	}
}

// Conditions written through /approval and /status without times get them
// from the server, as kube-apiserver's strategies fill them in: the update
// time is now; the transition time is that of the stored condition of the
// same type and status if there is one, else now. Times a writer sets are
// kept.
func TestCSRConditionTimestamps(t *testing.T) {
	t.Parallel()
	csrs := startCSRs(t)
	ctx := t.Context()
	csr, err := csrs.Create(ctx, newCSR(t, "alice", "example.com/signer"), metav1.CreateOptions{})
	require.NoError(t, err)
	// The server's times are in seconds.
	before := metav1.NewTime(time.Now().Add(-time.Second))
	recent := func(t *testing.T, tm metav1.Time, what string) {
		t.Helper()
		assert.False(t, tm.Before(&before), "%s %v is not set to now (%v or later)", what, tm, before)
		assert.False(t, tm.After(time.Now().Add(time.Second)), "%s %v is in the future", what, tm)
	}
	find := func(c *certificatesv1.CertificateSigningRequest, typ certificatesv1.RequestConditionType) certificatesv1.CertificateSigningRequestCondition {
		t.Helper()
		for _, cond := range c.Status.Conditions {
			if cond.Type == typ {
				return cond
			}
		}
		t.Fatalf("no %s condition in %+v", typ, c.Status.Conditions)
		return certificatesv1.CertificateSigningRequestCondition{}
	}

	// /approval, as kubectl certificate approve writes it, but without
	// times.
	csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{
		{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Test"}}
	csr, err = csrs.UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
	require.NoError(t, err)
	approved := find(csr, certificatesv1.CertificateApproved)
	recent(t, approved.LastUpdateTime, "approved lastUpdateTime")
	recent(t, approved.LastTransitionTime, "approved lastTransitionTime")

	// /status: a condition with times keeps them; one without gets now.
	long := metav1.NewTime(time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC))
	csr.Status.Conditions = append(csr.Status.Conditions,
		certificatesv1.CertificateSigningRequestCondition{Type: "Example", Status: corev1.ConditionTrue, Reason: "Test",
			LastUpdateTime: long, LastTransitionTime: long},
		certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue, Reason: "Test"})
	csr, err = csrs.UpdateStatus(ctx, csr, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, long.UTC(), find(csr, "Example").LastUpdateTime.UTC(), "example lastUpdateTime")
	assert.Equal(t, long.UTC(), find(csr, "Example").LastTransitionTime.UTC(), "example lastTransitionTime")
	recent(t, find(csr, certificatesv1.CertificateFailed).LastUpdateTime, "failed lastUpdateTime")
	recent(t, find(csr, certificatesv1.CertificateFailed).LastTransitionTime, "failed lastTransitionTime")
	assert.Equal(t, approved, find(csr, certificatesv1.CertificateApproved), "the approval is /approval's")

	// The same condition sent again without times: it was already in this
	// status, so it keeps its transition time; it is updated now.
	for i := range csr.Status.Conditions {
		if csr.Status.Conditions[i].Type == "Example" {
			csr.Status.Conditions[i].LastUpdateTime, csr.Status.Conditions[i].LastTransitionTime = metav1.Time{}, metav1.Time{}
		}
	}
	csr, err = csrs.UpdateStatus(ctx, csr, metav1.UpdateOptions{})
	require.NoError(t, err)
	recent(t, find(csr, "Example").LastUpdateTime, "example lastUpdateTime")
	assert.Equal(t, long.UTC(), find(csr, "Example").LastTransitionTime.UTC(), "example lastTransitionTime")
}

// certificates.k8s.io/v1 refuses new requests for
// kubernetes.io/legacy-unknown with kube-apiserver's error.
func TestCSRLegacySignerRefused(t *testing.T) {
	t.Parallel()
	csrs := startCSRs(t)
	for _, dryRun := range [][]string{nil, {metav1.DryRunAll}} {
		_, err := csrs.Create(t.Context(), newCSR(t, "legacy", "kubernetes.io/legacy-unknown"), metav1.CreateOptions{DryRun: dryRun})
		require.True(t, apierrors.IsInvalid(err), "want Invalid, got %v", err)
		assert.EqualError(t, err, `CertificateSigningRequest.certificates.k8s.io "legacy" is invalid: spec.signerName: `+
			`Invalid value: "kubernetes.io/legacy-unknown": the legacy signerName is not allowed via this API version`)
		var status apierrors.APIStatus
		require.ErrorAs(t, err, &status)
		require.NotNil(t, status.Status().Details)
		assert.Equal(t, []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Field: "spec.signerName",
			Message: `Invalid value: "kubernetes.io/legacy-unknown": the legacy signerName is not allowed via this API version`}},
			status.Status().Details.Causes)
	}
	_, err := csrs.Create(t.Context(), newCSR(t, "other", "example.com/legacy-unknown"), metav1.CreateOptions{})
	assert.NoError(t, err, "only the kubernetes.io legacy signer is refused")
}

// A CSR has the managed fields kube-apiserver gives it. Its spec and
// status are reset fields of the main resource (the strategies'
// GetResetFields), so nobody owns them there: a request that sets nothing
// else has no managed fields at all, and, as none are tracked, later
// updates add none either (the field manager skips objects created
// without: "before-first-apply"), on kube-apiserver too. Metadata a
// requestor sets is theirs, and /approval and /status writes are tracked
// under their subresource.
func TestCSRManagedFields(t *testing.T) {
	t.Parallel()
	csrs := startCSRs(t)
	ctx := t.Context()
	fieldsOf := func(e metav1.ManagedFieldsEntry) map[string]any {
		t.Helper()
		require.NotNil(t, e.FieldsV1)
		var m map[string]any
		require.NoError(t, json.Unmarshal(e.FieldsV1.Raw, &m))
		return m
	}

	_, err := csrs.Create(ctx, newCSR(t, "plain", "example.com/signer"), metav1.CreateOptions{FieldManager: "requestor"})
	require.NoError(t, err)
	plain, err := csrs.Get(ctx, "plain", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, plain.ManagedFields, "nothing but the spec, which nobody owns")

	labelled := newCSR(t, "labelled", "example.com/signer")
	labelled.Labels = map[string]string{"app": "demo"}
	_, err = csrs.Create(ctx, labelled, metav1.CreateOptions{FieldManager: "requestor"})
	require.NoError(t, err)
	csr, err := csrs.Get(ctx, "labelled", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, csr.ManagedFields, 1)
	assert.Equal(t, "requestor", csr.ManagedFields[0].Manager)
	assert.Equal(t, metav1.ManagedFieldsOperationUpdate, csr.ManagedFields[0].Operation)
	assert.Equal(t, "certificates.k8s.io/v1", csr.ManagedFields[0].APIVersion)
	assert.Empty(t, csr.ManagedFields[0].Subresource)
	assert.Equal(t, map[string]any{"f:metadata": map[string]any{"f:labels": map[string]any{".": map[string]any{}, "f:app": map[string]any{}}}},
		fieldsOf(csr.ManagedFields[0]), "the labels, not the spec")

	csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{
		{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Test"}}
	csr, err = csrs.UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{FieldManager: "approver"})
	require.NoError(t, err)
	csr.Status.Certificate = selfSignedPEM(t)
	csr, err = csrs.UpdateStatus(ctx, csr, metav1.UpdateOptions{FieldManager: "signer"})
	require.NoError(t, err)

	csr, err = csrs.Get(ctx, "labelled", metav1.GetOptions{})
	require.NoError(t, err)
	bySubresource := map[string]metav1.ManagedFieldsEntry{}
	for _, e := range csr.ManagedFields {
		bySubresource[e.Subresource] = e
	}
	require.Len(t, bySubresource, 3, "%+v", csr.ManagedFields)
	assert.Equal(t, "requestor", bySubresource[""].Manager)
	assert.Equal(t, "approver", bySubresource["approval"].Manager)
	assert.Contains(t, fieldsOf(bySubresource["approval"])["f:status"].(map[string]any)["f:conditions"], `k:{"type":"Approved"}`)
	assert.Equal(t, "signer", bySubresource["status"].Manager)
	assert.Equal(t, map[string]any{"f:status": map[string]any{"f:certificate": map[string]any{}}}, fieldsOf(bySubresource["status"]))
}

// selfSignedPEM is a PEM CERTIFICATE block, as a signer writes one.
func selfSignedPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "alice"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
